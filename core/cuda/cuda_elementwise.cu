// Element-wise kernels: fill, arithmetic, activations, dtype casts and the GEMM epilogue.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"

namespace ddpb::gpu {
namespace {

// ============================== kernels ==============================================

// One kernel for every element-wise op: `op(i)` handles element i. Each op is a small
// functor holding its pointers, so the launchers below read like the formulas in ops.h.
template <typename Op>
__global__ void map_kernel(int64_t n, Op op) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) op(i);
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float gelu(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

// d/dx of gelu(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = tanhf(u);
  const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

__device__ __forceinline__ float activate(float v, ops::Activation act) {
  switch (act) {
    case ops::Activation::ReLU:
      return v <= 0.0f ? 0.0f : v;  // NaN stays NaN, as in PyTorch
    case ops::Activation::GeLU:
      return gelu(v);
    case ops::Activation::None:
      break;
  }
  return v;
}

struct NormalizeU8Op {
  const uint8_t* x;
  float* out;
  int64_t plane;
  int channels;
  float scale[4], shift[4];
  __device__ void operator()(int64_t i) const {
    const int c = static_cast<int>((i / plane) % channels);
    out[i] = static_cast<float>(x[i]) * scale[c] + shift[c];
  }
};
struct FillOp {
  float* x;
  float value;
  __device__ void operator()(int64_t i) const { x[i] = value; }
};
struct AddOp {
  const float* a;
  const float* b;
  float* out;
  __device__ void operator()(int64_t i) const { out[i] = a[i] + b[i]; }
};
struct MulOp {
  const float* a;
  const float* b;
  float* out;
  __device__ void operator()(int64_t i) const { out[i] = a[i] * b[i]; }
};
struct AxpyOp {
  float alpha;
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] += alpha * x[i]; }
};
struct ScaleOp {
  float* x;
  float s;
  __device__ void operator()(int64_t i) const { x[i] *= s; }
};
struct ScaleCopyOp {
  const float* src;
  float* dst;
  float s;
  __device__ void operator()(int64_t i) const { dst[i] = s * src[i]; }
};
struct ReluForwardOp {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = x[i] <= 0.0f ? 0.0f : x[i]; }
};
struct ReluBackwardOp {
  const float* dy;
  const float* y;
  float* dx;
  __device__ void operator()(int64_t i) const { dx[i] = y[i] <= 0.0f ? 0.0f : dy[i]; }
};
struct GeluForwardOp {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = gelu(x[i]); }
};
struct GeluBackwardOp {
  const float* dy;
  const float* x;
  float* dx;
  __device__ void operator()(int64_t i) const { dx[i] = dy[i] * gelu_grad(x[i]); }
};
struct BiasActivationOp {
  float* c;
  int64_t cols;
  const float* bias;  // may be null
  ops::Activation act;
  __device__ void operator()(int64_t i) const {
    float v = c[i];
    if (bias != nullptr) v += bias[i % cols];
    c[i] = activate(v, act);
  }
};

// Casts go through f32; the _rn intrinsics round to nearest even, as the CPU does.
__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f32(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}

template <typename Src, typename Dst>
struct CastOp {
  const Src* src;
  Dst* dst;
  __device__ void operator()(int64_t i) const { dst[i] = from_f32<Dst>(to_f32(src[i])); }
};

// ============================== launchers ============================================

template <typename Op>
void launch_map(int64_t n, const Op& op, cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "negative element count " << n;
  if (n == 0) return;
  map_kernel<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(n, op);
  CUDA_LAUNCH_CHECK();
}

template <typename Src>
void launch_cast_from(const Src* src, void* dst, DType dst_dtype, int64_t n, cudaStream_t stream) {
  switch (dst_dtype) {
    case DType::F32:
      return launch_map(n, CastOp<Src, float>{src, static_cast<float*>(dst)}, stream);
    case DType::BF16:
      return launch_map(n, CastOp<Src, __nv_bfloat16>{src, static_cast<__nv_bfloat16*>(dst)},
                        stream);
    case DType::F16:
      return launch_map(n, CastOp<Src, __half>{src, static_cast<__half*>(dst)}, stream);
    default:
      break;
  }
  DDPB_FAIL() << "cast to " << dtype_name(dst_dtype) << " is not supported on CUDA";
}

}  // namespace

void launch_normalize_u8(const uint8_t* x, float* out, int64_t n, int64_t plane, int channels,
                         const float* scale, const float* shift, cudaStream_t stream) {
  DDPB_CHECK(channels >= 1 && channels <= 4 && plane > 0) << "normalize_u8: bad geometry";
  NormalizeU8Op op{x, out, plane, channels, {}, {}};
  for (int c = 0; c < channels; ++c) op.scale[c] = scale[c], op.shift[c] = shift[c];
  launch_map(n, op, stream);
}

void launch_fill(float* x, int64_t n, float value, cudaStream_t stream) {
  launch_map(n, FillOp{x, value}, stream);
}

void launch_add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  launch_map(n, AddOp{a, b, out}, stream);
}

void launch_mul(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  launch_map(n, MulOp{a, b, out}, stream);
}

void launch_axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  launch_map(n, AxpyOp{alpha, x, y}, stream);
}

void launch_scale(float* x, int64_t n, float s, cudaStream_t stream) {
  launch_map(n, ScaleOp{x, s}, stream);
}

void launch_scale_copy(const float* src, float* dst, int64_t n, float s, cudaStream_t stream) {
  launch_map(n, ScaleCopyOp{src, dst, s}, stream);
}

void launch_relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  launch_map(n, ReluForwardOp{x, y}, stream);
}

void launch_relu_backward(const float* dy, const float* y, float* dx, int64_t n,
                          cudaStream_t stream) {
  launch_map(n, ReluBackwardOp{dy, y, dx}, stream);
}

void launch_gelu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  launch_map(n, GeluForwardOp{x, y}, stream);
}

void launch_gelu_backward(const float* dy, const float* x, float* dx, int64_t n,
                          cudaStream_t stream) {
  launch_map(n, GeluBackwardOp{dy, x, dx}, stream);
}

void launch_cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                 cudaStream_t stream) {
  if (n == 0) return;
  if (src_dtype == dst_dtype) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * dtype_size(src_dtype),
                               cudaMemcpyDeviceToDevice, stream))
        << "cast " << dtype_name(src_dtype) << " to itself";
    return;
  }
  switch (src_dtype) {
    case DType::F32:
      return launch_cast_from(static_cast<const float*>(src), dst, dst_dtype, n, stream);
    case DType::BF16:
      return launch_cast_from(static_cast<const __nv_bfloat16*>(src), dst, dst_dtype, n, stream);
    case DType::F16:
      return launch_cast_from(static_cast<const __half*>(src), dst, dst_dtype, n, stream);
    default:
      break;
  }
  DDPB_FAIL() << "cast from " << dtype_name(src_dtype) << " is not supported on CUDA";
}

void launch_bias_activation(float* c, int64_t rows, int64_t cols, const float* bias,
                            ops::Activation act, cudaStream_t stream) {
  DDPB_CHECK(rows >= 0 && cols > 0) << "bias/activation on [" << rows << ", " << cols << "]";
  if (bias == nullptr && act == ops::Activation::None) return;
  launch_map(rows * cols, BiasActivationOp{c, cols, bias, act}, stream);
}

}  // namespace ddpb::gpu
