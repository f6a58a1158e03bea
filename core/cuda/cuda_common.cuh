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
