// GEMM micro-benchmark: ddpbench's CPU GEMM path against raw OpenBLAS, on the GEMMs of one
// mlp-small training step at batch 64.
//
// A Linear layer y = act(x W^T + b), x [64, in], W [out, in], runs three GEMMs per step
// (core/functional.cpp, fn::linear and LinearBackward):
//   fwd  y  = x  W^T (+ bias, + ReLU for hidden layers)   M=64,  N=out, K=in   (B transposed)
//   dx   dx = dy W                                         M=64,  N=in,  K=out
//   dw   dW = dy^T x                                       M=out, N=in,  K=64   (A transposed)
// mlp-small is 1024 -> 1024 x3 -> 10, so each GEMM comes in a "hidden" (1024 x 1024) and a
// "head" (10 x 1024) variant. calls_per_step counts how often one training step runs it
// (the first layer has no dx: its input needs no gradient), so that scripts/peer/gemm_ratio.sh
// can weight the shapes into the GEMM time of a whole step.
//
// Two implementations per shape, each on one thread:
//   ddpbench  ddpb::ops::gemm on CPU tensors: dispatch, shape checks, the bias pre-load and
//             the ReLU epilogue included (this is what training pays);
//   openblas  cblas_sgemm with the same shapes and transposes, beta = 0, no epilogue, after
//             openblas_set_num_threads(1).
// Counter "FLOPS" = 2 M N K per iteration, as a rate (FLOP/s).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace {

using ddpb::DType;
using ddpb::Device;
using ddpb::Tensor;

struct GemmShape {
  const char* name;
  int64_t m, n, k;
  bool trans_a, trans_b;
  bool bias;
  ddpb::ops::Activation act;
  int calls_per_step;  // in one mlp-small training step
};

constexpr int64_t kBatch = 64, kHidden = 1024, kClasses = 10;
const GemmShape kShapes[] = {
    {"fwd_hidden", kBatch, kHidden, kHidden, false, true, true, ddpb::ops::Activation::ReLU, 3},
    {"fwd_head", kBatch, kClasses, kHidden, false, true, true, ddpb::ops::Activation::None, 1},
    {"dx_hidden", kBatch, kHidden, kHidden, false, false, false, ddpb::ops::Activation::None, 2},
    {"dx_head", kBatch, kHidden, kClasses, false, false, false, ddpb::ops::Activation::None, 1},
    {"dw_hidden", kHidden, kHidden, kBatch, true, false, false, ddpb::ops::Activation::None, 3},
    {"dw_head", kClasses, kHidden, kBatch, true, false, false, ddpb::ops::Activation::None, 1},
};

// The operands of one shape, filled with N(0, 1) so that no denormals slow either side.
struct Operands {
  Tensor a, b, c, bias;
  explicit Operands(const GemmShape& s) {
    a = random(s.trans_a ? ddpb::Shape{s.k, s.m} : ddpb::Shape{s.m, s.k}, 1);
    b = random(s.trans_b ? ddpb::Shape{s.n, s.k} : ddpb::Shape{s.k, s.n}, 2);
    c = Tensor::zeros({s.m, s.n}, DType::F32, Device::cpu());
    if (s.bias) bias = random({s.n}, 3);
  }
  static Tensor random(const ddpb::Shape& shape, unsigned seed) {
    Tensor t = Tensor::empty(shape, DType::F32, Device::cpu());
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist;
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen);
    return t;
  }
};

void set_counters(benchmark::State& state, const GemmShape& s) {
  const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
  state.counters["FLOPS"] = benchmark::Counter(flops * double(state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.counters["M"] = double(s.m);
  state.counters["N"] = double(s.n);
  state.counters["K"] = double(s.k);
  state.counters["calls_per_step"] = s.calls_per_step;
}

void bm_ddpbench(benchmark::State& state, const GemmShape& s) {
  try {
    Operands o(s);
    ddpb::Stream& stream = ddpb::current_stream(Device::cpu());
    for (auto _ : state) {
      ddpb::ops::gemm(o.a, s.trans_a, o.b, s.trans_b, o.c, 1.0f, 0.0f, o.bias, s.act);
      stream.synchronize();  // a no-op on the inline CPU stream; keeps the timing honest
      benchmark::DoNotOptimize(o.c.data<float>());
      benchmark::ClobberMemory();
    }
    set_counters(state, s);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("ddpb::ops::gemm failed: ") + e.what()).c_str());
  }
}

void bm_openblas(benchmark::State& state, const GemmShape& s) {
  openblas_set_num_threads(1);
  Operands o(s);
  const float* a = o.a.data<float>();
  const float* b = o.b.data<float>();
  float* c = o.c.data<float>();
  // Row-major leading dimensions are the stored row lengths.
  const auto lda = static_cast<blasint>(o.a.size(1)), ldb = static_cast<blasint>(o.b.size(1));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                s.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(s.m),
                static_cast<blasint>(s.n), static_cast<blasint>(s.k), 1.0f, a, lda, b, ldb, 0.0f,
                c, static_cast<blasint>(s.n));
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  set_counters(state, s);
}

}  // namespace

int main(int argc, char** argv) {
  // Registered here, not statically, so that nothing depends on static-initialisation order
  // (the GEMM touches ddpbench's CPU backend) and the list is the one table above.
  for (const GemmShape& s : kShapes) {
    benchmark::RegisterBenchmark((std::string("gemm/ddpbench/") + s.name).c_str(), bm_ddpbench, s)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("gemm/openblas/") + s.name).c_str(), bm_openblas, s)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("workload", "mlp-small, batch 64");
  benchmark::AddCustomContext("threads", "1 (OpenBLAS pinned to one thread on both sides)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
