// oneDNN's engine and per-thread streams, and the planned GEMM of the Linear layers.
//
// Note [oneDNN matmul plans]
// CpuBackend::gemm (every Linear layer, forward and backward) runs oneDNN's matmul primitive
// rather than its sgemm call: where the CPU has AVX-512, the primitive's brgemm kernels run
// the forward product x W^T (B transposed) 25% faster than sgemm does on mlp-small's shapes,
// and the other two products as fast; with AVX2 only, both take the same JIT GEMM
// (docs/performance.md). A primitive is built for one shape, transposes, leading dimensions,
// alpha and beta (milliseconds), so the plans are cached per thread, as the convolutions' are
// (Note [oneDNN convolution plans]): the shapes of a training step repeat every step. Alpha is
// the primitive's output scale and beta its sum post-op, so C = alpha op(A) op(B) + beta C as
// in BLAS. The raw-pointer sgemm of attention keeps oneDNN's sgemm call: its tiles are small
// and vary at the edges, where a plan's bookkeeping would cost more than it saves.
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/onednn.h"

namespace ddpb::cpu {

dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& onednn_stream(int openmp_threads) {
  thread_local std::optional<dnnl::stream> stream;
  use_openmp_threads(openmp_threads);
  if (!stream) stream.emplace(onednn_engine());
  return *stream;
}

std::string onednn_summary() {
  static constexpr std::pair<dnnl_cpu_isa_t, const char*> kIsaNames[] = {
      {dnnl_cpu_isa_sse41, "sse41"},
      {dnnl_cpu_isa_avx, "avx"},
      {dnnl_cpu_isa_avx2, "avx2"},
      {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
      {dnnl_cpu_isa_avx512_core, "avx512_core"},
      {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
      {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
      {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"}};
  const dnnl_cpu_isa_t effective = dnnl_get_effective_cpu_isa();
  const char* isa = "baseline";
  for (const auto& [value, name] : kIsaNames) {
    if (value == effective) isa = name;
  }
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + ", ISA " + isa;
}

namespace {

using dnnl::memory;

// A plan's key. Alpha and beta by their bits, so that -0.0 and NaN have keys of their own.
struct MatmulShape {
  bool trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  uint32_t alpha_bits, beta_bits;
  float alpha() const { return std::bit_cast<float>(alpha_bits); }
  float beta() const { return std::bit_cast<float>(beta_bits); }
  auto tie() const {
    return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha_bits, beta_bits);
  }
  bool operator<(const MatmulShape& o) const { return tie() < o.tie(); }
};

// Row-major [rows, cols] with leading dimension ld, or its transpose when `transposed` (the
// buffer then holds [cols, rows]).
memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed) {
  return memory::desc({rows, cols}, memory::data_type::f32,
                      transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

struct MatmulPlan {
  dnnl::matmul primitive;
  memory a, b, c;  // handles set per call
};

std::unique_ptr<MatmulPlan> make_plan(const MatmulShape& s) {
  const memory::desc a = matrix(s.m, s.k, s.lda, s.trans_a);
  const memory::desc b = matrix(s.k, s.n, s.ldb, s.trans_b);
  const memory::desc c = matrix(s.m, s.n, s.ldc, false);
  dnnl::primitive_attr attr;
  if (s.alpha() != 1.0f) attr.set_output_scales(0, {s.alpha()});
  if (s.beta() != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(s.beta());
    attr.set_post_ops(ops);
  }
  dnnl::engine& e = onednn_engine();
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, e);
  auto plan = std::make_unique<MatmulPlan>();
  plan->primitive = dnnl::matmul(pd);
  plan->a = memory(a, e, DNNL_MEMORY_NONE);
  plan->b = memory(b, e, DNNL_MEMORY_NONE);
  plan->c = memory(c, e, DNNL_MEMORY_NONE);
  return plan;
}

MatmulPlan& plan_for(const MatmulShape& s) {
  thread_local std::map<MatmulShape, std::unique_ptr<MatmulPlan>> plans;
  auto& slot = plans[s];
  if (!slot) {
    try {
      slot = make_plan(s);
    } catch (const dnnl::error& e) {
      plans.erase(s);
      DDPB_FAIL() << "oneDNN has no matmul for " << s.m << "x" << s.n << "x" << s.k << ": "
                  << e.what();
    }
  }
  return *slot;
}

}  // namespace

void planned_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  MatmulPlan& plan = plan_for({trans_a, trans_b, m, n, k, lda, ldb, ldc,
                               std::bit_cast<uint32_t>(alpha), std::bit_cast<uint32_t>(beta)});
  dnnl::stream& stream = onednn_stream(blas_threads());
  plan.a.set_data_handle(const_cast<float*>(a));
  plan.b.set_data_handle(const_cast<float*>(b));
  plan.c.set_data_handle(c);
  plan.primitive.execute(
      stream, {{DNNL_ARG_SRC, plan.a}, {DNNL_ARG_WEIGHTS, plan.b}, {DNNL_ARG_DST, plan.c}});
  stream.wait();
}

}  // namespace ddpb::cpu
