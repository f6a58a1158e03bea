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
//
// Note [Vectorised element-wise kernels]
// The element-wise ops are bound by memory bandwidth. A thread that moves four floats with
// one 128-bit load or store (float4) needs a quarter of the memory instructions and keeps
// more bytes in flight per thread than one moving a float at a time. float4 accesses must be
// 16-byte aligned: a tensor's own storage is (the allocators hand out 256-byte aligned
// blocks), but a view need not be (a gradient inside a DDP bucket, a flat_view at an odd
// offset). So launch_map checks every pointer (aligned16):
//  - all aligned: map_vec4_kernel, float4s over the first n - n % 4 elements and a scalar
//    tail of the last n % 4 (threads 0..2 of the grid, one element each);
//  - otherwise: map_kernel, one float at a time.
// Both paths apply the same functor to each element and read an element before writing it
// (the in-place ops read and write the same index from one thread), so the result does not
// depend on the path, the offset or the length.

template <int kIn, typename Fn>
__device__ __forceinline__ void map_one(const MapArgs<kIn>& a, const Fn& fn, int64_t i) {
  float v[MapArgs<kIn>::kSlots];
#pragma unroll
  for (int k = 0; k < kIn; ++k) v[k] = a.in[k][i];
  a.out[i] = fn(v);
}

template <int kIn, typename Fn>
__global__ void map_kernel(int64_t n, MapArgs<kIn> a, Fn fn) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) map_one(a, fn, i);
}

// Every pointer of `a` 16-byte aligned (Note [Vectorised element-wise kernels]).
template <int kIn, typename Fn>
__global__ void map_vec4_kernel(int64_t n, MapArgs<kIn> a, Fn fn) {
  const int64_t vectors = n / 4;
  for (int64_t q = global_thread_index(); q < vectors; q += global_thread_count()) {
    float4 in[MapArgs<kIn>::kSlots];
#pragma unroll
    for (int k = 0; k < kIn; ++k) in[k] = reinterpret_cast<const float4*>(a.in[k])[q];
    float4 out;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v[MapArgs<kIn>::kSlots];
#pragma unroll
      for (int k = 0; k < kIn; ++k) v[k] = lane(in[k], j);
      lane(out, j) = fn(v);
    }
    reinterpret_cast<float4*>(a.out)[q] = out;
  }
  const int64_t tail = vectors * 4 + global_thread_index();  // fewer than 4 elements
  if (tail < n) map_one(a, fn, tail);
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

// The element functions, in the formulas of core/ops.h.
struct FillFn {
  float value;
  __device__ float operator()(const float*) const { return value; }
};
struct AddFn {  // a + b
  __device__ float operator()(const float* v) const { return v[0] + v[1]; }
};
struct MulFn {  // a * b
  __device__ float operator()(const float* v) const { return v[0] * v[1]; }
};
struct AxpyFn {  // inputs x, y: y + alpha * x
  float alpha;
  __device__ float operator()(const float* v) const { return v[1] + alpha * v[0]; }
};
struct ScaleFn {  // x * s, in place
  float s;
  __device__ float operator()(const float* v) const { return v[0] * s; }
};
struct ScaleCopyFn {  // s * src
  float s;
  __device__ float operator()(const float* v) const { return s * v[0]; }
};
struct ReluForwardFn {
  __device__ float operator()(const float* v) const { return v[0] <= 0.0f ? 0.0f : v[0]; }
};
struct ReluBackwardFn {  // inputs dy, y
  __device__ float operator()(const float* v) const { return v[1] <= 0.0f ? 0.0f : v[0]; }
};
struct GeluForwardFn {
  __device__ float operator()(const float* v) const { return gelu(v[0]); }
};
struct GeluBackwardFn {  // inputs dy, x
  __device__ float operator()(const float* v) const { return v[0] * gelu_grad(v[1]); }
};

// out[i] = x[i] * scale[c] + shift[c], c = (i / plane) % channels, the channel walked
// (Note [Incremental index walks]): digits (position in the plane, channel, image).
struct U8Normalization {
  float scale[4], shift[4];
};
__global__ void normalize_u8_kernel(const uint8_t* x, float* out, int64_t n, int64_t plane,
                                    int64_t channels, U8Normalization norm) {
  const int64_t radix[2] = {plane, channels};
  IndexWalk<3> at;
  at.start(global_thread_index(), global_thread_count(), radix);
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count(), at.advance(radix)) {
    const int64_t c = at.d[1];
    out[i] = static_cast<float>(x[i]) * norm.scale[c] + norm.shift[c];
  }
}

// c [rows, cols] = act(c + bias[col]), bias null for none. The column is walked (Note
// [Incremental index walks]), not computed as i % cols. kVec: float4s of c and bias (every
// pointer 16-byte aligned and cols % 4 == 0, so the four lanes of a vector share a row and
// rows * cols has no tail; Note [Vectorised element-wise kernels]).
template <bool kVec>
__global__ void bias_activation_kernel(float* c, int64_t total, int64_t cols, const float* bias,
                                       ops::Activation act) {
  constexpr int kWidth = kVec ? 4 : 1;
  const int64_t radix[1] = {cols};
  const int64_t stride = global_thread_count() * kWidth;
  IndexWalk<2> at;
  at.start(global_thread_index() * kWidth, stride, radix);
  for (int64_t i = global_thread_index() * kWidth; i < total; i += stride, at.advance(radix)) {
    const int64_t col = at.d[0];
    if constexpr (kVec) {
      float4 v = *reinterpret_cast<const float4*>(c + i);
      float4 b = bias != nullptr ? *reinterpret_cast<const float4*>(bias + col)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float e = lane(v, j);
        if (bias != nullptr) e += lane(b, j);  // no + 0: it would turn -0 into +0
        lane(v, j) = activate(e, act);
      }
      *reinterpret_cast<float4*>(c + i) = v;
    } else {
      float v = c[i];
      if (bias != nullptr) v += bias[col];
      c[i] = activate(v, act);
    }
  }
}

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
__global__ void cast_kernel(const Src* src, Dst* dst, int64_t n) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    dst[i] = from_f32<Dst>(to_f32(src[i]));
  }
}

// ============================== launchers ============================================

// Note [Vectorised element-wise kernels]: float4s when every pointer allows them.
template <int kIn, typename Fn>
void launch_map(int64_t n, const MapArgs<kIn>& a, const Fn& fn, cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "negative element count " << n;
  if (n == 0) return;
  if (a.aligned16()) {
    map_vec4_kernel<<<elementwise_blocks(n / 4), kElementwiseBlock, 0, stream>>>(n, a, fn);
    CUDA_LAUNCH_CHECK() << "map_vec4_kernel";
  } else {
    map_kernel<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(n, a, fn);
    CUDA_LAUNCH_CHECK() << "map_kernel";
  }
}

template <typename Src, typename Dst>
void launch_cast_to(const Src* src, void* dst, int64_t n, cudaStream_t stream) {
  cast_kernel<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(src, static_cast<Dst*>(dst),
                                                                       n);
  CUDA_LAUNCH_CHECK() << "cast_kernel";
}

template <typename Src>
void launch_cast_from(const Src* src, void* dst, DType dst_dtype, int64_t n, cudaStream_t stream) {
  switch (dst_dtype) {
    case DType::F32:
      return launch_cast_to<Src, float>(src, dst, n, stream);
    case DType::BF16:
      return launch_cast_to<Src, __nv_bfloat16>(src, dst, n, stream);
    case DType::F16:
      return launch_cast_to<Src, __half>(src, dst, n, stream);
    default:
      break;
  }
  DDPB_FAIL() << "cast to " << dtype_name(dst_dtype) << " is not supported on CUDA";
}

}  // namespace

void launch_normalize_u8(const uint8_t* x, float* out, int64_t n, int64_t plane, int channels,
                         const float* scale, const float* shift, cudaStream_t stream) {
  DDPB_CHECK(channels >= 1 && channels <= 4 && plane > 0) << "normalize_u8: bad geometry";
  DDPB_CHECK(n >= 0) << "normalize_u8 over " << n << " elements";
  if (n == 0) return;
  U8Normalization norm{};
  for (int c = 0; c < channels; ++c) norm.scale[c] = scale[c], norm.shift[c] = shift[c];
  normalize_u8_kernel<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(x, out, n, plane,
                                                                               channels, norm);
  CUDA_LAUNCH_CHECK() << "normalize_u8_kernel";
}

void launch_fill(float* x, int64_t n, float value, cudaStream_t stream) {
  launch_map(n, MapArgs<0>{{nullptr}, x}, FillFn{value}, stream);
}

void launch_add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  launch_map(n, MapArgs<2>{{a, b}, out}, AddFn{}, stream);
}

void launch_mul(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  launch_map(n, MapArgs<2>{{a, b}, out}, MulFn{}, stream);
}

void launch_axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  launch_map(n, MapArgs<2>{{x, y}, y}, AxpyFn{alpha}, stream);
}

void launch_scale(float* x, int64_t n, float s, cudaStream_t stream) {
  launch_map(n, MapArgs<1>{{x}, x}, ScaleFn{s}, stream);
}

void launch_scale_copy(const float* src, float* dst, int64_t n, float s, cudaStream_t stream) {
  launch_map(n, MapArgs<1>{{src}, dst}, ScaleCopyFn{s}, stream);
}

void launch_relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  launch_map(n, MapArgs<1>{{x}, y}, ReluForwardFn{}, stream);
}

void launch_relu_backward(const float* dy, const float* y, float* dx, int64_t n,
                          cudaStream_t stream) {
  launch_map(n, MapArgs<2>{{dy, y}, dx}, ReluBackwardFn{}, stream);
}

void launch_gelu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  launch_map(n, MapArgs<1>{{x}, y}, GeluForwardFn{}, stream);
}

void launch_gelu_backward(const float* dy, const float* x, float* dx, int64_t n,
                          cudaStream_t stream) {
  launch_map(n, MapArgs<2>{{dy, x}, dx}, GeluBackwardFn{}, stream);
}

void launch_cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                 cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "cast of " << n << " elements";
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

// Vectorised when the rows are whole float4s and both pointers allow it (Note [Vectorised
// element-wise kernels]); either way the column is walked, not divided for.
void launch_bias_activation(float* c, int64_t rows, int64_t cols, const float* bias,
                            ops::Activation act, cudaStream_t stream) {
  DDPB_CHECK(rows >= 0 && cols > 0) << "bias/activation on [" << rows << ", " << cols << "]";
  if (bias == nullptr && act == ops::Activation::None) return;
  const int64_t total = rows * cols;
  if (total == 0) return;
  if (cols % 4 == 0 && aligned16(c, bias)) {
    bias_activation_kernel<true><<<elementwise_blocks(total / 4), kElementwiseBlock, 0, stream>>>(
        c, total, cols, bias, act);
  } else {
    bias_activation_kernel<false>
        <<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(c, total, cols, bias, act);
  }
  CUDA_LAUNCH_CHECK() << "bias_activation_kernel";
}

}  // namespace ddpb::gpu
