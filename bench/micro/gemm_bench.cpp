// GEMM micro-benchmark: ddpbench's CPU GEMM path against raw oneDNN and OpenBLAS, on the GEMMs
// of one mlp-small training step at batch 64.
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
// Three implementations per shape, each on one thread:
//   ddpbench  ddpb::ops::gemm on CPU tensors: dispatch, shape checks, the bias pre-load and
//             the ReLU epilogue included (this is what training pays);
//   onednn    dnnl_sgemm (the call attention's GEMMs make; ddpbench's Linear GEMMs run the
//             matmul primitive instead, Note [oneDNN matmul plans]) with the same shapes and
//             transposes, beta = 0, no epilogue, OpenMP held to one thread;
//   openblas  cblas_sgemm likewise, after openblas_set_num_threads(1): what PyTorch's CPU
//             build (and ddpbench before it moved to oneDNN) calls.
// Counter "FLOPS" = 2 M N K per iteration, as a rate (FLOP/s).
//
// --gemm_workloads=LIST (comma-separated, or "all") adds the GEMMs of other CPU presets,
// derived from the family table (workloads/families.cpp) at their default batch, one
// training step each (ops::gemm calls only; gpt's attention runs in its own kernel, not here):
//   gpt-tiny  batch 8 x seq 64 = 512 tokens, d=128, vocab 512, 2 layers: per block c_attn
//             (128 -> 384), attn.c_proj (128 -> 128), mlp.c_fc (128 -> 512), mlp.c_proj
//             (512 -> 128), each fwd/dx/dw and 2 calls per step (one per layer), plus the LM
//             head tied to wte (logits = h wte^T, 128 -> 512, no bias), 1 call;
//   embed     batch 64: head.0 (16 ids x 64 = 1024 -> 256, bias + ReLU), head.1 (256 -> 16).
// They are named gemm/<impl>/<workload>.<shape> and are off by default, so the default run
// (which scripts/peer/gemm_ratio.sh weights into one mlp-small step) is unchanged; the
// "workload" label of each row says which step its calls_per_step counts. Every list comes
// from workloads/training_gemms.h, as the suite's GEMM peak's does.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cpu/cpu_backend.h"
#include "core/ops.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "workloads/model.h"
#include "workloads/training_gemms.h"

namespace {

using ddpb::Device;
using ddpb::DType;
using ddpb::Tensor;

// One benchmarked GEMM: a GEMM of a training step (workloads/training_gemms.h) and its
// benchmark name (mlp-small's unprefixed, so the default run's names stay put).
struct GemmShape : ddpb::TrainingGemm {
  std::string bench_name;
};

// The GEMMs of one training step of `name` at its family's default batch (64 samples, 8
// sequences for gpt: workloads/families.cpp).
std::vector<GemmShape> workload_shapes(const std::string& name, bool prefixed) {
  const ddpb::WorkloadSpec& spec = ddpb::find_workload(name);
  if (spec.gpu_size) {
    DDPB_USAGE_FAIL() << "--gemm_workloads: " << name << " is a GPU-sized preset";
  }
  const int64_t batch = ddpb::default_global_batch(name);
  std::vector<GemmShape> out;
  for (const ddpb::TrainingGemm& g : ddpb::training_gemms(spec, batch)) {
    out.push_back({g, prefixed ? name + "." + g.name() : g.name()});
  }
  return out;
}

// Takes --gemm_workloads=LIST out of argv (Google Benchmark rejects flags it does not know)
// and returns the extra shapes. "all" = gpt-tiny and embed.
std::vector<GemmShape> take_extra_workloads(int* argc, char** argv) {
  constexpr const char* kFlag = "--gemm_workloads=";
  std::vector<std::string> names;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) != 0) {
      argv[kept++] = argv[i];
      continue;
    }
    std::stringstream list(argv[i] + std::strlen(kFlag));
    for (std::string w; std::getline(list, w, ',');) {
      if (w == "all") {
        names.insert(names.end(), {"gpt-tiny", "embed"});
      } else if (!w.empty() && w != "mlp-small") {
        names.push_back(w);
      }
    }
  }
  *argc = kept;
  std::vector<GemmShape> shapes;
  for (const std::string& w : names) {
    bool seen = false;
    for (const GemmShape& s : shapes) seen = seen || s.workload == w;
    if (seen) continue;
    for (GemmShape& s : workload_shapes(w, /*prefixed=*/true)) shapes.push_back(std::move(s));
  }
  return shapes;
}

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
  state.counters["FLOPS"] =
      benchmark::Counter(flops * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["M"] = double(s.m);
  state.counters["N"] = double(s.n);
  state.counters["K"] = double(s.k);
  state.counters["calls_per_step"] = s.calls;
  state.SetLabel(s.workload);
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
                static_cast<blasint>(s.n), static_cast<blasint>(s.k), 1.0f, a, lda, b, ldb, 0.0f, c,
                static_cast<blasint>(s.n));
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  set_counters(state, s);
}

void bm_onednn(benchmark::State& state, const GemmShape& s) {
  ddpb::cpu::use_openmp_threads(1);
  Operands o(s);
  const float* a = o.a.data<float>();
  const float* b = o.b.data<float>();
  float* c = o.c.data<float>();
  const int64_t lda = o.a.size(1), ldb = o.b.size(1);
  for (auto _ : state) {
    if (dnnl_sgemm(s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a, lda, b,
                   ldb, 0.0f, c, s.n) != dnnl_success) {
      state.SkipWithError("dnnl_sgemm failed");
      break;
    }
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  set_counters(state, s);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<GemmShape> shapes;
  try {
    shapes = workload_shapes("mlp-small", /*prefixed=*/false);
    for (GemmShape& s : take_extra_workloads(&argc, argv)) shapes.push_back(std::move(s));
  } catch (const std::exception& e) {
    std::cerr << "gemm_bench: " << e.what() << "\n";
    return 2;
  }
  // Registered here, not statically, so that nothing depends on static-initialisation order
  // (the GEMM touches ddpbench's CPU backend) and the shapes come from one place.
  for (const GemmShape& s : shapes) {
    benchmark::RegisterBenchmark(("gemm/ddpbench/" + s.bench_name).c_str(), bm_ddpbench, s)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("gemm/onednn/" + s.bench_name).c_str(), bm_onednn, s)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("gemm/openblas/" + s.bench_name).c_str(), bm_openblas, s)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::string workloads = "mlp-small, batch 64";
  for (const GemmShape& s : shapes) {
    if (workloads.find(s.workload) != std::string::npos) continue;
    const ddpb::WorkloadSpec& spec = ddpb::find_workload(s.workload);
    workloads += "; " + s.workload + ", batch " +
                 std::to_string(ddpb::default_global_batch(s.workload)) +
                 (spec.seq_len > 0 ? " x seq " + std::to_string(spec.seq_len) : "");
  }
  benchmark::AddCustomContext("workload", workloads);
  benchmark::AddCustomContext("threads", "1 (oneDNN and OpenBLAS pinned to one thread)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
