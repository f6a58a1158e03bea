// Batch normalisation (the SyncBatchNorm decomposition of core/ops.h) and pooling, NCHW.
// Per-channel sums are one block per channel with deterministic block reductions; the
// max-pool backward gathers into each input position from the windows that cover it, so it
// needs no atomics and is deterministic too.
#include <cuda_runtime.h>

#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"

namespace ddpb::gpu {
namespace {

constexpr int kChannelBlock = 256;

// ============================== kernels ==============================================

// Block `ch` walks channel ch's N planes of `hw` floats; stats = mean | var | count.
__global__ void bn_stats_kernel(const float* x, float* stats, int64_t n, int64_t c, int64_t hw) {
  __shared__ float shared[kWarpSize];
  const int64_t ch = blockIdx.x;
  const int64_t count = n * hw;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    sum += x[((i / hw) * c + ch) * hw + i % hw];
  }
  const float mu = block_reduce_sum(sum, shared) / static_cast<float>(count);
  float m2 = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const float d = x[((i / hw) * c + ch) * hw + i % hw] - mu;
    m2 += d * d;
  }
  m2 = block_reduce_sum(m2, shared);
  if (threadIdx.x == 0) {
    stats[ch] = mu;
    stats[c + ch] = m2 / static_cast<float>(count);
    if (ch == 0) stats[2 * c] = static_cast<float>(count);
  }
}

__global__ void bn_gather_stats_kernel(const float* stats, int64_t groups, int64_t channels,
                                       float eps, float momentum, float* mean, float* invstd,
                                       float* count, float* running_mean, float* running_var,
                                       int64_t* num_batches_tracked) {
  const int64_t ch = global_thread_index();
  const int64_t row = 2 * channels + 1;
  double total = 0;
  for (int64_t g = 0; g < groups; ++g) total += stats[g * row + 2 * channels];
  if (ch < channels) {
    double mu = 0;
    for (int64_t g = 0; g < groups; ++g) {
      mu += static_cast<double>(stats[g * row + 2 * channels]) * stats[g * row + ch];
    }
    mu /= total;
    double m2 = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const double d = stats[g * row + ch] - mu;
      m2 += stats[g * row + 2 * channels] * (stats[g * row + channels + ch] + d * d);
    }
    const double v = m2 / total;
    mean[ch] = static_cast<float>(mu);
    invstd[ch] = static_cast<float>(1.0 / sqrt(v + eps));
    if (running_mean != nullptr) {
      const double unbiased = total > 1 ? v * total / (total - 1) : v;
      running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mu);
      running_var[ch] =
          static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
    }
  }
  if (ch == 0) {
    *count = static_cast<float>(total);
    if (num_batches_tracked != nullptr) *num_batches_tracked += 1;
  }
}

__global__ void bn_elemt_kernel(const float* x, const float* mean, const float* invstd,
                                const float* weight, const float* bias, float* y, int64_t total,
                                int64_t c, int64_t hw) {
  for (int64_t i = global_thread_index(); i < total; i += global_thread_count()) {
    const int64_t ch = (i / hw) % c;
    const float a = invstd[ch] * weight[ch];
    y[i] = (x[i] - mean[ch]) * a + bias[ch];
  }
}

// sums = sum(dy) | sum(dy * xhat), one block per channel.
__global__ void bn_backward_reduce_kernel(const float* dy, const float* x, const float* mean,
                                          const float* invstd, float* sums, int64_t n, int64_t c,
                                          int64_t hw) {
  __shared__ float shared[kWarpSize];
  const int64_t ch = blockIdx.x;
  const float mu = mean[ch];
  float s = 0.0f, s_xmu = 0.0f;
  for (int64_t i = threadIdx.x; i < n * hw; i += blockDim.x) {
    const int64_t at = ((i / hw) * c + ch) * hw + i % hw;
    s += dy[at];
    s_xmu += dy[at] * (x[at] - mu);
  }
  s = block_reduce_sum(s, shared);
  s_xmu = block_reduce_sum(s_xmu, shared);
  if (threadIdx.x == 0) {
    sums[ch] = s;
    sums[c + ch] = s_xmu * invstd[ch];
  }
}

__global__ void bn_backward_elemt_kernel(const float* dy, const float* x, const float* mean,
                                         const float* invstd, const float* weight,
                                         const float* sums, const float* count, float* dx,
                                         int64_t total, int64_t c, int64_t hw) {
  const float m = *count;
  for (int64_t i = global_thread_index(); i < total; i += global_thread_count()) {
    const int64_t ch = (i / hw) % c;
    const float is = invstd[ch];
    const float xhat = (x[i] - mean[ch]) * is;
    dx[i] = weight[ch] * is * (dy[i] - sums[ch] / m - xhat * sums[c + ch] / m);
  }
}

struct PoolShape {
  int64_t planes, h, w, ph, pw, kernel, stride, padding;
};

__global__ void max_pool_forward_kernel(const float* x, float* y, int32_t* indices, PoolShape s) {
  const int64_t total = s.planes * s.ph * s.pw;
  for (int64_t i = global_thread_index(); i < total; i += global_thread_count()) {
    const int64_t ox = i % s.pw, oy = (i / s.pw) % s.ph, plane = i / (s.pw * s.ph);
    const int64_t y0 = max(oy * s.stride - s.padding, int64_t{0});
    const int64_t y1 = min(oy * s.stride - s.padding + s.kernel, s.h);
    const int64_t x0 = max(ox * s.stride - s.padding, int64_t{0});
    const int64_t x1 = min(ox * s.stride - s.padding + s.kernel, s.w);
    const float* in = x + plane * s.h * s.w;
    float best = -INFINITY;
    int64_t at = y0 * s.w + x0;
    for (int64_t yy = y0; yy < y1; ++yy) {
      for (int64_t xx = x0; xx < x1; ++xx) {
        const float v = in[yy * s.w + xx];
        if (v > best || isnan(v)) {  // a NaN wins, as in PyTorch
          best = v;
          at = yy * s.w + xx;
        }
      }
    }
    y[i] = best;
    indices[i] = static_cast<int32_t>(at);
  }
}

// Input position (yy, xx) sums the dy of every window that covers it and chose it.
__global__ void max_pool_backward_kernel(const float* dy, const int32_t* indices, float* dx,
                                         PoolShape s) {
  const int64_t total = s.planes * s.h * s.w;
  for (int64_t i = global_thread_index(); i < total; i += global_thread_count()) {
    const int64_t xx = i % s.w, yy = (i / s.w) % s.h, plane = i / (s.w * s.h);
    // Windows oy with oy*stride - padding <= yy < oy*stride - padding + kernel.
    const int64_t oy0 = max((yy + s.padding - s.kernel + s.stride) / s.stride, int64_t{0});
    const int64_t oy1 = min((yy + s.padding) / s.stride, s.ph - 1);
    const int64_t ox0 = max((xx + s.padding - s.kernel + s.stride) / s.stride, int64_t{0});
    const int64_t ox1 = min((xx + s.padding) / s.stride, s.pw - 1);
    const int32_t self = static_cast<int32_t>(yy * s.w + xx);
    const int64_t base = plane * s.ph * s.pw;
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        if (indices[base + oy * s.pw + ox] == self) sum += dy[base + oy * s.pw + ox];
      }
    }
    dx[i] = sum;
  }
}

__global__ void global_avg_pool_forward_kernel(const float* x, float* y, int64_t planes,
                                               int64_t hw) {
  for (int64_t p = global_thread_index(); p < planes; p += global_thread_count()) {
    float s = 0.0f;
    for (int64_t j = 0; j < hw; ++j) s += x[p * hw + j];
    y[p] = s / static_cast<float>(hw);
  }
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t total,
                                                int64_t hw) {
  for (int64_t i = global_thread_index(); i < total; i += global_thread_count()) {
    dx[i] = dy[i / hw] / static_cast<float>(hw);
  }
}

}  // namespace

// ============================== launchers ============================================

void launch_batch_norm_stats(const float* x, float* stats, int64_t n, int64_t c, int64_t hw,
                             cudaStream_t stream) {
  bn_stats_kernel<<<static_cast<unsigned>(c), kChannelBlock, 0, stream>>>(x, stats, n, c, hw);
  CUDA_LAUNCH_CHECK() << "bn_stats_kernel";
}

void launch_batch_norm_gather_stats(const float* stats, int64_t groups, int64_t channels, float eps,
                                    float momentum, float* mean, float* invstd, float* count,
                                    float* running_mean, float* running_var,
                                    int64_t* num_batches_tracked, cudaStream_t stream) {
  bn_gather_stats_kernel<<<elementwise_blocks(channels), kElementwiseBlock, 0, stream>>>(
      stats, groups, channels, eps, momentum, mean, invstd, count, running_mean, running_var,
      num_batches_tracked);
  CUDA_LAUNCH_CHECK() << "bn_gather_stats_kernel";
}

void launch_batch_norm_elemt(const float* x, const float* mean, const float* invstd,
                             const float* weight, const float* bias, float* y, int64_t n, int64_t c,
                             int64_t hw, cudaStream_t stream) {
  const int64_t total = n * c * hw;
  bn_elemt_kernel<<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(
      x, mean, invstd, weight, bias, y, total, c, hw);
  CUDA_LAUNCH_CHECK() << "bn_elemt_kernel";
}

void launch_batch_norm_backward_reduce(const float* dy, const float* x, const float* mean,
                                       const float* invstd, float* sums, int64_t n, int64_t c,
                                       int64_t hw, cudaStream_t stream) {
  bn_backward_reduce_kernel<<<static_cast<unsigned>(c), kChannelBlock, 0, stream>>>(
      dy, x, mean, invstd, sums, n, c, hw);
  CUDA_LAUNCH_CHECK() << "bn_backward_reduce_kernel";
}

void launch_batch_norm_backward_elemt(const float* dy, const float* x, const float* mean,
                                      const float* invstd, const float* weight, const float* sums,
                                      const float* count, float* dx, int64_t n, int64_t c,
                                      int64_t hw, cudaStream_t stream) {
  const int64_t total = n * c * hw;
  bn_backward_elemt_kernel<<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(
      dy, x, mean, invstd, weight, sums, count, dx, total, c, hw);
  CUDA_LAUNCH_CHECK() << "bn_backward_elemt_kernel";
}

void launch_max_pool2d_forward(const float* x, float* y, int32_t* indices, int64_t planes,
                               int64_t h, int64_t w, int64_t ph, int64_t pw, int64_t kernel,
                               int64_t stride, int64_t padding, cudaStream_t stream) {
  const PoolShape s{planes, h, w, ph, pw, kernel, stride, padding};
  max_pool_forward_kernel<<<elementwise_blocks(planes * ph * pw), kElementwiseBlock, 0, stream>>>(
      x, y, indices, s);
  CUDA_LAUNCH_CHECK() << "max_pool_forward_kernel";
}

void launch_max_pool2d_backward(const float* dy, const int32_t* indices, float* dx, int64_t planes,
                                int64_t h, int64_t w, int64_t ph, int64_t pw, int64_t kernel,
                                int64_t stride, int64_t padding, cudaStream_t stream) {
  const PoolShape s{planes, h, w, ph, pw, kernel, stride, padding};
  max_pool_backward_kernel<<<elementwise_blocks(planes * h * w), kElementwiseBlock, 0, stream>>>(
      dy, indices, dx, s);
  CUDA_LAUNCH_CHECK() << "max_pool_backward_kernel";
}

void launch_global_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t hw,
                                    cudaStream_t stream) {
  global_avg_pool_forward_kernel<<<elementwise_blocks(planes), kElementwiseBlock, 0, stream>>>(
      x, y, planes, hw);
  CUDA_LAUNCH_CHECK() << "global_avg_pool_forward_kernel";
}

void launch_global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t hw,
                                     cudaStream_t stream) {
  const int64_t total = planes * hw;
  global_avg_pool_backward_kernel<<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(
      dy, dx, total, hw);
  CUDA_LAUNCH_CHECK() << "global_avg_pool_backward_kernel";
}

}  // namespace ddpb::gpu
