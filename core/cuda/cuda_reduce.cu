// Reductions: sum over rows, sum of all elements, all-finite check. All deterministic: no
// floating-point atomics, and an order of additions fixed by the input size.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_convert.cuh"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_reduce.cuh"

namespace ddpb::gpu {
namespace {

constexpr int kSumThreads = 512;
constexpr int64_t kSumMaxBlocks = 256;  // stage-2 partials: one block of 512 threads adds them

// ============================== kernels ==============================================

// T: float, or __nv_bfloat16 widened exactly (--precision bf16's bias gradients).
template <typename T>
struct RowSumLoader {
  const T* x;
  int64_t cols;
  __device__ void operator()(int64_t row, int64_t col, float* acc) const {
    acc[0] += to_f32(x[row * cols + col]);
  }
};

// Each block sums a grid-strided subset of x; out[blockIdx.x] = scale * that sum.
__global__ void sum_partial_kernel(const float* x, int64_t n, float* out, float scale) {
  __shared__ float shared[kWarpSize];
  float s = 0.0f;
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) s += x[i];
  s = block_reduce_sum(s, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = scale * s;
}

__global__ void mark_non_finite_kernel(const float* x, int64_t n, float* out) {
  for (int64_t i = global_thread_index(); i < n; i += global_thread_count()) {
    // Every writer stores the same 0, so the race between writers cannot change the result.
    if (!isfinite(x[i])) out[0] = 0.0f;
  }
}

// One block orthogonalises the whole matrix: PowerSGD's P and Q have a handful of columns,
// so the columns are done one after another and each reduction is a block reduction.
__global__ void orthogonalize_columns_kernel(float* m, int64_t n, int64_t r, float epsilon) {
  __shared__ float shared[kWarpSize];
  for (int64_t i = 0; i < r; ++i) {
    float sq = 0.0f;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sq += m[k * r + i] * m[k * r + i];
    const float norm = sqrtf(block_reduce_sum(sq, shared));
    const float denom = epsilon > 0.0f ? norm + epsilon : norm;
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m[k * r + i] *= inv;
    __syncthreads();
    for (int64_t j = i + 1; j < r; ++j) {
      float dot = 0.0f;
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) dot += m[k * r + i] * m[k * r + j];
      const float d = block_reduce_sum(dot, shared);
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m[k * r + j] -= d * m[k * r + i];
      __syncthreads();
    }
  }
}

int64_t sum_blocks(int64_t n) {
  return std::clamp<int64_t>((n + kSumThreads * 8 - 1) / (kSumThreads * 8), 1, kSumMaxBlocks);
}

}  // namespace

// ============================== launchers ============================================

int64_t sum_rows_scratch_floats(int64_t rows, int64_t cols) {
  return column_reduce_scratch_floats(rows, cols, /*outputs=*/1);
}

void launch_sum_rows(const void* x, DType x_dtype, int64_t rows, int64_t cols, float* out,
                     float* scratch, cudaStream_t stream) {
  const ColumnOutputs outs{{out, nullptr}};
  if (x_dtype == DType::F32) {
    launch_column_reduce<1>(RowSumLoader<float>{static_cast<const float*>(x), cols}, rows, cols,
                            outs, scratch, stream);
    return;
  }
  DDPB_CHECK(x_dtype == DType::BF16)
      << "sum_rows of " << dtype_name(x_dtype) << " is not supported on CUDA";
  launch_column_reduce<1>(RowSumLoader<__nv_bfloat16>{static_cast<const __nv_bfloat16*>(x), cols},
                          rows, cols, outs, scratch, stream);
}

int64_t sum_all_scratch_floats(int64_t n) {
  const int64_t blocks = sum_blocks(n);
  return blocks > 1 ? blocks : 0;
}

void launch_sum_all(const float* x, int64_t n, float* out, float scale, float* scratch,
                    cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "sum of " << n << " elements";
  const int64_t blocks = sum_blocks(n);
  if (blocks == 1) {
    sum_partial_kernel<<<1, kSumThreads, 0, stream>>>(x, n, out, scale);
    CUDA_LAUNCH_CHECK() << "sum_partial_kernel";
    return;
  }
  DDPB_CHECK(scratch != nullptr) << "sum of " << n << " elements needs scratch";
  sum_partial_kernel<<<static_cast<unsigned>(blocks), kSumThreads, 0, stream>>>(x, n, scratch,
                                                                                1.0f);
  CUDA_LAUNCH_CHECK() << "sum_partial_kernel";
  sum_partial_kernel<<<1, kSumThreads, 0, stream>>>(scratch, blocks, out, scale);
  CUDA_LAUNCH_CHECK() << "sum_partial_kernel (final)";
}

void launch_all_finite(const float* x, int64_t n, float* out, cudaStream_t stream) {
  DDPB_CHECK(n >= 0) << "all_finite of " << n << " elements";
  launch_fill(out, 1, 1.0f, stream);
  if (n == 0) return;
  mark_non_finite_kernel<<<elementwise_blocks(n), kElementwiseBlock, 0, stream>>>(x, n, out);
  CUDA_LAUNCH_CHECK() << "mark_non_finite_kernel";
}

void launch_orthogonalize_columns(float* m, int64_t n, int64_t r, float epsilon,
                                  cudaStream_t stream) {
  DDPB_CHECK(n >= 0 && r >= 0) << "orthogonalize_columns of [" << n << ", " << r << "]";
  if (n == 0 || r == 0) return;
  orthogonalize_columns_kernel<<<1, kSumThreads, 0, stream>>>(m, n, r, epsilon);
  CUDA_LAUNCH_CHECK() << "orthogonalize_columns_kernel";
}

}  // namespace ddpb::gpu
