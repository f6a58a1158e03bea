// CPU implementations of core/ops.h. Arguments were validated by core/ops.cpp.
// Reductions accumulate in double so that results do not depend on vector width.
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/cpu_bf16.h"
#include "core/cpu/cpu_math.h"

namespace ddpb::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;

// Element-wise loop over n floats, run in stream order.
template <typename Fn>
void for_each(const Tensor& anchor, Fn&& fn) {
  run_on_stream(anchor.device(), [n = anchor.numel(), fn] {
    for (int64_t i = 0; i < n; ++i) fn(i);
  });
}

// GELU, forward in place and backward. The bodies are compiled twice: for the baseline ISA
// and, on x86-64, for AVX2 (8 floats a vector instead of 4; no FMA, so both give the same
// bits), picked at run time. GELU's tanh is ~10% of a gpt-tiny step even vectorised.
[[gnu::always_inline]] inline void gelu_forward_body(float* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = c[i];
    c[i] = 0.5f * x * (1.0f + fast_tanh(kSqrt2OverPi * (x + kGeluCoeff * x * x * x)));
  }
}

[[gnu::always_inline]] inline void gelu_backward_body(const float* dy, const float* x, float* dx,
                                                      int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    const float t = fast_tanh(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] void gelu_forward_avx2(float* c, int64_t n) {
  gelu_forward_body(c, n);
}
[[gnu::target("avx2")]] void gelu_backward_avx2(const float* dy, const float* x, float* dx,
                                                int64_t n) {
  gelu_backward_body(dy, x, dx, n);
}
bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

void gelu_forward_inplace(float* c, int64_t n) {
#if defined(__x86_64__)
  if (has_avx2()) return gelu_forward_avx2(c, n);
#endif
  gelu_forward_body(c, n);
}

void gelu_backward_kernel(const float* dy, const float* x, float* dx, int64_t n) {
#if defined(__x86_64__)
  if (has_avx2()) return gelu_backward_avx2(dy, x, dx, n);
#endif
  gelu_backward_body(dy, x, dx, n);
}

void apply_activation(float* c, int64_t n, ops::Activation act) {
  if (act == ops::Activation::ReLU) {
    for (int64_t i = 0; i < n; ++i) c[i] = c[i] <= 0.0f ? 0.0f : c[i];  // NaN stays NaN
  } else if (act == ops::Activation::GeLU) {
    gelu_forward_inplace(c, n);
  }
}

// A dense bf16-rounded copy of the rows x cols operand at p (leading dimension ld).
const float* round_operand_to_bf16(const float* p, int64_t rows, int64_t cols, int64_t ld,
                                   std::vector<float>& scratch) {
  scratch.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) round_to_bf16(p + r * ld, scratch.data() + r * cols, cols);
  return scratch.data();
}

enum class GemmKernel { SgemmCall, Planned };

// Whether f32 operands are rounded to bf16 first: in BF16 math mode, unless they hold bf16
// values already (widened bf16 tensors, Note [bf16 on the CPU]), which rounding leaves as
// they are. The mode is set once, before the first op (bench/run/trainer.cpp), so reading it
// when the stream runs the GEMM rather than when it was enqueued makes no difference.
enum class Operands { AsMathModeSays, Bf16Values };

// sgemm's body; `kernel` says which oneDNN entry runs the general case.
void sgemm_with(GemmKernel kernel, Operands operands, bool trans_a, bool trans_b, int64_t m,
                int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (operands == Operands::AsMathModeSays && ops::math_mode() == ops::MathMode::BF16) {
    thread_local std::vector<float> a_bf16, b_bf16;
    a = round_operand_to_bf16(a, trans_a ? k : m, trans_a ? m : k, lda, a_bf16);
    b = round_operand_to_bf16(b, trans_b ? n : k, trans_b ? k : n, ldb, b_bf16);
    lda = trans_a ? m : k;
    ldb = trans_b ? k : n;
  }
  if (n == 1) {
    // A matrix-vector product (PowerSGD's P = M Q and Q = M^T P at rank 1): a GEMM would
    // pack all of A first, OpenBLAS's gemv streams it once.
    cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(trans_a ? k : m), static_cast<blasint>(trans_a ? m : k), alpha,
                a, static_cast<blasint>(lda), b, static_cast<blasint>(trans_b ? 1 : ldb), beta, c,
                static_cast<blasint>(ldc));
    return;
  }
  if (k == 1) {
    // An outer product (PowerSGD's M = P Q^T at rank 1): one pass over C, no packing. With
    // beta 0, C is not read (it may hold anything), as in BLAS.
    const int64_t a_step = trans_a ? 1 : lda, b_step = trans_b ? ldb : 1;
    for (int64_t i = 0; i < m; ++i) {
      const float ai = alpha * a[i * a_step];
      float* ci = c + i * ldc;
      if (beta == 0.0f) {
        for (int64_t j = 0; j < n; ++j) ci[j] = ai * b[j * b_step];
      } else {
        for (int64_t j = 0; j < n; ++j) ci[j] = beta * ci[j] + ai * b[j * b_step];
      }
    }
    return;
  }
  if (kernel == GemmKernel::Planned) {
    planned_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // oneDNN's sgemm rather than OpenBLAS's: on the training GEMMs it is as fast or faster
  // (scripts/peer/gemm_ratio.sh, docs/performance.md). Row-major, like ours.
  use_openmp_threads(blas_threads());
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  DDPB_CHECK(status == dnnl_success)
      << "oneDNN sgemm failed (status " << status << ") on " << m << "x" << n << "x" << k;
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  sgemm_with(GemmKernel::SgemmCall, Operands::AsMathModeSays, trans_a, trans_b, m, n, k, alpha, a,
             lda, b, ldb, beta, c, ldc);
}

namespace {

// c = act(alpha op(a) op(b) + beta c + bias) on f32 values, c dense [m, n].
void gemm_f32_values(Operands operands, const float* a, int64_t lda, bool trans_a, const float* b,
                     int64_t ldb, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
                     float alpha, float beta, const float* bias, ops::Activation act) {
  float effective_beta = beta;
  if (bias != nullptr && beta == 0.0f) {
    // Pre-load the bias into C and let BLAS add the product (beta = 1): one pass less.
    for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * n, bias, static_cast<size_t>(n) * 4);
    effective_beta = 1.0f;
  }
  // Note [oneDNN matmul plans]: a Linear layer's shapes repeat every step.
  sgemm_with(GemmKernel::Planned, operands, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
             effective_beta, c, n);
  if (bias != nullptr && beta != 0.0f) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += bias[j];
  }
  apply_activation(c, m * n, act);
}

// The f32 values of the whole of t: its own floats, or a widened copy in `scratch`.
const float* f32_values(const Tensor& t, std::vector<float>& scratch) {
  if (t.dtype() == DType::F32) return t.data<float>();
  scratch.resize(static_cast<size_t>(t.numel()));
  widen_to_f32(t, 0, t.numel(), scratch.data());
  return scratch.data();
}

}  // namespace

void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                      float alpha, float beta, const Tensor& bias, ops::Activation act) {
  run_on_stream(c.device(), [=] {
    const int64_t m = c.size(0), n = c.size(1), k = trans_a ? a.size(0) : a.size(1);
    const float* bias_values = bias.defined() ? bias.data<float>() : nullptr;
    if (!any_bf16({&a, &b, &c})) {
      gemm_f32_values(Operands::AsMathModeSays, a.data<float>(), a.size(1), trans_a,
                      b.data<float>(), b.size(1), trans_b, c.data<float>(), m, n, k, alpha, beta,
                      bias_values, act);
      return;
    }
    // Note [bf16 on the CPU]: bf16 operands widen exactly, so the product is the f32 one of
    // bf16 values, and a bf16 output is rounded once, after the bias and the activation.
    thread_local std::vector<float> a_values, b_values, c_values;
    const float* ap = f32_values(a, a_values);
    const float* bp = f32_values(b, b_values);
    float* cp = c.data<float>();
    if (c.dtype() != DType::F32) {
      c_values.resize(static_cast<size_t>(c.numel()));
      if (beta != 0.0f) widen_to_f32(c, 0, c.numel(), c_values.data());
      cp = c_values.data();
    }
    gemm_f32_values(Operands::Bf16Values, ap, a.size(1), trans_a, bp, b.size(1), trans_b, cp, m, n,
                    k, alpha, beta, bias_values, act);
    if (c.dtype() != DType::F32) store_from_f32(cp, c, 0, c.numel());
  });
}

void CpuBackend::fill(const Tensor& t, float value) {
  float* p = t.data<float>();
  for_each(t, [=](int64_t i) { p[i] = value; });
}

void CpuBackend::zero(const Tensor& t) {
  run_on_stream(t.device(), [=] { std::memset(t.raw_data(), 0, t.nbytes()); });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (any_bf16({&a, &b, &out})) {
    map_f32_blocks<2>({a, b}, out, [](const auto& in, float* o, int64_t n) {
      for (int64_t i = 0; i < n; ++i) o[i] = in[0][i] + in[1][i];
    });
    return;
  }
  const float *ap = a.data<float>(), *bp = b.data<float>();
  float* op = out.data<float>();
  for_each(out, [=](int64_t i) { op[i] = ap[i] + bp[i]; });
}

void CpuBackend::mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const float *ap = a.data<float>(), *bp = b.data<float>();
  float* op = out.data<float>();
  for_each(out, [=](int64_t i) { op[i] = ap[i] * bp[i]; });
}

void CpuBackend::axpy(float alpha, const Tensor& x, const Tensor& y) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  for_each(y, [=](int64_t i) { yp[i] += alpha * xp[i]; });
}

void CpuBackend::scale(const Tensor& t, float s) {
  float* p = t.data<float>();
  for_each(t, [=](int64_t i) { p[i] *= s; });
}

void CpuBackend::scale_copy(const Tensor& src, const Tensor& dst, float s) {
  const float* sp = src.data<float>();
  float* dp = dst.data<float>();
  for_each(dst, [=](int64_t i) { dp[i] = s * sp[i]; });
}

void CpuBackend::relu_forward(const Tensor& x, const Tensor& y) {
  if (any_bf16({&x, &y})) {
    map_f32_blocks<1>({x}, y, [](const auto& in, float* o, int64_t n) {
      for (int64_t i = 0; i < n; ++i) o[i] = in[0][i] <= 0.0f ? 0.0f : in[0][i];
    });
    return;
  }
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  // `x <= 0 ? 0 : x`, not `x > 0 ? x : 0`: a NaN propagates, as in PyTorch.
  for_each(y, [=](int64_t i) { yp[i] = xp[i] <= 0.0f ? 0.0f : xp[i]; });
}

void CpuBackend::relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  if (any_bf16({&dy, &y, &dx})) {
    map_f32_blocks<2>({dy, y}, dx, [](const auto& in, float* o, int64_t n) {
      for (int64_t i = 0; i < n; ++i) o[i] = in[1][i] <= 0.0f ? 0.0f : in[0][i];
    });
    return;
  }
  const float *dyp = dy.data<float>(), *yp = y.data<float>();
  float* dxp = dx.data<float>();
  // Load dy unconditionally: a select instead of a branch lets the loop vectorise. PyTorch's
  // threshold_backward: zero where y <= 0, dy elsewhere (a NaN output passes dy through).
  for_each(dx, [=](int64_t i) {
    const float d = dyp[i];
    dxp[i] = yp[i] <= 0.0f ? 0.0f : d;
  });
}

void CpuBackend::gelu_forward(const Tensor& x, const Tensor& y) {
  if (any_bf16({&x, &y})) {
    map_f32_blocks<1>({x}, y, [](const auto& in, float* o, int64_t n) {
      std::memcpy(o, in[0], static_cast<size_t>(n) * sizeof(float));
      gelu_forward_inplace(o, n);
    });
    return;
  }
  run_on_stream(y.device(), [=] {
    std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
    apply_activation(y.data<float>(), y.numel(), ops::Activation::GeLU);
  });
}

void CpuBackend::gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) {
  if (any_bf16({&dy, &x, &dx})) {
    map_f32_blocks<2>({dy, x}, dx, [](const auto& in, float* o, int64_t n) {
      gelu_backward_kernel(in[0], in[1], o, n);
    });
    return;
  }
  const float *dyp = dy.data<float>(), *xp = x.data<float>();
  float* dxp = dx.data<float>();
  run_on_stream(dx.device(), [=, n = dx.numel()] { gelu_backward_kernel(dyp, xp, dxp, n); });
}

namespace {

// One tight loop per (source, destination) pair: the dtype switch and the pointers are
// hoisted out, and the inline conversions of core/dtype.h vectorise (bf16); fp16 goes
// through the bulk conversions (F16C where the CPU has it).
template <typename Src, typename Dst, typename Convert>
void cast_loop(const Src* in, Dst* out, int64_t n, Convert convert) {
  for (int64_t i = 0; i < n; ++i) out[i] = convert(in[i]);
}

void cast_host(const Tensor& src, const Tensor& dst) {
  const int64_t n = src.numel();
  const DType from = src.dtype(), to = dst.dtype();
  if (from == to) {
    std::memcpy(dst.raw_data(), src.raw_data(), static_cast<size_t>(n) * dtype_size(from));
    return;
  }
  if (from == DType::F32 && to == DType::BF16) {
    cast_loop(src.data<float>(), dst.data<uint16_t>(), n, float_to_bf16);
  } else if (from == DType::BF16 && to == DType::F32) {
    cast_loop(src.data<uint16_t>(), dst.data<float>(), n, bf16_to_float);
  } else if (from == DType::F32 && to == DType::F16) {
    f32_to_f16(src.data<float>(), dst.data<uint16_t>(), n);
  } else if (from == DType::F16 && to == DType::F32) {
    f16_to_f32(src.data<uint16_t>(), dst.data<float>(), n);
  } else if (from == DType::BF16 && to == DType::F16) {
    cast_loop(src.data<uint16_t>(), dst.data<uint16_t>(), n,
              [](uint16_t h) { return float_to_f16(bf16_to_float(h)); });
  } else if (from == DType::F16 && to == DType::BF16) {
    cast_loop(src.data<uint16_t>(), dst.data<uint16_t>(), n,
              [](uint16_t h) { return float_to_bf16(f16_to_float(h)); });
  } else {
    DDPB_FAIL() << "cast from " << dtype_name(from) << " to " << dtype_name(to)
                << " is not supported";
  }
}

}  // namespace

void CpuBackend::cast(const Tensor& src, const Tensor& dst) {
  run_on_stream(dst.device(), [=] { cast_host(src, dst); });
}

void CpuBackend::sum_rows(const Tensor& x, const Tensor& out) {
  run_on_stream(out.device(), [=] {
    int64_t m = x.size(0), n = x.size(1);
    std::vector<double> acc(static_cast<size_t>(n), 0.0);
    if (x.dtype() == DType::BF16) {  // Note [bf16 on the CPU]
      const uint16_t* xp = x.data<uint16_t>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += bf16_to_float(xp[i * n + j]);
    } else {
      const float* xp = x.data<float>();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += xp[i * n + j];
    }
    float* op = out.data<float>();
    for (int64_t j = 0; j < n; ++j) op[j] = static_cast<float>(acc[static_cast<size_t>(j)]);
  });
}

void CpuBackend::sum_all(const Tensor& x, const Tensor& out) {
  run_on_stream(out.device(), [=] {
    double acc = 0.0;
    const float* xp = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) acc += xp[i];
    out.data<float>()[0] = static_cast<float>(acc);
  });
}

void CpuBackend::all_finite(const Tensor& x, const Tensor& out) {
  run_on_stream(out.device(), [=] {
    const float* xp = x.data<float>();
    bool finite = true;
    for (int64_t i = 0; i < x.numel(); ++i) finite &= std::isfinite(xp[i]);
    out.data<float>()[0] = finite ? 1.0f : 0.0f;
  });
}

// Note [Orthogonalisation epsilon] in core/ops.h. Sums in double: the columns can be long
// (an embedding's rows) and the result feeds every later PowerSGD step.
void CpuBackend::orthogonalize_columns(const Tensor& m, float epsilon) {
  run_on_stream(m.device(), [=] {
    float* a = m.data<float>();
    const int64_t n = m.size(0), r = m.size(1);
    for (int64_t i = 0; i < r; ++i) {
      double sq = 0.0;
      for (int64_t k = 0; k < n; ++k) sq += static_cast<double>(a[k * r + i]) * a[k * r + i];
      const float norm = static_cast<float>(std::sqrt(sq));
      const float denom = epsilon > 0.0f ? norm + epsilon : norm;
      const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
      for (int64_t k = 0; k < n; ++k) a[k * r + i] *= inv;
      for (int64_t j = i + 1; j < r; ++j) {
        double dot = 0.0;
        for (int64_t k = 0; k < n; ++k) dot += static_cast<double>(a[k * r + i]) * a[k * r + j];
        const float d = static_cast<float>(dot);
        for (int64_t k = 0; k < n; ++k) a[k * r + j] -= d * a[k * r + i];
      }
    }
  });
}

namespace {
void softmax_row(const float* x, float* y, int64_t n) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = fast_exp(x[j] - mx);
    sum += y[j];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}
}  // namespace

void CpuBackend::softmax_forward(const Tensor& x, const Tensor& y) {
  run_on_stream(y.device(), [=] {
    int64_t n = x.size(-1), rows = x.numel() / std::max<int64_t>(n, 1);
    for (int64_t r = 0; r < rows; ++r)
      softmax_row(x.data<float>() + r * n, y.data<float>() + r * n, n);
  });
}

void CpuBackend::softmax_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  run_on_stream(dx.device(), [=] {
    int64_t n = y.size(-1), rows = y.numel() / std::max<int64_t>(n, 1);
    for (int64_t r = 0; r < rows; ++r) {
      const float *dyr = dy.data<float>() + r * n, *yr = y.data<float>() + r * n;
      float* dxr = dx.data<float>() + r * n;
      double dot = 0.0;
      for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(dyr[j]) * yr[j];
      for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - static_cast<float>(dot));
    }
  });
}

void CpuBackend::layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                   float eps) {
  run_on_stream(y.device(), [=] {
    int64_t m = x.size(0), c = x.size(1);
    const float *w = weight.data<float>(), *b = bias.data<float>();
    for (int64_t i = 0; i < m; ++i) {
      const float* xr = x.data<float>() + i * c;
      float* yr = y.data<float>() + i * c;
      double s = 0.0;
      for (int64_t j = 0; j < c; ++j) s += xr[j];
      double mu = s / static_cast<double>(c);
      double v = 0.0;
      for (int64_t j = 0; j < c; ++j) v += (xr[j] - mu) * (xr[j] - mu);
      float rs = static_cast<float>(1.0 / std::sqrt(v / static_cast<double>(c) + eps));
      float muf = static_cast<float>(mu);
      for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - muf) * rs * w[j] + b[j];
      mean.data<float>()[i] = muf;
      rstd.data<float>()[i] = rs;
    }
  });
}

void CpuBackend::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                    const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                    const Tensor& dweight, const Tensor& dbias) {
  run_on_stream(dx.device(), [=] {
    int64_t m = x.size(0), c = x.size(1);
    const float* w = weight.data<float>();
    std::vector<double> dw(static_cast<size_t>(c), 0.0), db(static_cast<size_t>(c), 0.0);
    for (int64_t i = 0; i < m; ++i) {
      const float *xr = x.data<float>() + i * c, *dyr = dy.data<float>() + i * c;
      float* dxr = dx.data<float>() + i * c;
      float mu = mean.data<float>()[i], rs = rstd.data<float>()[i];
      double sum_dn = 0.0, sum_dn_n = 0.0;
      for (int64_t j = 0; j < c; ++j) {
        float norm = (xr[j] - mu) * rs;
        float dn = dyr[j] * w[j];
        sum_dn += dn;
        sum_dn_n += static_cast<double>(dn) * norm;
        dw[static_cast<size_t>(j)] += static_cast<double>(dyr[j]) * norm;
        db[static_cast<size_t>(j)] += dyr[j];
      }
      float mean_dn = static_cast<float>(sum_dn / static_cast<double>(c));
      float mean_dn_n = static_cast<float>(sum_dn_n / static_cast<double>(c));
      for (int64_t j = 0; j < c; ++j) {
        float norm = (xr[j] - mu) * rs;
        dxr[j] = rs * (dyr[j] * w[j] - mean_dn - norm * mean_dn_n);
      }
    }
    for (int64_t j = 0; j < c; ++j) {
      dweight.data<float>()[j] = static_cast<float>(dw[static_cast<size_t>(j)]);
      dbias.data<float>()[j] = static_cast<float>(db[static_cast<size_t>(j)]);
    }
  });
}

void CpuBackend::embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) {
  run_on_stream(out.device(), [=] {
    int64_t v = table.size(0), c = table.size(1);
    const int32_t* idp = ids.data<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      DDPB_CHECK(idp[i] >= 0 && idp[i] < v) << "embedding id " << idp[i] << " at position " << i
                                            << " outside a table of " << v << " rows";
      std::memcpy(out.data<float>() + i * c, table.data<float>() + idp[i] * c,
                  static_cast<size_t>(c) * sizeof(float));
    }
  });
}

void CpuBackend::embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable) {
  run_on_stream(dtable.device(), [=] {
    int64_t v = dtable.size(0), c = dtable.size(1);
    const int32_t* idp = ids.data<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      DDPB_CHECK(idp[i] >= 0 && idp[i] < v) << "embedding id " << idp[i] << " out of range";
      float* row = dtable.data<float>() + idp[i] * c;
      const float* g = dout.data<float>() + i * c;
      for (int64_t j = 0; j < c; ++j) row[j] += g[j];
    }
  });
}

void CpuBackend::cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                       const Tensor& loss, const Tensor& probs) {
  run_on_stream(loss.device(), [=] {
    int64_t n = logits.size(0), v = logits.size(1);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const float* l = logits.data<float>() + i * v;
      float* p = probs.data<float>() + i * v;
      int32_t t = targets.data<int32_t>()[i];
      DDPB_CHECK(t >= 0 && t < v) << "target " << t << " at row " << i << " outside " << v
                                  << " classes";
      softmax_row(l, p, v);
      // log-sum-exp form: exact even where the probability underflows.
      float mx = *std::max_element(l, l + v);
      double s = 0.0;
      for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<double>(l[j] - mx));
      total += std::log(s) + mx - l[t];
    }
    loss.data<float>()[0] =
        static_cast<float>(total / static_cast<double>(std::max<int64_t>(n, 1)));
  });
}

void CpuBackend::cross_entropy_backward(const Tensor& dloss, const Tensor& probs,
                                        const Tensor& targets, const Tensor& dlogits) {
  run_on_stream(dlogits.device(), [=] {
    int64_t n = probs.size(0), v = probs.size(1);
    float g = dloss.data<float>()[0] / static_cast<float>(std::max<int64_t>(n, 1));
    const float* p = probs.data<float>();
    float* d = dlogits.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < v; ++j) d[i * v + j] = p[i * v + j] * g;
      d[i * v + targets.data<int32_t>()[i]] -= g;
    }
  });
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  // Host to host (also between logical CPU devices): ordered on the destination's stream.
  run_on_stream(dst.device(), [=] { std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes()); });
}

void CpuBackend::sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf,
                          float lr, float momentum, float weight_decay, bool first_step) {
  run_on_stream(param.device(), [=] {
    float* p = param.data<float>();
    const float* g = grad.data<float>();
    float* buf = momentum != 0.0f ? momentum_buf.data<float>() : nullptr;
    for (int64_t i = 0; i < param.numel(); ++i) {
      float d = g[i] + weight_decay * p[i];
      if (buf) {
        buf[i] = first_step ? d : momentum * buf[i] + d;
        d = buf[i];
      }
      p[i] -= lr * d;
    }
  });
}

void CpuBackend::adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m,
                            const Tensor& v, float lr, float beta1, float beta2, float eps,
                            float weight_decay, int64_t step) {
  run_on_stream(param.device(), [=] {
    float* p = param.data<float>();
    const float* g = grad.data<float>();
    float *mp = m.data<float>(), *vp = v.data<float>();
    float bc1 = 1.0f - std::pow(beta1, static_cast<float>(step));
    float bc2 = 1.0f - std::pow(beta2, static_cast<float>(step));
    // PyTorch: denom = sqrt(v)/sqrt(bc2) + eps; p -= (lr/bc1) * m / denom.
    float step_size = lr / bc1;
    float bc2_sqrt = std::sqrt(bc2);
    for (int64_t i = 0; i < param.numel(); ++i) {
      p[i] *= 1.0f - lr * weight_decay;
      mp[i] = beta1 * mp[i] + (1.0f - beta1) * g[i];
      vp[i] = beta2 * vp[i] + (1.0f - beta2) * g[i] * g[i];
      p[i] -= step_size * mp[i] / (std::sqrt(vp[i]) / bc2_sqrt + eps);
    }
  });
}

// The list steps run the per-tensor steps in order: the same code, so the same bits (a CPU
// launch costs nothing worth batching).
void CpuBackend::sgd_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                                std::span<const Tensor> momentum_bufs, float lr, float momentum,
                                float weight_decay, bool first_step) {
  for (size_t i = 0; i < params.size(); ++i) {
    sgd_step(params[i], grads[i], momentum_bufs.empty() ? Tensor() : momentum_bufs[i], lr, momentum,
             weight_decay, first_step);
  }
}

void CpuBackend::adamw_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                                  std::span<const Tensor> m, std::span<const Tensor> v, float lr,
                                  float beta1, float beta2, float eps, float weight_decay,
                                  int64_t step) {
  for (size_t i = 0; i < params.size(); ++i) {
    adamw_step(params[i], grads[i], m[i], v[i], lr, beta1, beta2, eps, weight_decay, step);
  }
}

}  // namespace ddpb::cpu
