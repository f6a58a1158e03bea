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
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

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
  // Column-major rows x cols of `type` with leading dimension `rows`, `batch` matrices
  // `stride` elements apart.
  MatrixLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t batch, int64_t stride) {
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
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

// Largest power of two (<= 256) that divides the address of every batch item, items
// `stride_elems` elements of `elem_bytes` apart. Views into flat buffers (DDP buckets,
// narrowed tensors) need not be 256-byte aligned, and cuBLASLt assumes 256 unless told
// otherwise.
uint32_t alignment_bytes(const void* ptr, int64_t stride_elems, size_t elem_bytes) {
  const auto bits = reinterpret_cast<uintptr_t>(ptr) |
                    static_cast<uintptr_t>(stride_elems * static_cast<int64_t>(elem_bytes));
  uint32_t align = 256;
  while (align > 1 && (bits & (align - 1)) != 0) align /= 2;
  return align;
}

// The alignments told to cuBLASLt, in its naming (Note [Row-major GEMM ...]: its A is our b).
struct Alignments {
  uint32_t a, b, c;
};

cudaDataType_t cuda_data_type(DType dtype) {
  return dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;  // launch_matmul checked the rest
}

// bf16 operands accumulate in exact f32 whatever the math mode (Note [bf16 GEMM outputs round
// once]). f32 operands follow it: exact f32, or the tensor cores see the operands rounded to
// tf32, or to bf16 with f32 accumulation.
cublasComputeType_t compute_type(const GemmContext& ctx, const Matmul& mm) {
  if (mm.ab_dtype == DType::BF16) return CUBLAS_COMPUTE_32F;
  if (ctx.math_mode == ops::MathMode::TF32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  if (ctx.math_mode == ops::MathMode::BF16) return CUBLAS_COMPUTE_32F_FAST_16BF;
  return CUBLAS_COMPUTE_32F;
}

// Note [GEMM epilogues keep NaN]: only the bias is fused.
cublasLtEpilogue_t cublaslt_epilogue(FusedEpilogue fused) {
  return fused == FusedEpilogue::Bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// Heuristic queries cost far more than the descriptors, so their answers are kept per
// problem. An empty optional records that cuBLASLt offers no algorithm (for an epilogue).
using AlgoKey = std::array<int64_t, 19>;
std::mutex g_algo_mutex;
std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> g_algo_cache;

AlgoKey algo_key(const GemmContext& ctx, const Matmul& mm, cublasComputeType_t compute,
                 cublasLtEpilogue_t epilogue, const Alignments& align) {
  return {ctx.device,
          static_cast<int64_t>(compute),
          static_cast<int64_t>(mm.ab_dtype),
          static_cast<int64_t>(mm.c_dtype),
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
          align.a,
          align.b,
          align.c,
          mm.beta == 0.0f,
          static_cast<int64_t>(ctx.workspace_bytes)};
}

// A cuBLASLt failure taken as "unsupported" where a fallback exists: said once per problem
// (the answer is cached), so that a reduced-precision run that fell back is never silent.
void log_fallback(const char* where, cublasStatus_t status, const Matmul& mm) {
  const std::string_view ab = dtype_name(mm.ab_dtype), c = dtype_name(mm.c_dtype);
  std::fprintf(stderr,
               "ddpbench: cuBLASLt: %s returned %s for the GEMM [%lld, %lld] x [%lld, %lld] "
               "(batch %lld, %.*s into %.*s); falling back\n",
               where, cublasGetStatusString(status), static_cast<long long>(mm.m),
               static_cast<long long>(mm.k), static_cast<long long>(mm.k),
               static_cast<long long>(mm.n), static_cast<long long>(mm.batch),
               static_cast<int>(ab.size()), ab.data(), static_cast<int>(c.size()), c.data());
}

// The layouts of cuBLASLt's A, B and C (= D) for `mm`.
struct Layouts {
  MatrixLayout a, b, c;
  explicit Layouts(const Matmul& mm)
      : a(cuda_data_type(mm.ab_dtype), mm.trans_b ? mm.k : mm.n, mm.trans_b ? mm.n : mm.k, mm.batch,
          mm.stride_b),
        b(cuda_data_type(mm.ab_dtype), mm.trans_a ? mm.m : mm.k, mm.trans_a ? mm.k : mm.m, mm.batch,
          mm.stride_a),
        c(cuda_data_type(mm.c_dtype), mm.n, mm.m, mm.batch, mm.stride_c) {}
};

// The algorithm for `key`: cached, or asked of cuBLASLt's heuristic and cached; empty when
// cuBLASLt offers none. A failing heuristic throws unless allow_unsupported.
std::optional<cublasLtMatmulAlgo_t> find_algo(const GemmContext& ctx, const Matmul& mm,
                                              const AlgoKey& key, const MatmulDesc& op,
                                              const Layouts& lt, const Alignments& align,
                                              bool allow_unsupported) {
  {
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    if (auto it = g_algo_cache.find(key); it != g_algo_cache.end()) return it->second;
  }
  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(ctx.workspace_bytes));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.a);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.b);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align.c);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.c);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(ctx.device), op.desc, lt.a.layout, lt.b.layout,
                                     lt.c.layout, lt.c.layout, pref.pref, 1, &result, &returned);
  std::optional<cublasLtMatmulAlgo_t> algo;
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
  return algo;
}

// Runs the matmul with `epilogue`. Returns false, having enqueued nothing, when cuBLASLt has
// no algorithm for it and allow_unsupported is set; throws otherwise.
bool try_matmul(const GemmContext& ctx, const Matmul& mm, cublasLtEpilogue_t epilogue,
                bool allow_unsupported) {
  const cublasComputeType_t compute = compute_type(ctx, mm);
  MatmulDesc op(compute);
  const cublasOperation_t op_b = mm.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = mm.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  op.set(CUBLASLT_MATMUL_DESC_TRANSA, op_b);  // see Note [Row-major GEMM ...]
  op.set(CUBLASLT_MATMUL_DESC_TRANSB, op_a);
  op.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (epilogue == CUBLASLT_EPILOGUE_BIAS) {
    op.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, mm.bias);
    // Our bias is f32 whatever D is; cuBLASLt's default is D's type.
    if (mm.c_dtype != DType::F32) {
      op.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(CUDA_R_32F));
    }
  }
  const Layouts lt(mm);
  const size_t ab_bytes = dtype_size(mm.ab_dtype);
  const Alignments align{alignment_bytes(mm.b, mm.stride_b, ab_bytes),
                         alignment_bytes(mm.a, mm.stride_a, ab_bytes),
                         alignment_bytes(mm.c, mm.stride_c, dtype_size(mm.c_dtype))};
  const AlgoKey key = algo_key(ctx, mm, compute, epilogue, align);
  const std::optional<cublasLtMatmulAlgo_t> algo =
      find_algo(ctx, mm, key, op, lt, align, allow_unsupported);
  if (!algo) {
    DDPB_CHECK_TYPED(CublasError, allow_unsupported)
        << "cuBLASLt has no algorithm for the GEMM [" << mm.m << ", " << mm.k << "] x [" << mm.k
        << ", " << mm.n << "] (trans_a=" << mm.trans_a << ", trans_b=" << mm.trans_b << ", batch "
        << mm.batch << ", " << dtype_name(mm.ab_dtype) << " into " << dtype_name(mm.c_dtype)
        << ", alignments " << align.a << "/" << align.b << "/" << align.c << ")";
    return false;
  }
  const cublasStatus_t status = cublasLtMatmul(
      lt_handle(ctx.device), op.desc, &mm.alpha, mm.b, lt.a.layout, mm.a, lt.b.layout, &mm.beta,
      mm.c, lt.c.layout, mm.c, lt.c.layout, &*algo, ctx.workspace, ctx.workspace_bytes, ctx.stream);
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

// cuBLASLt documents no alignment rule for the bias pointer; an unaligned view (a bias inside
// a flat parameter buffer) takes the separate kernel rather than risk a fault.
bool bias_fusable(const Matmul& mm) {
  return mm.bias != nullptr && alignment_bytes(mm.bias, 0, sizeof(float)) >= 16;
}

// The product without epilogue. Should cuBLASLt offer nothing for a reduced-precision compute
// type (tf32/bf16 on f32 operands) on some layout, exact fp32 computes it rather than failing
// the step; bf16 operands compute in exact f32 already.
void plain_matmul(const GemmContext& ctx, const Matmul& mm) {
  if (ctx.math_mode == ops::MathMode::FP32 || mm.ab_dtype == DType::BF16) {
    try_matmul(ctx, mm, CUBLASLT_EPILOGUE_DEFAULT, /*allow_unsupported=*/false);
    return;
  }
  if (try_matmul(ctx, mm, CUBLASLT_EPILOGUE_DEFAULT, /*allow_unsupported=*/true)) return;
  GemmContext exact = ctx;
  exact.math_mode = ops::MathMode::FP32;
  try_matmul(exact, mm, CUBLASLT_EPILOGUE_DEFAULT, /*allow_unsupported=*/false);
}

// c = alpha * op(a) @ op(b) + beta * c, with the bias fused when cuBLASLt takes it. Returns the
// bias still to be added (null when none). With k == 0, c must be f32 and dense.
const float* run_product(const GemmContext& ctx, const Matmul& mm) {
  if (mm.k == 0) {
    // An empty product: c = beta * c. cuBLASLt has no algorithm for k = 0.
    const int64_t total = mm.batch * mm.m * mm.n;
    float* c = static_cast<float*>(mm.c);
    if (mm.beta == 0.0f) {
      launch_fill(c, total, 0.0f, ctx.stream);
    } else if (mm.beta != 1.0f) {
      launch_scale(c, total, mm.beta, ctx.stream);
    }
    return mm.bias;
  }
  DDPB_CHECK(mm.a != nullptr && mm.b != nullptr) << "GEMM without inputs";
  const EpiloguePlan plan = plan_epilogue(mm.bias != nullptr, mm.act);
  if (plan.fused != FusedEpilogue::None && bias_fusable(mm) &&
      try_matmul(ctx, mm, cublaslt_epilogue(plan.fused), /*allow_unsupported=*/true)) {
    return nullptr;
  }
  plain_matmul(ctx, mm);
  return mm.bias;
}

bool dense_output(const Matmul& mm) {
  return mm.batch == 1 || mm.stride_c == mm.m * mm.n;
}

// f32 c: the product, then what is left of the bias and the activation in place.
void matmul_f32_out(const GemmContext& ctx, const Matmul& mm) {
  const float* separate_bias = run_product(ctx, mm);
  if (separate_bias == nullptr && mm.act == ops::Activation::None) return;
  DDPB_CHECK(dense_output(mm)) << "batched GEMM with an activation needs densely packed outputs";
  launch_bias_activation(static_cast<float*>(mm.c), mm.batch * mm.m, mm.n, separate_bias, mm.act,
                         ctx.stream);
}

// Note [bf16 GEMM outputs round once]
// Under --precision bf16 a GEMM may leave in bf16 (Note [Autocast], core/functional.cpp). Its
// operands are bf16 then and accumulate in f32 (CUBLAS_COMPUTE_32F, whatever the math mode),
// and alpha, beta * c, the bias and the activation apply in f32 before c is rounded to bf16
// once, as on the CPU (Note [bf16 on the CPU]). cuBLASLt rounds once itself when it writes
// the whole result: no activation, and the bias fused (its data type set to f32, which ours
// is) or absent. Otherwise our pass has work: an activation (always our kernel, Note [GEMM
// epilogues keep NaN]), a bias cuBLASLt will not fuse into a bf16 D, or an empty product.
// Running it on a bf16 D would round twice: act(round(x)) can be a bf16 ulp from
// round(act(x)) (GeLU), and a bias added to a rounded product keeps the product's rounding
// error, large beside a sum that cancels. So the GEMM writes an f32 D into mm.staging (c
// widened into it first when beta reads c) and launch_bias_activation_bf16 applies the rest
// and rounds into c. The price: the GEMM writes 4 bytes per element and the pass reads 4,
// where a bf16 D would be 2 and 2, and a transient f32 [m, n] buffer.
void matmul_bf16_out(const GemmContext& ctx, const Matmul& mm) {
  if (mm.act == ops::Activation::None && mm.k > 0) {
    if (mm.bias == nullptr) return plain_matmul(ctx, mm);
    if (bias_fusable(mm) && try_matmul(ctx, mm, CUBLASLT_EPILOGUE_BIAS, true)) return;
  }
  DDPB_CHECK(dense_output(mm)) << "batched bf16 GEMM with an epilogue needs dense outputs";
  float* staging = mm.staging ? mm.staging() : nullptr;
  DDPB_CHECK(staging != nullptr) << "a bf16 GEMM output with a bias, an activation or k = 0 needs "
                                 << matmul_staging_floats(mm) << " floats of staging";
  const int64_t total = mm.batch * mm.m * mm.n;
  Matmul staged = mm;
  staged.staging = nullptr;
  staged.c = staging;
  staged.c_dtype = DType::F32;
  staged.stride_c = mm.m * mm.n;
  if (mm.beta != 0.0f) launch_cast(mm.c, DType::BF16, staging, DType::F32, total, ctx.stream);
  const float* separate_bias = run_product(ctx, staged);
  launch_bias_activation_bf16(staging, mm.c, mm.batch * mm.m, mm.n, separate_bias, mm.act,
                              ctx.stream);
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

int64_t matmul_staging_floats(const Matmul& mm) {
  const bool pass = mm.bias != nullptr || mm.act != ops::Activation::None || mm.k == 0;
  return mm.c_dtype == DType::BF16 && pass ? mm.batch * mm.m * mm.n : 0;
}

void launch_matmul(const GemmContext& ctx, const Matmul& mm) {
  DDPB_CHECK(mm.m >= 0 && mm.n >= 0 && mm.k >= 0 && mm.batch >= 1)
      << "GEMM [" << mm.m << ", " << mm.k << "] x [" << mm.k << ", " << mm.n << "], batch "
      << mm.batch;
  DDPB_CHECK(mm.bias == nullptr || mm.batch == 1) << "GEMM bias is for unbatched GEMMs only";
  const bool bf16_ab = mm.ab_dtype == DType::BF16;
  DDPB_CHECK((bf16_ab || mm.ab_dtype == DType::F32) &&
             (mm.c_dtype == DType::F32 || (bf16_ab && mm.c_dtype == DType::BF16)))
      << "GEMM of " << dtype_name(mm.ab_dtype) << " operands into " << dtype_name(mm.c_dtype)
      << " is not supported on CUDA";
  if (mm.m == 0 || mm.n == 0) return;
  DDPB_CHECK(mm.c != nullptr) << "GEMM without an output";
  DDPB_CHECK(mm.k > 0 || dense_output(mm))
      << "batched GEMM with k = 0 needs densely packed outputs";
  if (mm.c_dtype == DType::BF16) {
    matmul_bf16_out(ctx, mm);
  } else {
    matmul_f32_out(ctx, mm);
  }
}

}  // namespace ddpb::gpu
