// Batch normalisation (the SyncBatchNorm decomposition of core/ops.h) and pooling, NCHW or
// NHWC (a flag in the extents; the index maths is the only difference).
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

// An image batch's extents and layout: where value j (0 <= j < hw) of channel ch of image i is.
struct Img {
  int64_t n, c, hw;
  bool nhwc;
  __device__ __forceinline__ int64_t at(int64_t i, int64_t ch, int64_t j) const {
    return nhwc ? (i * hw + j) * c + ch : (i * c + ch) * hw + j;
  }
  // The channel of flat element e.
  __device__ __forceinline__ int64_t channel(int64_t e) const {
    return nhwc ? e % c : (e / hw) % c;
  }
};

// Block `ch` walks channel ch's n * hw values; stats = mean | var | count.
__global__ void bn_stats_kernel(const float* x, float* stats, Img s) {
  __shared__ float shared[kWarpSize];
  const int64_t ch = blockIdx.x;
  const int64_t count = s.n * s.hw;
  float sum = 0.0f;
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x) sum += x[s.at(r / s.hw, ch, r % s.hw)];
  const float mu = block_reduce_sum(sum, shared) / static_cast<float>(count);
  float m2 = 0.0f;
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    const float d = x[s.at(r / s.hw, ch, r % s.hw)] - mu;
    m2 += d * d;
  }
  m2 = block_reduce_sum(m2, shared);
  if (threadIdx.x == 0) {
    stats[ch] = mu;
    stats[s.c + ch] = m2 / static_cast<float>(count);
    if (ch == 0) stats[2 * s.c] = static_cast<float>(count);
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
                                const float* weight, const float* bias, float* y, Img s) {
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t i = global_thread_index(); i < total; i += global_thread_count()) {
    const int64_t ch = s.channel(i);
    const float a = invstd[ch] * weight[ch];
    y[i] = (x[i] - mean[ch]) * a + bias[ch];
  }
}

// sums = sum(dy) | sum(dy * xhat), one block per channel.
__global__ void bn_backward_reduce_kernel(const float* dy, const float* x, const float* mean,
                                          const float* invstd, float* sums, Img s) {
  __shared__ float shared[kWarpSize];
  const int64_t ch = blockIdx.x;
  const float mu = mean[ch];
  float sum = 0.0f, s_xmu = 0.0f;
  for (int64_t r = threadIdx.x; r < s.n * s.hw; r += blockDim.x) {
    const int64_t at = s.at(r / s.hw, ch, r % s.hw);
    sum += dy[at];
    s_xmu += dy[at] * (x[at] - mu);
  }
  sum = block_reduce_sum(sum, shared);
  s_xmu = block_reduce_sum(s_xmu, shared);
  if (threadIdx.x == 0) {
    sums[ch] = sum;
    sums[s.c + ch] = s_xmu * invstd[ch];
  }
}

__global__ void bn_backward_elemt_kernel(const float* dy, const float* x, const float* mean,
                                         const float* invstd, const float* weight,
                                         const float* sums, const float* count, float* dx, Img s) {
  const float m = *count;
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t i = global_thread_index(); i < total; i += global_thread_count()) {
    const int64_t ch = s.channel(i);
    const float is = invstd[ch];
    const float xhat = (x[i] - mean[ch]) * is;
    dx[i] = weight[ch] * is * (dy[i] - sums[ch] / m - xhat * sums[s.c + ch] / m);
  }
}

struct PoolShape {
  int64_t n, c, h, w, ph, pw, kernel, stride, padding;
  bool nhwc;
  // Flat element e of an [n, c, rows, cols] batch in this layout, as (image, channel, y, x).
  __device__ __forceinline__ void decode(int64_t e, int64_t rows, int64_t cols, int64_t& i,
                                         int64_t& ch, int64_t& y, int64_t& x) const {
    if (nhwc) {
      ch = e % c, x = (e / c) % cols, y = (e / (c * cols)) % rows, i = e / (c * cols * rows);
    } else {
      x = e % cols, y = (e / cols) % rows, ch = (e / (cols * rows)) % c, i = e / (cols * rows * c);
    }
  }
  __device__ __forceinline__ int64_t at(int64_t i, int64_t ch, int64_t pos, int64_t plane) const {
    return nhwc ? (i * plane + pos) * c + ch : (i * c + ch) * plane + pos;
  }
};

__global__ void max_pool_forward_kernel(const float* x, float* y, int32_t* indices, PoolShape s) {
  const int64_t total = s.n * s.c * s.ph * s.pw;
  for (int64_t o = global_thread_index(); o < total; o += global_thread_count()) {
    int64_t i, ch, oy, ox;
    s.decode(o, s.ph, s.pw, i, ch, oy, ox);
    const int64_t y0 = max(oy * s.stride - s.padding, int64_t{0});
    const int64_t y1 = min(oy * s.stride - s.padding + s.kernel, s.h);
    const int64_t x0 = max(ox * s.stride - s.padding, int64_t{0});
    const int64_t x1 = min(ox * s.stride - s.padding + s.kernel, s.w);
    float best = -INFINITY;
    int64_t pos = y0 * s.w + x0;
    for (int64_t yy = y0; yy < y1; ++yy) {
      for (int64_t xx = x0; xx < x1; ++xx) {
        const float v = x[s.at(i, ch, yy * s.w + xx, s.h * s.w)];
        if (v > best || isnan(v)) {  // a NaN wins, as in PyTorch
          best = v;
          pos = yy * s.w + xx;
        }
      }
    }
    y[o] = best;
    indices[o] = static_cast<int32_t>(pos);
  }
}

// Input position (yy, xx) sums the dy of every window that covers it and chose it.
__global__ void max_pool_backward_kernel(const float* dy, const int32_t* indices, float* dx,
                                         PoolShape s) {
  const int64_t total = s.n * s.c * s.h * s.w;
  for (int64_t e = global_thread_index(); e < total; e += global_thread_count()) {
    int64_t i, ch, yy, xx;
    s.decode(e, s.h, s.w, i, ch, yy, xx);
    // Windows oy with oy*stride - padding <= yy < oy*stride - padding + kernel.
    const int64_t oy0 = max((yy + s.padding - s.kernel + s.stride) / s.stride, int64_t{0});
    const int64_t oy1 = min((yy + s.padding) / s.stride, s.ph - 1);
    const int64_t ox0 = max((xx + s.padding - s.kernel + s.stride) / s.stride, int64_t{0});
    const int64_t ox1 = min((xx + s.padding) / s.stride, s.pw - 1);
    const int32_t self = static_cast<int32_t>(yy * s.w + xx);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = s.at(i, ch, oy * s.pw + ox, s.ph * s.pw);
        if (indices[o] == self) sum += dy[o];
      }
    }
    dx[e] = sum;
  }
}

__global__ void global_avg_pool_forward_kernel(const float* x, float* y, Img s) {
  for (int64_t p = global_thread_index(); p < s.n * s.c; p += global_thread_count()) {
    const int64_t i = p / s.c, ch = p % s.c;
    float sum = 0.0f;
    for (int64_t j = 0; j < s.hw; ++j) sum += x[s.at(i, ch, j)];
    y[p] = sum / static_cast<float>(s.hw);
  }
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, Img s) {
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t e = global_thread_index(); e < total; e += global_thread_count()) {
    const int64_t ch = s.channel(e);
    const int64_t i = e / (s.c * s.hw);  // the image comes first in both layouts
    dx[e] = dy[i * s.c + ch] / static_cast<float>(s.hw);
  }
}

__global__ void nchw_to_nhwc_kernel(const float* x, float* y, Img s) {
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t e = global_thread_index(); e < total; e += global_thread_count()) {
    const int64_t ch = e % s.c, j = (e / s.c) % s.hw, i = e / (s.c * s.hw);
    y[e] = x[(i * s.c + ch) * s.hw + j];  // indexed by the output: coalesced writes
  }
}

}  // namespace

// ============================== launchers ============================================

void launch_batch_norm_stats(const float* x, float* stats, const ImageExtents& e,
                             cudaStream_t stream) {
  bn_stats_kernel<<<static_cast<unsigned>(e.c), kChannelBlock, 0, stream>>>(
      x, stats, Img{e.n, e.c, e.hw, e.nhwc});
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
                             const float* weight, const float* bias, float* y,
                             const ImageExtents& e, cudaStream_t stream) {
  bn_elemt_kernel<<<elementwise_blocks(e.n * e.c * e.hw), kElementwiseBlock, 0, stream>>>(
      x, mean, invstd, weight, bias, y, Img{e.n, e.c, e.hw, e.nhwc});
  CUDA_LAUNCH_CHECK() << "bn_elemt_kernel";
}

void launch_batch_norm_backward_reduce(const float* dy, const float* x, const float* mean,
                                       const float* invstd, float* sums, const ImageExtents& e,
                                       cudaStream_t stream) {
  bn_backward_reduce_kernel<<<static_cast<unsigned>(e.c), kChannelBlock, 0, stream>>>(
      dy, x, mean, invstd, sums, Img{e.n, e.c, e.hw, e.nhwc});
  CUDA_LAUNCH_CHECK() << "bn_backward_reduce_kernel";
}

void launch_batch_norm_backward_elemt(const float* dy, const float* x, const float* mean,
                                      const float* invstd, const float* weight, const float* sums,
                                      const float* count, float* dx, const ImageExtents& e,
                                      cudaStream_t stream) {
  bn_backward_elemt_kernel<<<elementwise_blocks(e.n * e.c * e.hw), kElementwiseBlock, 0, stream>>>(
      dy, x, mean, invstd, weight, sums, count, dx, Img{e.n, e.c, e.hw, e.nhwc});
  CUDA_LAUNCH_CHECK() << "bn_backward_elemt_kernel";
}

void launch_max_pool2d_forward(const float* x, float* y, int32_t* indices, const PoolExtents& p,
                               cudaStream_t stream) {
  const PoolShape s{p.n, p.c, p.h, p.w, p.ph, p.pw, p.kernel, p.stride, p.padding, p.nhwc};
  max_pool_forward_kernel<<<elementwise_blocks(p.n * p.c * p.ph * p.pw), kElementwiseBlock, 0,
                            stream>>>(x, y, indices, s);
  CUDA_LAUNCH_CHECK() << "max_pool_forward_kernel";
}

void launch_max_pool2d_backward(const float* dy, const int32_t* indices, float* dx,
                                const PoolExtents& p, cudaStream_t stream) {
  const PoolShape s{p.n, p.c, p.h, p.w, p.ph, p.pw, p.kernel, p.stride, p.padding, p.nhwc};
  max_pool_backward_kernel<<<elementwise_blocks(p.n * p.c * p.h * p.w), kElementwiseBlock, 0,
                             stream>>>(dy, indices, dx, s);
  CUDA_LAUNCH_CHECK() << "max_pool_backward_kernel";
}

void launch_global_avg_pool_forward(const float* x, float* y, const ImageExtents& e,
                                    cudaStream_t stream) {
  global_avg_pool_forward_kernel<<<elementwise_blocks(e.n * e.c), kElementwiseBlock, 0, stream>>>(
      x, y, Img{e.n, e.c, e.hw, e.nhwc});
  CUDA_LAUNCH_CHECK() << "global_avg_pool_forward_kernel";
}

void launch_global_avg_pool_backward(const float* dy, float* dx, const ImageExtents& e,
                                     cudaStream_t stream) {
  global_avg_pool_backward_kernel<<<elementwise_blocks(e.n * e.c * e.hw), kElementwiseBlock, 0,
                                    stream>>>(dy, dx, Img{e.n, e.c, e.hw, e.nhwc});
  CUDA_LAUNCH_CHECK() << "global_avg_pool_backward_kernel";
}

void launch_nchw_to_nhwc(const float* x, float* y, const ImageExtents& e, cudaStream_t stream) {
  nchw_to_nhwc_kernel<<<elementwise_blocks(e.n * e.c * e.hw), kElementwiseBlock, 0, stream>>>(
      x, y, Img{e.n, e.c, e.hw, true});
  CUDA_LAUNCH_CHECK() << "nchw_to_nhwc_kernel";
}

}  // namespace ddpb::gpu
