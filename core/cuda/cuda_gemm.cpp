// GEMM on cuBLASLt with row-major semantics.
//
// Note [Row-major GEMM on column-major cuBLASLt]
// A row-major [r, c] buffer is, read column-major, the [c, r] matrix: its transpose. So the
// row-major product C = op(A) op(B) is computed as the column-major product
//   C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m),
// i.e. cuBLASLt's "A" is our b (transposed when trans_b) and its "B" is our a (transposed when
// trans_a); the output is column-major n x m with leading dimension n. The bias [n], added to
// every row of the row-major C, is then one value per *row* of the column-major output, which
// is exactly how cuBLASLt's BIAS epilogues broadcast (bias length = rows of D).
#include "core/cuda/cuda_gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/gemm_epilogue.h"

namespace ddpb::gpu {
namespace {

constexpr int kMaxDevices = kMaxDeviceIndex;

// Created on first use and deliberately never destroyed: a handle destroyed from a static
// destructor can outlive the CUDA runtime at process exit.
cublasLtHandle_t lt_handle(int device) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  DDPB_CHECK(device >= 0 && device < kMaxDevices) << "cuda:" << device << " out of range";
  std::call_once(once[device], [device] {
    DeviceScope scope(device);
    CUBLAS_CHECK(cublasLtCreate(&handles[device])) << "on cuda:" << device;
  });
  return handles[device];
}

// RAII for the cuBLASLt descriptors built per call (host-only objects, cheap to create).
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  MatmulDesc(cublasComputeType_t compute) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  }
  ~MatmulDesc() { cublasLtMatmulDescDestroy(desc); }
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attr, const T& value) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)))
        << "matmul attribute " << static_cast<int>(attr);
  }
};

struct MatrixLayout {
  cublasLtMatrixLayout_t layout = nullptr;
  // Column-major rows x cols with leading dimension `rows`, `batch` matrices `stride` apart.
  MatrixLayout(int64_t rows, int64_t cols, int64_t batch, int64_t stride) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, static_cast<uint64_t>(rows),
                                            static_cast<uint64_t>(cols), rows))
        << rows << " x " << cols;
    if (batch > 1) {
      const auto count = static_cast<int32_t>(batch);
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                    &count, sizeof(count)));
      CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }
  ~MatrixLayout() { cublasLtMatrixLayoutDestroy(layout); }
};

struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  Preference() { CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref)); }
  ~Preference() { cublasLtMatmulPreferenceDestroy(pref); }
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)))
        << "preference attribute " << static_cast<int>(attr);
  }
};

// Largest power of two (<= 256) that divides the address of every batch item. Views into
// flat buffers (DDP buckets, narrowed tensors) need not be 256-byte aligned, and cuBLASLt
// assumes 256 unless told otherwise.
uint32_t alignment_bytes(const void* ptr, int64_t stride_elems) {
  const auto bits = reinterpret_cast<uintptr_t>(ptr) |
                    static_cast<uintptr_t>(stride_elems * static_cast<int64_t>(sizeof(float)));
  uint32_t align = 256;
  while (align > 1 && (bits & (align - 1)) != 0) align /= 2;
  return align;
}

// Note [GEMM epilogues keep NaN]: only the bias is fused.
cublasLtEpilogue_t cublaslt_epilogue(FusedEpilogue fused) {
  return fused == FusedEpilogue::Bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// Heuristic queries cost far more than the descriptors, so their answers are kept per
// problem. An empty optional records that cuBLASLt offers no algorithm (for an epilogue).
using AlgoKey = std::array<int64_t, 17>;
std::mutex g_algo_mutex;

// A cuBLASLt failure taken as "unsupported" where a fallback exists: said once per problem
// (the answer is cached), so that a reduced-precision run that fell back is never silent.
void log_fallback(const char* where, cublasStatus_t status, const Matmul& mm) {
  std::fprintf(stderr,
               "ddpbench: cuBLASLt: %s returned %s for the GEMM [%lld, %lld] x [%lld, %lld] "
               "(batch %lld); falling back\n",
               where, cublasGetStatusString(status), static_cast<long long>(mm.m),
               static_cast<long long>(mm.k), static_cast<long long>(mm.k),
               static_cast<long long>(mm.n), static_cast<long long>(mm.batch));
}
std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> g_algo_cache;

// Runs the matmul with `epilogue`. Returns false, having enqueued nothing, when cuBLASLt has
// no algorithm for it and allow_unsupported is set; throws otherwise.
bool try_matmul(const GemmContext& ctx, const Matmul& mm, cublasLtEpilogue_t epilogue,
                bool allow_unsupported) {
  // f32 operands and output in every mode; the compute type decides what the tensor cores
  // see: exact f32, operands rounded to tf32, or rounded to bf16 with f32 accumulation.
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (ctx.math_mode == ops::MathMode::TF32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (ctx.math_mode == ops::MathMode::BF16) compute = CUBLAS_COMPUTE_32F_FAST_16BF;
  const cublasLtHandle_t handle = lt_handle(ctx.device);

  MatmulDesc op(compute);
  const cublasOperation_t op_b = mm.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = mm.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  op.set(CUBLASLT_MATMUL_DESC_TRANSA, op_b);  // see Note [Row-major GEMM ...]
  op.set(CUBLASLT_MATMUL_DESC_TRANSB, op_a);
  op.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (epilogue == CUBLASLT_EPILOGUE_BIAS) op.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, mm.bias);

  const MatrixLayout lt_a(mm.trans_b ? mm.k : mm.n, mm.trans_b ? mm.n : mm.k, mm.batch,
                          mm.stride_b);
  const MatrixLayout lt_b(mm.trans_a ? mm.m : mm.k, mm.trans_a ? mm.k : mm.m, mm.batch,
                          mm.stride_a);
  const MatrixLayout lt_c(mm.n, mm.m, mm.batch, mm.stride_c);

  const uint32_t align_a = alignment_bytes(mm.b, mm.stride_b);
  const uint32_t align_b = alignment_bytes(mm.a, mm.stride_a);
  const uint32_t align_c = alignment_bytes(mm.c, mm.stride_c);
  const AlgoKey key = {ctx.device,
                       static_cast<int64_t>(compute),
                       mm.trans_a,
                       mm.trans_b,
                       mm.m,
                       mm.n,
                       mm.k,
                       mm.batch,
                       mm.stride_a,
                       mm.stride_b,
                       mm.stride_c,
                       static_cast<int64_t>(epilogue),
                       align_a,
                       align_b,
                       align_c,
                       mm.beta == 0.0f,
                       static_cast<int64_t>(ctx.workspace_bytes)};

  std::optional<cublasLtMatmulAlgo_t> algo;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    if (auto it = g_algo_cache.find(key); it != g_algo_cache.end()) {
      algo = it->second;
      cached = true;
    }
  }
  if (!cached) {
    Preference pref;
    pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(ctx.workspace_bytes));
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle, op.desc, lt_a.layout, lt_b.layout, lt_c.layout,
                                       lt_c.layout, pref.pref, 1, &result, &returned);
    if (status == CUBLAS_STATUS_SUCCESS && returned > 0) {
      algo = result.algo;
    } else if (status != CUBLAS_STATUS_SUCCESS) {
      // Where a fallback exists, any failure means "unsupported" (cached below, so logged
      // once per problem); only a caller without one sees the error.
      if (!allow_unsupported) {
        CUBLAS_CHECK(status) << "heuristic for [" << mm.m << ", " << mm.k << "] x [" << mm.k << ", "
                             << mm.n << "]";
      }
      log_fallback("the heuristic", status, mm);
    }
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    g_algo_cache.emplace(key, algo);
  }

  if (!algo) {
    DDPB_CHECK_TYPED(CublasError, allow_unsupported)
        << "cuBLASLt has no algorithm for the GEMM [" << mm.m << ", " << mm.k << "] x [" << mm.k
        << ", " << mm.n << "] (trans_a=" << mm.trans_a << ", trans_b=" << mm.trans_b << ", batch "
        << mm.batch << ", alignments " << align_a << "/" << align_b << "/" << align_c << ")";
    return false;
  }
  const cublasStatus_t status = cublasLtMatmul(
      handle, op.desc, &mm.alpha, mm.b, lt_a.layout, mm.a, lt_b.layout, &mm.beta, mm.c, lt_c.layout,
      mm.c, lt_c.layout, &*algo, ctx.workspace, ctx.workspace_bytes, ctx.stream);
  if (status != CUBLAS_STATUS_SUCCESS && allow_unsupported) {
    log_fallback("cublasLtMatmul", status, mm);
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    g_algo_cache[key] = std::nullopt;  // do not try this epilogue again for the problem
    return false;
  }
  CUBLAS_CHECK(status) << "GEMM [" << mm.m << ", " << mm.k << "] x [" << mm.k << ", " << mm.n
                       << "], batch " << mm.batch;
  return true;
}

}  // namespace

GemmContext gemm_context(const Device& device) {
  CudaStream& stream = current_cuda_stream(device);
  GemmContext ctx;
  ctx.device = device.index;
  ctx.stream = stream.handle();
  ctx.workspace = stream.gemm_workspace();
  ctx.workspace_bytes = CudaStream::kGemmWorkspaceBytes;
  ctx.math_mode = ops::math_mode();
  return ctx;
}

void launch_matmul(const GemmContext& ctx, const Matmul& mm) {
  DDPB_CHECK(mm.m >= 0 && mm.n >= 0 && mm.k >= 0 && mm.batch >= 1)
      << "GEMM [" << mm.m << ", " << mm.k << "] x [" << mm.k << ", " << mm.n << "], batch "
      << mm.batch;
  DDPB_CHECK(mm.bias == nullptr || mm.batch == 1) << "GEMM bias is for unbatched GEMMs only";
  if (mm.m == 0 || mm.n == 0) return;
  DDPB_CHECK(mm.c != nullptr) << "GEMM without an output";

  if (mm.k == 0) {
    // An empty product: c = act(beta * c + bias). cuBLASLt has no algorithm for k = 0.
    DDPB_CHECK(mm.batch == 1 || mm.stride_c == mm.m * mm.n)
        << "batched GEMM with k = 0 needs densely packed outputs";
    const int64_t total = mm.batch * mm.m * mm.n;
    if (mm.beta == 0.0f) {
      launch_fill(mm.c, total, 0.0f, ctx.stream);
    } else if (mm.beta != 1.0f) {
      launch_scale(mm.c, total, mm.beta, ctx.stream);
    }
    launch_bias_activation(mm.c, mm.batch * mm.m, mm.n, mm.bias, mm.act, ctx.stream);
    return;
  }
  DDPB_CHECK(mm.a != nullptr && mm.b != nullptr) << "GEMM without inputs";

  const EpiloguePlan plan = plan_epilogue(mm.bias != nullptr, mm.act);
  // cuBLASLt documents no alignment rule for the bias pointer; an unaligned view (a bias
  // inside a flat parameter buffer) takes the separate kernel rather than risk a fault.
  const bool bias_aligned = mm.bias == nullptr || alignment_bytes(mm.bias, 0) >= 16;
  // The plain product. Should cuBLASLt offer nothing for a reduced-precision compute type
  // (tf32/bf16) on some layout, exact fp32 computes it rather than failing the step.
  auto plain = [&] {
    if (ctx.math_mode == ops::MathMode::FP32) {
      try_matmul(ctx, mm, CUBLASLT_EPILOGUE_DEFAULT, /*allow_unsupported=*/false);
      return;
    }
    if (try_matmul(ctx, mm, CUBLASLT_EPILOGUE_DEFAULT, /*allow_unsupported=*/true)) return;
    GemmContext exact = ctx;
    exact.math_mode = ops::MathMode::FP32;
    try_matmul(exact, mm, CUBLASLT_EPILOGUE_DEFAULT, /*allow_unsupported=*/false);
  };
  const bool dense = mm.batch == 1 || mm.stride_c == mm.m * mm.n;
  const float* separate_bias = mm.bias;  // what the element-wise pass still has to add
  if (plan.fused == FusedEpilogue::None) {
    plain();
  } else if (bias_aligned &&
             try_matmul(ctx, mm, cublaslt_epilogue(plan.fused), /*allow_unsupported=*/true)) {
    separate_bias = nullptr;
  } else {
    plain();
  }
  if (separate_bias == nullptr && plan.separate == ops::Activation::None) return;
  DDPB_CHECK(dense) << "batched GEMM with an activation needs densely packed outputs";
  launch_bias_activation(mm.c, mm.batch * mm.m, mm.n, separate_bias, plan.separate, ctx.stream);
}

}  // namespace ddpb::gpu
