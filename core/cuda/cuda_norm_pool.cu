// Batch normalisation (the SyncBatchNorm decomposition of core/ops.h) and pooling, NCHW or
// NHWC (a flag in the extents; the index maths is the only difference).
// Per-channel sums are two-stage reductions (Note [Batch-norm channel reductions]); the
// max-pool backward gathers into each input position from the windows that cover it, so it
// needs no atomics and is deterministic too.
//
// Note [Batch-norm channel reductions]
// A channel's statistics sum N*HW values. One block per channel would leave most SMs idle
// (ResNet-50's 64-channel layers fill 64 of an H200's 132) and read NHWC with a stride of C.
// So both layouts reduce in two stages, in an order fixed by the shape alone (deterministic):
//  - NHWC is a column reduction (rows N*HW, columns C; cuda_reduce.cuh): 32 channels per
//    block, every row read coalesced, chunks of rows across blocks, then the chunks in order;
//  - NCHW gives each (channel, chunk) a block that reads contiguous runs of one image plane,
//    and the chunk partials are added in chunk order by the same finish kernel.
// The index walk is incremental (one divide per thread), not a 64-bit divide per value.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"
#include "core/cuda/cuda_reduce.cuh"

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

// ---- Per-channel reductions (Note [Batch-norm channel reductions]) --------------------

// NCHW stage 1: about this many values per block, and at most ~1024 blocks in all.
constexpr int64_t kValuesPerChunk = 4096;
constexpr int64_t kMaxReduceBlocks = 1024;

struct ChannelPlan {
  int64_t chunks;     // blocks per channel
  int64_t per_chunk;  // values (of the channel's n * hw) per block
};

ChannelPlan plan_channel_reduce(int64_t count, int64_t channels) {
  const int64_t max_chunks =
      std::max<int64_t>(1, kMaxReduceBlocks / std::max<int64_t>(channels, 1));
  int64_t chunks =
      std::clamp<int64_t>((count + kValuesPerChunk - 1) / kValuesPerChunk, 1, max_chunks);
  const int64_t per_chunk = std::max<int64_t>(1, (count + chunks - 1) / chunks);
  chunks = std::max<int64_t>(1, (count + per_chunk - 1) / per_chunk);
  return {chunks, per_chunk};
}

// Block (ch, chunk) adds its values into outs.ptr[o][chunk * c + ch]. Loader:
// __device__ void operator()(int64_t flat_index, int64_t ch, float* acc) const.
template <int kOut, typename Loader>
__global__ void channel_partial_kernel(Loader load, Img s, int64_t per_chunk, ColumnOutputs outs) {
  __shared__ float shared[kWarpSize];
  const int64_t ch = blockIdx.x, chunk = blockIdx.y;
  const int64_t count = s.n * s.hw;
  const int64_t end = min(count, (chunk + 1) * per_chunk);
  float acc[kOut];
  for (int o = 0; o < kOut; ++o) acc[o] = 0.0f;
  int64_t r = chunk * per_chunk + threadIdx.x;
  int64_t i = r / s.hw, j = r - i * s.hw;
  const int64_t step_i = blockDim.x / s.hw, step_j = blockDim.x - step_i * s.hw;
  for (; r < end; r += blockDim.x) {
    load((i * s.c + ch) * s.hw + j, ch, acc);
    i += step_i;
    j += step_j;
    if (j >= s.hw) {
      j -= s.hw;
      ++i;
    }
  }
  for (int o = 0; o < kOut; ++o) {
    const float total = block_reduce_sum(acc[o], shared);
    if (threadIdx.x == 0) outs.ptr[o][chunk * s.c + ch] = total;
  }
}

// The column reduction's loader for NHWC: row = image * hw + position, col = channel.
template <typename Loader>
struct NhwcRows {
  Loader load;
  int64_t c;
  __device__ __forceinline__ void operator()(int64_t row, int64_t col, float* acc) const {
    load(row * c + col, col, acc);
  }
};

int64_t channel_reduce_scratch_floats(const ImageExtents& e, int outputs) {
  if (e.nhwc) return column_reduce_scratch_floats(e.n * e.hw, e.c, outputs);
  const ChannelPlan plan = plan_channel_reduce(e.n * e.hw, e.c);
  return plan.chunks > 1 ? outputs * plan.chunks * e.c : 0;
}

// outs.ptr[o][ch] = the sum over channel ch's n * hw values of what `load` adds into acc[o].
template <int kOut, typename Loader>
void launch_channel_reduce(const Loader& load, const ImageExtents& e, ColumnOutputs outs,
                           float* scratch, cudaStream_t stream) {
  if (e.c == 0) return;
  if (e.n * e.hw == 0) {  // nothing to add: every sum is 0
    for (int o = 0; o < kOut; ++o) launch_fill(outs.ptr[o], e.c, 0.0f, stream);
    return;
  }
  if (e.nhwc) {
    launch_column_reduce<kOut>(NhwcRows<Loader>{load, e.c}, e.n * e.hw, e.c, outs, scratch, stream);
    return;
  }
  const ChannelPlan plan = plan_channel_reduce(e.n * e.hw, e.c);
  DDPB_CHECK(e.c <= INT32_MAX && plan.chunks <= 65535)
      << "batch-norm reduction over " << e.c << " channels exceeds the grid";
  const dim3 grid(static_cast<unsigned>(e.c), static_cast<unsigned>(plan.chunks));
  const Img img{e.n, e.c, e.hw, false};
  if (plan.chunks == 1) {
    channel_partial_kernel<kOut>
        <<<grid, kChannelBlock, 0, stream>>>(load, img, plan.per_chunk, outs);
    CUDA_LAUNCH_CHECK() << "channel_partial_kernel";
    return;
  }
  DDPB_CHECK(scratch != nullptr) << "batch-norm reduction needs scratch";
  ColumnOutputs partial{};
  for (int o = 0; o < kOut; ++o) partial.ptr[o] = scratch + o * plan.chunks * e.c;
  channel_partial_kernel<kOut>
      <<<grid, kChannelBlock, 0, stream>>>(load, img, plan.per_chunk, partial);
  CUDA_LAUNCH_CHECK() << "channel_partial_kernel";
  column_finish_kernel<kOut>
      <<<elementwise_blocks(e.c), kElementwiseBlock, 0, stream>>>(scratch, plan.chunks, e.c, outs);
  CUDA_LAUNCH_CHECK() << "column_finish_kernel";
}

struct SumLoader {
  const float* x;
  __device__ __forceinline__ void operator()(int64_t e, int64_t, float* acc) const {
    acc[0] += x[e];
  }
};

// Squared deviations from the mean, which stats[0..c) holds as a sum until bn_mean_kernel.
struct SquaredDeviationLoader {
  const float* x;
  const float* mean;
  __device__ __forceinline__ void operator()(int64_t e, int64_t ch, float* acc) const {
    const float d = x[e] - mean[ch];
    acc[0] += d * d;
  }
};

// sum(dy) and sum(dy * (x - mean)).
struct BackwardLoader {
  const float* dy;
  const float* x;
  const float* mean;
  __device__ __forceinline__ void operator()(int64_t e, int64_t ch, float* acc) const {
    const float g = dy[e];
    acc[0] += g;
    acc[1] += g * (x[e] - mean[ch]);
  }
};

// values[ch] /= divisor, or *= scales[ch] when given; with count_out, also *count_out = count.
__global__ void scale_channels_kernel(float* values, int64_t channels, float divisor,
                                      const float* scales, float* count_out, float count) {
  const int64_t ch = global_thread_index();
  if (ch < channels) {
    values[ch] = scales != nullptr ? values[ch] * scales[ch] : values[ch] / divisor;
  }
  if (ch == 0 && count_out != nullptr) *count_out = count;
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

__global__ void nhwc_to_nchw_kernel(const float* x, float* y, Img s) {
  const int64_t total = s.n * s.c * s.hw;
  for (int64_t e = global_thread_index(); e < total; e += global_thread_count()) {
    const int64_t j = e % s.hw, ch = (e / s.hw) % s.c, i = e / (s.c * s.hw);
    y[e] = x[(i * s.hw + j) * s.c + ch];  // indexed by the output: coalesced writes
  }
}

}  // namespace

// ============================== launchers ============================================

int64_t batch_norm_stats_scratch_floats(const ImageExtents& e) {
  return channel_reduce_scratch_floats(e, 1);
}

// stats = mean | var | count: the sum, the mean, the squared deviations, the variance.
void launch_batch_norm_stats(const float* x, float* stats, const ImageExtents& e, float* scratch,
                             cudaStream_t stream) {
  const int64_t count = e.n * e.hw;
  const float divisor = static_cast<float>(count);
  const unsigned blocks = elementwise_blocks(e.c);
  launch_channel_reduce<1>(SumLoader{x}, e, ColumnOutputs{{stats, nullptr}}, scratch, stream);
  scale_channels_kernel<<<blocks, kElementwiseBlock, 0, stream>>>(stats, e.c, divisor, nullptr,
                                                                  nullptr, 0.0f);
  CUDA_LAUNCH_CHECK() << "scale_channels_kernel (mean)";
  launch_channel_reduce<1>(SquaredDeviationLoader{x, stats}, e,
                           ColumnOutputs{{stats + e.c, nullptr}}, scratch, stream);
  scale_channels_kernel<<<blocks, kElementwiseBlock, 0, stream>>>(
      stats + e.c, e.c, divisor, nullptr, stats + 2 * e.c, divisor);
  CUDA_LAUNCH_CHECK() << "scale_channels_kernel (variance)";
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

int64_t batch_norm_backward_reduce_scratch_floats(const ImageExtents& e) {
  return channel_reduce_scratch_floats(e, 2);
}

// sums = sum(dy) | sum(dy * xhat) = sum(dy * (x - mean)) * invstd.
void launch_batch_norm_backward_reduce(const float* dy, const float* x, const float* mean,
                                       const float* invstd, float* sums, const ImageExtents& e,
                                       float* scratch, cudaStream_t stream) {
  launch_channel_reduce<2>(BackwardLoader{dy, x, mean}, e, ColumnOutputs{{sums, sums + e.c}},
                           scratch, stream);
  scale_channels_kernel<<<elementwise_blocks(e.c), kElementwiseBlock, 0, stream>>>(
      sums + e.c, e.c, 1.0f, invstd, nullptr, 0.0f);
  CUDA_LAUNCH_CHECK() << "scale_channels_kernel (backward)";
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

void launch_nhwc_to_nchw(const float* x, float* y, const ImageExtents& e, cudaStream_t stream) {
  nhwc_to_nchw_kernel<<<elementwise_blocks(e.n * e.c * e.hw), kElementwiseBlock, 0, stream>>>(
      x, y, Img{e.n, e.c, e.hw, false});
  CUDA_LAUNCH_CHECK() << "nhwc_to_nchw_kernel";
}

}  // namespace ddpb::gpu
