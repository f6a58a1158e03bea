// Row-wise softmax and layer norm, forward and backward. One block per row: the row's
// statistics come from deterministic block reductions (core/cuda/cuda_common.cuh).
#include <cuda_runtime.h>

#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_reduce.cuh"

namespace ddpb::gpu {
namespace {

// ============================== kernels ==============================================

__global__ void softmax_forward_kernel(const float* x, float* y, int64_t cols) {
  __shared__ float shared[kWarpSize];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  float row_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) row_max = fmaxf(row_max, xr[c]);
  row_max = block_reduce_max(row_max, shared);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - row_max);
  sum = block_reduce_sum(sum, shared);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - row_max) / sum;
}

// dx = y * (dy - sum(dy * y)) per row.
__global__ void softmax_backward_kernel(const float* dy, const float* y, float* dx, int64_t cols) {
  __shared__ float shared[kWarpSize];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * cols;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += dy[offset + c] * y[offset + c];
  dot = block_reduce_sum(dot, shared);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dx[offset + c] = y[offset + c] * (dy[offset + c] - dot);
  }
}

// Two passes over the row (mean, then the centred variance) rather than E[x^2] - E[x]^2,
// which cancels badly when |mean| >> std.
__global__ void layernorm_forward_kernel(const float* x, const float* weight, const float* bias,
                                         float* y, float* mean, float* rstd, int64_t cols,
                                         float eps) {
  __shared__ float shared[kWarpSize];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += xr[c];
  const float m = block_reduce_sum(sum, shared) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = xr[c] - m;
    sq += d * d;
  }
  const float var = block_reduce_sum(sq, shared) / static_cast<float>(cols);
  const float s = 1.0f / sqrtf(var + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = (xr[c] - m) * s * weight[c] + bias[c];
  }
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// With xhat = (x - mean) * rstd and g = dy * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
__global__ void layernorm_backward_dx_kernel(const float* dy, const float* x, const float* weight,
                                             const float* mean, const float* rstd, float* dx,
                                             int64_t cols) {
  __shared__ float shared[kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t offset = row * cols;
  const float m = mean[row];
  const float s = rstd[row];
  float sum_g = 0.0f;
  float sum_gx = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = dy[offset + c] * weight[c];
    sum_g += g;
    sum_gx += g * (x[offset + c] - m) * s;
  }
  const float mean_g = block_reduce_sum(sum_g, shared) / static_cast<float>(cols);
  const float mean_gx = block_reduce_sum(sum_gx, shared) / static_cast<float>(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (x[offset + c] - m) * s;
    const float g = dy[offset + c] * weight[c];
    dx[offset + c] = s * (g - mean_g - xhat * mean_gx);
  }
}

// dweight[c] = sum_rows dy * xhat, dbias[c] = sum_rows dy, in one column reduction.
struct LayerNormParamGradLoader {
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  int64_t cols;
  __device__ void operator()(int64_t row, int64_t col, float* acc) const {
    const float g = dy[row * cols + col];
    acc[0] += g * (x[row * cols + col] - mean[row]) * rstd[row];
    acc[1] += g;
  }
};

void check_rows(const char* op, int64_t rows, int64_t cols) {
  DDPB_CHECK(rows >= 0 && cols > 0 && rows <= INT32_MAX)
      << op << " over [" << rows << ", " << cols << "]: one block per row";
}

}  // namespace

// ============================== launchers ============================================

void launch_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  check_rows("softmax_forward", rows, cols);
  if (rows == 0) return;
  softmax_forward_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0, stream>>>(x, y,
                                                                                              cols);
  CUDA_LAUNCH_CHECK() << "softmax_forward_kernel";
}

void launch_softmax_backward(const float* dy, const float* y, float* dx, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
  check_rows("softmax_backward", rows, cols);
  if (rows == 0) return;
  softmax_backward_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0, stream>>>(
      dy, y, dx, cols);
  CUDA_LAUNCH_CHECK() << "softmax_backward_kernel";
}

void launch_layernorm_forward(const float* x, const float* weight, const float* bias, float* y,
                              float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                              cudaStream_t stream) {
  check_rows("layernorm_forward", rows, cols);
  if (rows == 0) return;
  layernorm_forward_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0, stream>>>(
      x, weight, bias, y, mean, rstd, cols, eps);
  CUDA_LAUNCH_CHECK() << "layernorm_forward_kernel";
}

int64_t layernorm_backward_scratch_floats(int64_t rows, int64_t cols) {
  return column_reduce_scratch_floats(rows, cols, /*outputs=*/2);
}

void launch_layernorm_backward(const float* dy, const float* x, const float* weight,
                               const float* mean, const float* rstd, float* dx, float* dweight,
                               float* dbias, int64_t rows, int64_t cols, float* scratch,
                               cudaStream_t stream) {
  check_rows("layernorm_backward", rows, cols);
  if (rows > 0) {
    layernorm_backward_dx_kernel<<<static_cast<unsigned>(rows), row_block_threads(cols), 0,
                                   stream>>>(dy, x, weight, mean, rstd, dx, cols);
    CUDA_LAUNCH_CHECK() << "layernorm_backward_dx_kernel";
  }
  // Overwrites dweight and dbias (zeros when rows == 0), as core/ops.h specifies.
  launch_column_reduce<2>(LayerNormParamGradLoader{dy, x, mean, rstd, cols}, rows, cols,
                          ColumnOutputs{{dweight, dbias}}, scratch, stream);
}

}  // namespace ddpb::gpu
