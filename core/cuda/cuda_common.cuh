// Device-side helpers shared by the kernel files of the CUDA backend (nvcc only).
//
// Determinism: every reduction here combines values in an order fixed by the launch shape
// (a shuffle tree inside a warp, then warps in index order), never by scheduling, so the
// same input on the same launch configuration gives bit-identical results.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace ddpb::gpu {

constexpr int kWarpSize = 32;
constexpr int kElementwiseBlock = 256;
// Grid-stride loops cover any size, so grids are capped: more blocks than the GPU can hold
// at once only add scheduling overhead.
constexpr int64_t kMaxElementwiseBlocks = 4096;

inline int elementwise_blocks(int64_t n, int block = kElementwiseBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, kMaxElementwiseBlocks));
}

// Threads for a kernel that gives one block to each row of `cols` elements: a whole number
// of warps, enough to cover short rows in one pass, at most `max_threads`.
inline int row_block_threads(int64_t cols, int max_threads = 512) {
  const int64_t warps = (cols + kWarpSize - 1) / kWarpSize;
  return static_cast<int>(std::clamp<int64_t>(warps, 1, max_threads / kWarpSize)) * kWarpSize;
}

__device__ __forceinline__ int64_t global_thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t global_thread_count() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Whether every pointer is 16-byte aligned, so that float4 loads and stores of it are legal
// (Note [Vectorised element-wise kernels], cuda_elementwise.cu). Null pointers count as
// aligned: the kernels never dereference them.
template <typename... Ptrs>
inline bool aligned16(const Ptrs*... ptrs) {
  return ((reinterpret_cast<uintptr_t>(ptrs) % 16 == 0) && ...);
}

// The pointers of an element-wise op with kIn float inputs and one float output; `out` may
// be one of the inputs (in-place ops).
template <int kIn>
struct MapArgs {
  static constexpr int kSlots = kIn > 0 ? kIn : 1;  // no zero-length arrays
  const float* in[kSlots];
  float* out;
  bool aligned16() const {
    bool all = ddpb::gpu::aligned16(out);
    for (int k = 0; k < kIn; ++k) all = all && ddpb::gpu::aligned16(in[k]);
    return all;
  }
};

// Component j of a float4; with j a constant after unrolling, it stays in registers.
__device__ __forceinline__ float& lane(float4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// Note [Incremental index walks]
// Kernels over image tensors need the coordinates of each flat index (its channel, its
// position in a plane), and a 64-bit divide or modulo costs dozens of instructions on the
// GPU, more than the load it serves. So a grid-stride loop walks the coordinates instead:
// the flat index e is a number in a mixed radix, digit d[0] innermost, d[k] in [0, radix[k])
// for k < kDigits - 1 and the last digit unbounded, and the stride S is written in the same
// radix once per thread. Advancing by S adds digit by digit with a carry: each sum is at
// most (radix - 1) + (radix - 1) + 1 < 2 radix, so one conditional subtraction keeps the
// digit in range, and the walk stays equal to the decomposition of e + S. A thread divides
// only in start() (2 (kDigits - 1) divides, once), never in the loop. Callers must not start
// a walk with a zero radix (a tensor with no elements launches nothing).
template <int kDigits>
struct IndexWalk {
  static_assert(kDigits >= 2);
  int64_t d[kDigits];     // the current index's digits
  int64_t step[kDigits];  // the stride's digits

  // radix[0..kDigits-1): the bounded digits' radices, innermost first; all >= 1.
  __device__ __forceinline__ void start(int64_t index, int64_t stride, const int64_t* radix) {
    for (int k = 0; k < kDigits - 1; ++k) {
      d[k] = index % radix[k];
      index /= radix[k];
      step[k] = stride % radix[k];
      stride /= radix[k];
    }
    d[kDigits - 1] = index;
    step[kDigits - 1] = stride;
  }
  __device__ __forceinline__ void advance(const int64_t* radix) {
    int64_t carry = 0;
    for (int k = 0; k < kDigits - 1; ++k) {
      d[k] += step[k] + carry;
      carry = d[k] >= radix[k] ? 1 : 0;
      if (carry != 0) d[k] -= radix[k];
    }
    d[kDigits - 1] += step[kDigits - 1] + carry;
  }
};

__device__ __forceinline__ float warp_reduce_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Reduces `v` over the block and returns the result to every thread. blockDim.x must be a
// multiple of 32 (at most 1024). `shared` holds at least 32 floats; the function syncs
// before returning, so the same buffer may be passed to consecutive calls.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* shared) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = kMax ? warp_reduce_max(v) : warp_reduce_sum(v);
  __syncthreads();  // a previous call may still be reading `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const float identity = kMax ? -INFINITY : 0.0f;
  float r = lane < num_warps ? shared[lane] : identity;
  r = kMax ? warp_reduce_max(r) : warp_reduce_sum(r);
  return r;
}

__device__ __forceinline__ float block_reduce_sum(float v, float* shared) {
  return block_reduce<false>(v, shared);
}
__device__ __forceinline__ float block_reduce_max(float v, float* shared) {
  return block_reduce<true>(v, shared);
}

}  // namespace ddpb::gpu
