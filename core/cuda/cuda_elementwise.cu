// Element-wise kernels: fill, arithmetic, activations, dtype casts and the GEMM epilogue.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_convert.cuh"
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

// Note [bf16 element-wise kernels]
// Under --precision bf16 (Note [Autocast], core/functional.cpp) add, relu and gelu also see
// bf16 tensors, each tensor of a call f32 or bf16 on its own (add mixes them). They run the
// f32 functors below: a bf16 input widens to f32 exactly (it is an f32's upper half) and a
// bf16 output is rounded to nearest even once, on store (__float2bfloat16_rn), as on the CPU
// (Note [bf16 on the CPU]). The all-f32 calls keep launch_map. The typed kernels move 8
// elements per thread and step, so that each bf16 tensor is read or written with one 128-bit
// access (a uint4 of 8 bf16; 4 would be a 64-bit access, half the bytes per instruction) and
// each f32 one with two float4s. That needs every pointer 16-byte aligned: element 8q then
// lies 16q bytes into a bf16 buffer and 32q into an f32 one. A view at an odd bf16 offset is
// only 2-byte aligned, so then typed_map_kernel goes one element at a time. As in Note
// [Vectorised element-wise kernels], both paths apply the same functor to each element and
// read it before writing it, so the result does not depend on the path: the 8-wide kernel
// covers n - n % 8 elements and threads 0..6 of the grid do the tail, one element each.

// The pointers of an element-wise op over f32/bf16 tensors: kIn inputs (1 or 2) of element
// types In0 and In1 (in1 null when kIn == 1) and one output of type Out.
template <int kInputs, typename In0, typename In1, typename Out>
struct TypedMapArgs {
  static constexpr int kIn = kInputs;
  using Output = Out;
  const In0* in0;
  const In1* in1;
  Out* out;
  bool aligned16() const { return ddpb::gpu::aligned16(in0, in1, out); }
};

template <typename Args, typename Fn>
__device__ __forceinline__ void typed_map_one(const Args& a, const Fn& fn, int64_t i) {
  float v[2] = {to_f32(a.in0[i]), 0.0f};
  if constexpr (Args::kIn > 1) v[1] = to_f32(a.in1[i]);
  a.out[i] = from_f32<typename Args::Output>(fn(v));
}

template <typename Args, typename Fn>
__global__ void typed_map_kernel(int64_t n, Args a, Fn fn) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    typed_map_one(a, fn, i);
  }
}

// Every pointer of `a` 16-byte aligned (Note [bf16 element-wise kernels]).
template <typename Args, typename Fn>
__global__ void typed_map_vec8_kernel(int64_t n, Args a, Fn fn) {
  const int64_t vectors = n / 8;
  for (int64_t q = global_thread_index(); q < vectors; q += global_thread_count()) {
    float in0[8], in1[8], out[8];
    load8(a.in0 + 8 * q, in0);
    if constexpr (Args::kIn > 1) load8(a.in1 + 8 * q, in1);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float v[2] = {in0[j], 0.0f};
      if constexpr (Args::kIn > 1) v[1] = in1[j];
      out[j] = fn(v);
    }
    store8(a.out + 8 * q, out);
  }
  const int64_t tail = vectors * 8 + global_thread_index();  // fewer than 8 elements
  if (tail < n) typed_map_one(a, fn, tail);
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

// kWidth elements at p as floats, and back: one element, a float4 (f32 only), or eight
// (load8/store8; a bf16 store rounds to nearest even).
template <int kWidth, typename T>
__device__ __forceinline__ void load_lanes(const T* p, float* v) {
  if constexpr (kWidth == 1) {
    v[0] = to_f32(p[0]);
  } else if constexpr (kWidth == 4) {
    static_assert(std::is_same_v<T, float>, "float4 lanes are f32");
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    static_assert(kWidth == 8);
    load8(p, v);
  }
}

template <int kWidth, typename T>
__device__ __forceinline__ void store_lanes(T* p, const float* v) {
  if constexpr (kWidth == 1) {
    p[0] = from_f32<T>(v[0]);
  } else if constexpr (kWidth == 4) {
    static_assert(std::is_same_v<T, float>, "float4 lanes are f32");
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    static_assert(kWidth == 8);
    store8(p, v);
  }
}

// dst [rows, cols] = act(src + bias[col]), bias null for none, computed in f32 and stored as
// Out: in place on an f32 GEMM output (src == dst: each element is read before it is written,
// by the same thread), or from a bf16 GEMM's f32 staging into its bf16 output, rounded once
// (Note [bf16 GEMM outputs round once], cuda_gemm.cpp). The column is walked (Note [Incremental
// index walks]), not computed as i % cols. kWidth elements per step (Note [Vectorised
// element-wise kernels]): 4 for f32, 8 for bf16, with every pointer 16-byte aligned and
// cols % kWidth == 0, so the lanes of a step share a row and rows * cols has no tail.
template <typename Out, int kWidth>
__global__ void bias_activation_kernel(const float* src, Out* dst, int64_t total, int64_t cols,
                                       const float* bias, ops::Activation act) {
  const int64_t radix[1] = {cols};
  const int64_t stride = global_thread_count() * kWidth;
  IndexWalk<2> at;
  at.start(global_thread_index() * kWidth, stride, radix);
  for (int64_t i = global_thread_index() * kWidth; i < total; i += stride, at.advance(radix)) {
    float v[kWidth], b[kWidth];
    load_lanes<kWidth>(src + i, v);
    if (bias != nullptr) load_lanes<kWidth>(bias + at.d[0], b);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) {
      if (bias != nullptr) v[j] += b[j];  // no + 0: it would turn -0 into +0
      v[j] = activate(v[j], act);
    }
    store_lanes<kWidth>(dst + i, v);
  }
}

template <typename Src, typename Dst>
__global__ void cast_kernel(const Src* src, Dst* dst, int64_t n) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    dst[i] = from_f32<Dst>(to_f32(src[i]));
  }
}

// ============================== launchers ============================================

// Runs `vector` (kWidth elements per thread and step) when every pointer of `a` is 16-byte
// aligned, else `scalar`; both give the same result (Note [Vectorised element-wise kernels]).
template <int kWidth, typename Args, typename Fn>
void launch_vector_or_scalar(int64_t n, const Args& a, const Fn& fn, cudaStream_t stream,
                             void (*vector)(int64_t, Args, Fn), void (*scalar)(int64_t, Args, Fn)) {
  DDPB_CHECK(n >= 0) << "negative element count " << n;
  if (n == 0) return;
  if (a.aligned16()) {
    vector<<<elementwise_blocks(n / kWidth), kElementwiseBlock, 0, stream>>>(n, a, fn);
  } else {
    scalar<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(n, a, fn);
  }
  CUDA_LAUNCH_CHECK() << (a.aligned16() ? "vectorised" : "scalar") << " element-wise kernel";
}

// Note [Vectorised element-wise kernels]: float4s when every pointer allows them.
template <int kIn, typename Fn>
void launch_map(int64_t n, const MapArgs<kIn>& a, const Fn& fn, cudaStream_t stream) {
  launch_vector_or_scalar<4>(n, a, fn, stream, &map_vec4_kernel<kIn, Fn>, &map_kernel<kIn, Fn>);
}

// Note [bf16 element-wise kernels]: 8 elements per step when every pointer allows it.
template <typename Args, typename Fn>
void launch_typed_map(int64_t n, const Args& a, const Fn& fn, cudaStream_t stream) {
  launch_vector_or_scalar<8>(n, a, fn, stream, &typed_map_vec8_kernel<Args, Fn>,
                             &typed_map_kernel<Args, Fn>);
}

// An op whose tensors all have `dtype`, F32 (launch_map) or BF16; in[kIn] are its inputs.
template <int kIn, typename Fn>
void launch_map_as(const char* op, DType dtype, const void* const (&in)[kIn], void* out, int64_t n,
                   const Fn& fn, cudaStream_t stream) {
  static_assert(kIn == 1 || kIn == 2);
  if (dtype == DType::F32) {
    MapArgs<kIn> a{};
    for (int k = 0; k < kIn; ++k) a.in[k] = static_cast<const float*>(in[k]);
    a.out = static_cast<float*>(out);
    return launch_map(n, a, fn, stream);
  }
  DDPB_CHECK(dtype == DType::BF16)
      << op << " on " << dtype_name(dtype) << " is not supported on CUDA";
  using B = __nv_bfloat16;
  const TypedMapArgs<kIn, B, B, B> a{static_cast<const B*>(in[0]),
                                     kIn > 1 ? static_cast<const B*>(in[kIn - 1]) : nullptr,
                                     static_cast<B*>(out)};
  launch_typed_map(n, a, fn, stream);
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

// Note [bf16 element-wise kernels]. f32 addition commutes bit for bit, so a sum of one f32
// and one bf16 input always takes the bf16 one first: one kernel serves both orders.
void launch_add(const void* a, DType a_dtype, const void* b, DType b_dtype, void* out,
                DType out_dtype, int64_t n, cudaStream_t stream) {
  const bool a_bf16 = a_dtype == DType::BF16, b_bf16 = b_dtype == DType::BF16;
  DDPB_CHECK((a_bf16 || a_dtype == DType::F32) && (b_bf16 || b_dtype == DType::F32) &&
             (out_dtype == DType::F32 || (out_dtype == DType::BF16 && a_bf16 && b_bf16)))
      << "add of " << dtype_name(a_dtype) << " and " << dtype_name(b_dtype) << " into "
      << dtype_name(out_dtype) << " is not supported on CUDA";
  using B = __nv_bfloat16;
  if (!a_bf16 && !b_bf16) {
    const MapArgs<2> args{{static_cast<const float*>(a), static_cast<const float*>(b)},
                          static_cast<float*>(out)};
    return launch_map(n, args, AddFn{}, stream);
  }
  if (a_bf16 && b_bf16) {
    const auto* pa = static_cast<const B*>(a);
    const auto* pb = static_cast<const B*>(b);
    if (out_dtype == DType::BF16) {
      return launch_typed_map(n, TypedMapArgs<2, B, B, B>{pa, pb, static_cast<B*>(out)}, AddFn{},
                              stream);
    }
    return launch_typed_map(n, TypedMapArgs<2, B, B, float>{pa, pb, static_cast<float*>(out)},
                            AddFn{}, stream);
  }
  const TypedMapArgs<2, B, float, float> args{static_cast<const B*>(a_bf16 ? a : b),
                                              static_cast<const float*>(a_bf16 ? b : a),
                                              static_cast<float*>(out)};
  launch_typed_map(n, args, AddFn{}, stream);
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

void launch_relu_forward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream) {
  launch_map_as<1>("relu_forward", dtype, {x}, y, n, ReluForwardFn{}, stream);
}

void launch_relu_backward(const void* dy, const void* y, void* dx, DType dtype, int64_t n,
                          cudaStream_t stream) {
  launch_map_as<2>("relu_backward", dtype, {dy, y}, dx, n, ReluBackwardFn{}, stream);
}

void launch_gelu_forward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream) {
  launch_map_as<1>("gelu_forward", dtype, {x}, y, n, GeluForwardFn{}, stream);
}

void launch_gelu_backward(const void* dy, const void* x, void* dx, DType dtype, int64_t n,
                          cudaStream_t stream) {
  launch_map_as<2>("gelu_backward", dtype, {dy, x}, dx, n, GeluBackwardFn{}, stream);
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

// kWidth elements a step when the rows are whole vectors and every pointer allows it (Note
// [Vectorised element-wise kernels]), else one; either way the column is walked, not divided for.
template <typename Out, int kWidth>
void launch_bias_activation_into(const float* src, Out* dst, int64_t rows, int64_t cols,
                                 const float* bias, ops::Activation act, cudaStream_t stream) {
  DDPB_CHECK(rows >= 0 && cols > 0) << "bias/activation on [" << rows << ", " << cols << "]";
  const int64_t total = rows * cols;
  if (total == 0) return;
  if (cols % kWidth == 0 && aligned16(src, dst, bias)) {
    bias_activation_kernel<Out, kWidth>
        <<<elementwise_blocks(total / kWidth), kElementwiseBlock, 0, stream>>>(src, dst, total,
                                                                               cols, bias, act);
  } else {
    bias_activation_kernel<Out, 1><<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(
        src, dst, total, cols, bias, act);
  }
  CUDA_LAUNCH_CHECK() << "bias_activation_kernel";
}

void launch_bias_activation(float* c, int64_t rows, int64_t cols, const float* bias,
                            ops::Activation act, cudaStream_t stream) {
  if (bias == nullptr && act == ops::Activation::None) return;
  launch_bias_activation_into<float, 4>(c, c, rows, cols, bias, act, stream);
}

// Always writes dst, even with no bias and no activation (then it is a rounding cast).
void launch_bias_activation_bf16(const float* src, void* dst, int64_t rows, int64_t cols,
                                 const float* bias, ops::Activation act, cudaStream_t stream) {
  launch_bias_activation_into<__nv_bfloat16, 8>(src, static_cast<__nv_bfloat16*>(dst), rows, cols,
                                                bias, act, stream);
}

}  // namespace ddpb::gpu
