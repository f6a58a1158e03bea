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
// The index walk is incremental (one divide per thread), not a 64-bit divide per value; so is
// every other kernel's here (Note [Incremental index walks] in cuda_common.cuh).
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
};

// The coordinates (image, channel, position) of the flat elements e, e + stride, ... of an
// image batch in either layout, walked without a divide per element (Note [Incremental index
// walks], cuda_common.cuh): the digits are (position, channel, image) in NCHW and (channel,
// position, image) in NHWC. The batch must not be empty (no zero radix).
struct ImageCoords {
  int64_t radix[2];
  bool nhwc;
  IndexWalk<3> walk;
  __device__ __forceinline__ ImageCoords(const Img& s, int64_t e, int64_t stride)
      : radix{s.nhwc ? s.c : s.hw, s.nhwc ? s.hw : s.c}, nhwc(s.nhwc) {
    walk.start(e, stride, radix);
  }
  __device__ __forceinline__ void advance() { walk.advance(radix); }
  __device__ __forceinline__ int64_t image() const { return walk.d[2]; }
  __device__ __forceinline__ int64_t channel() const { return nhwc ? walk.d[0] : walk.d[1]; }
  __device__ __forceinline__ int64_t position() const { return nhwc ? walk.d[1] : walk.d[0]; }
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

// Note [Batch-norm element-wise kernels]
// elemt and backward_elemt read and write every element once, with per-channel factors: the
// step's largest memory streams after the convolutions. The channel is walked (ImageCoords),
// not divided for, and where four consecutive elements share a layout-fixed pattern of
// channels they move as float4s (Note [Vectorised element-wise kernels]):
//  - NCHW with hw % 4 == 0: an aligned group of 4 lies in one plane, so one channel;
//  - NHWC with c % 4 == 0: an aligned group of 4 is channels ch..ch+3 of one position.
// Everything else (7x7 NCHW planes, unaligned views) takes the scalar path. Both paths
// compute each element with the same functor, so they agree bit for bit.
//
// Fn: __device__ float operator()(const float* v, int64_t ch) const, v[k] the element of
// input k; fn.prepared() is the functor a thread uses (reading device-side scalars once).
template <int kIn, bool kVec, typename Fn>
__global__ void channel_map_kernel(Img s, MapArgs<kIn> a, Fn fn_arg) {
  const Fn fn = fn_arg.prepared();
  constexpr int kWidth = kVec ? 4 : 1;
  const int64_t total = s.n * s.c * s.hw;
  const int64_t stride = global_thread_count() * kWidth;
  int64_t e = global_thread_index() * kWidth;
  for (ImageCoords at(s, e, stride); e < total; e += stride, at.advance()) {
    const int64_t ch = at.channel();
    float v[MapArgs<kIn>::kSlots];
    if constexpr (kVec) {
      float4 in[MapArgs<kIn>::kSlots];
#pragma unroll
      for (int k = 0; k < kIn; ++k) in[k] = *reinterpret_cast<const float4*>(a.in[k] + e);
      float4 out;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int k = 0; k < kIn; ++k) v[k] = lane(in[k], j);
        lane(out, j) = fn(v, s.nhwc ? ch + j : ch);
      }
      *reinterpret_cast<float4*>(a.out + e) = out;
    } else {
#pragma unroll
      for (int k = 0; k < kIn; ++k) v[k] = a.in[k][e];
      a.out[e] = fn(v, ch);
    }
  }
}

// y = (x - mean) * invstd * weight + bias; input x.
struct BnElemtFn {
  const float *mean, *invstd, *weight, *bias;
  __device__ BnElemtFn prepared() const { return *this; }
  __device__ float operator()(const float* v, int64_t ch) const {
    const float a = invstd[ch] * weight[ch];
    return (v[0] - mean[ch]) * a + bias[ch];
  }
};

// dx = weight * invstd * (dy - sum_dy / m - xhat * sum_dy_xhat / m); inputs dy, x.
struct BnBackwardElemtFn {
  const float *mean, *invstd, *weight, *sums, *count;
  int64_t c;
  float m = 0.0f;  // *count, read once per thread by prepared()
  __device__ BnBackwardElemtFn prepared() const {
    BnBackwardElemtFn f = *this;
    f.m = *count;
    return f;
  }
  __device__ float operator()(const float* v, int64_t ch) const {
    const float is = invstd[ch];
    const float xhat = (v[1] - mean[ch]) * is;
    return weight[ch] * is * (v[0] - sums[ch] / m - xhat * sums[c + ch] / m);
  }
};

struct PoolShape {
  int64_t n, c, h, w, ph, pw, kernel, stride, padding;
  bool nhwc;
  __device__ __forceinline__ int64_t at(int64_t i, int64_t ch, int64_t pos, int64_t plane) const {
    return nhwc ? (i * plane + pos) * c + ch : (i * c + ch) * plane + pos;
  }
};

// The coordinates (image, channel, y, x) of the flat elements e, e + stride, ... of an
// [n, c, rows, cols] batch in the pool's layout, walked (Note [Incremental index walks]):
// digits (x, y, channel, image) in NCHW and (channel, x, y, image) in NHWC. Not for an empty
// batch.
struct PoolCoords {
  int64_t radix[3];
  bool nhwc;
  IndexWalk<4> walk;
  __device__ __forceinline__ PoolCoords(const PoolShape& s, int64_t rows, int64_t cols, int64_t e,
                                        int64_t stride)
      : radix{s.nhwc ? s.c : cols, s.nhwc ? cols : rows, s.nhwc ? rows : s.c}, nhwc(s.nhwc) {
    walk.start(e, stride, radix);
  }
  __device__ __forceinline__ void advance() { walk.advance(radix); }
  __device__ __forceinline__ int64_t image() const { return walk.d[3]; }
  __device__ __forceinline__ int64_t channel() const { return nhwc ? walk.d[0] : walk.d[2]; }
  __device__ __forceinline__ int64_t y() const { return nhwc ? walk.d[2] : walk.d[1]; }
  __device__ __forceinline__ int64_t x() const { return nhwc ? walk.d[1] : walk.d[0]; }
};

__global__ void max_pool_forward_kernel(const float* x, float* y, int32_t* indices, PoolShape s) {
  const int64_t total = s.n * s.c * s.ph * s.pw;
  int64_t o = global_thread_index();
  for (PoolCoords at(s, s.ph, s.pw, o, global_thread_count()); o < total;
       o += global_thread_count(), at.advance()) {
    const int64_t i = at.image(), ch = at.channel(), oy = at.y(), ox = at.x();
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

// The windows oy with oy*stride - padding <= yy < oy*stride - padding + kernel, clipped to
// [0, last]: [first, end). 32-bit divides (the launcher checks that every term fits), cheaper
// than 64-bit ones; a negative numerator truncates to a quotient <= 0, clipped to 0 either way.
struct WindowRange {
  int32_t first, end;
};
__device__ __forceinline__ WindowRange covering_windows(int32_t pos, int32_t kernel, int32_t stride,
                                                        int32_t padding, int32_t count) {
  const int32_t first = max((pos + padding - kernel + stride) / stride, 0);
  const int32_t last = min((pos + padding) / stride, count - 1);
  return {first, last + 1};
}

// Input position (yy, xx) sums the dy of every window that covers it and chose it.
__global__ void max_pool_backward_kernel(const float* dy, const int32_t* indices, float* dx,
                                         PoolShape s) {
  const int64_t total = s.n * s.c * s.h * s.w;
  const auto kernel = static_cast<int32_t>(s.kernel), stride = static_cast<int32_t>(s.stride),
             padding = static_cast<int32_t>(s.padding);
  int64_t e = global_thread_index();
  for (PoolCoords at(s, s.h, s.w, e, global_thread_count()); e < total;
       e += global_thread_count(), at.advance()) {
    const int64_t i = at.image(), ch = at.channel();
    const auto yy = static_cast<int32_t>(at.y()), xx = static_cast<int32_t>(at.x());
    const WindowRange rows =
        covering_windows(yy, kernel, stride, padding, static_cast<int32_t>(s.ph));
    const WindowRange cols =
        covering_windows(xx, kernel, stride, padding, static_cast<int32_t>(s.pw));
    const int32_t self = yy * static_cast<int32_t>(s.w) + xx;
    float sum = 0.0f;
    for (int64_t oy = rows.first; oy < rows.end; ++oy) {
      for (int64_t ox = cols.first; ox < cols.end; ++ox) {
        const int64_t o = s.at(i, ch, oy * s.pw + ox, s.ph * s.pw);
        if (indices[o] == self) sum += dy[o];
      }
    }
    dx[e] = sum;
  }
}

// y[p] for the plane p = i * c + ch; the channel is walked (digits channel, image).
__global__ void global_avg_pool_forward_kernel(const float* x, float* y, Img s) {
  const int64_t radix[1] = {s.c};
  int64_t p = global_thread_index();
  IndexWalk<2> at;
  at.start(p, global_thread_count(), radix);
  for (; p < s.n * s.c; p += global_thread_count(), at.advance(radix)) {
    const int64_t i = at.d[1], ch = at.d[0];
    float sum = 0.0f;
    for (int64_t j = 0; j < s.hw; ++j) sum += x[s.at(i, ch, j)];
    y[p] = sum / static_cast<float>(s.hw);
  }
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, Img s) {
  const int64_t total = s.n * s.c * s.hw;
  int64_t e = global_thread_index();
  for (ImageCoords at(s, e, global_thread_count()); e < total;
       e += global_thread_count(), at.advance()) {
    dx[e] = dy[at.image() * s.c + at.channel()] / static_cast<float>(s.hw);
  }
}

// y = x in the other layout, indexed by the output (coalesced writes): `out` describes y's
// layout, and x is read at the same coordinates in the other one.
__global__ void transpose_layout_kernel(const float* x, float* y, Img out) {
  const int64_t total = out.n * out.c * out.hw;
  const Img in{out.n, out.c, out.hw, !out.nhwc};
  int64_t e = global_thread_index();
  for (ImageCoords at(out, e, global_thread_count()); e < total;
       e += global_thread_count(), at.advance()) {
    y[e] = x[in.at(at.image(), at.channel(), at.position())];
  }
}

// ============================== launch helpers =======================================

// Note [Batch-norm element-wise kernels]: float4s where the layout and the pointers allow.
template <int kIn, typename Fn>
void launch_channel_map(const ImageExtents& e, const MapArgs<kIn>& a, const Fn& fn,
                        cudaStream_t stream) {
  const int64_t total = e.n * e.c * e.hw;
  if (total == 0) return;
  const Img s{e.n, e.c, e.hw, e.nhwc};
  const bool groups_of_4 = e.nhwc ? e.c % 4 == 0 : e.hw % 4 == 0;
  if (groups_of_4 && a.aligned16()) {
    channel_map_kernel<kIn, true>
        <<<elementwise_blocks(total / 4), kElementwiseBlock, 0, stream>>>(s, a, fn);
  } else {
    channel_map_kernel<kIn, false>
        <<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(s, a, fn);
  }
  CUDA_LAUNCH_CHECK() << "channel_map_kernel";
}

// y in the layout `out` from x in the other one.
void launch_transpose(const float* x, float* y, const Img& out, cudaStream_t stream) {
  const int64_t total = out.n * out.c * out.hw;
  if (total == 0) return;
  transpose_layout_kernel<<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(x, y, out);
  CUDA_LAUNCH_CHECK() << "transpose_layout_kernel";
}

// The 32-bit window arithmetic of max_pool_backward_kernel (covering_windows) holds.
void check_pool_fits_32_bits(const PoolExtents& p) {
  DDPB_CHECK(p.h + p.padding + p.stride <= INT32_MAX && p.w + p.padding + p.stride <= INT32_MAX &&
             p.kernel <= INT32_MAX && p.ph <= INT32_MAX && p.pw <= INT32_MAX &&
             p.h * p.w <= INT32_MAX && p.stride >= 1)
      << "max pooling of " << p.h << "x" << p.w << " planes (kernel " << p.kernel << ", stride "
      << p.stride << ", padding " << p.padding << ") exceeds 32-bit positions";
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
  launch_channel_map(e, MapArgs<1>{{x}, y}, BnElemtFn{mean, invstd, weight, bias}, stream);
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
  launch_channel_map(e, MapArgs<2>{{dy, x}, dx},
                     BnBackwardElemtFn{mean, invstd, weight, sums, count, e.c}, stream);
}

void launch_max_pool2d_forward(const float* x, float* y, int32_t* indices, const PoolExtents& p,
                               cudaStream_t stream) {
  const int64_t total = p.n * p.c * p.ph * p.pw;
  if (total == 0) return;
  const PoolShape s{p.n, p.c, p.h, p.w, p.ph, p.pw, p.kernel, p.stride, p.padding, p.nhwc};
  max_pool_forward_kernel<<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(x, y,
                                                                                       indices, s);
  CUDA_LAUNCH_CHECK() << "max_pool_forward_kernel";
}

void launch_max_pool2d_backward(const float* dy, const int32_t* indices, float* dx,
                                const PoolExtents& p, cudaStream_t stream) {
  const int64_t total = p.n * p.c * p.h * p.w;
  if (total == 0) return;
  check_pool_fits_32_bits(p);
  const PoolShape s{p.n, p.c, p.h, p.w, p.ph, p.pw, p.kernel, p.stride, p.padding, p.nhwc};
  max_pool_backward_kernel<<<elementwise_blocks(total), kElementwiseBlock, 0, stream>>>(dy, indices,
                                                                                        dx, s);
  CUDA_LAUNCH_CHECK() << "max_pool_backward_kernel";
}

void launch_global_avg_pool_forward(const float* x, float* y, const ImageExtents& e,
                                    cudaStream_t stream) {
  if (e.n * e.c == 0) return;
  global_avg_pool_forward_kernel<<<elementwise_blocks(e.n * e.c), kElementwiseBlock, 0, stream>>>(
      x, y, Img{e.n, e.c, e.hw, e.nhwc});
  CUDA_LAUNCH_CHECK() << "global_avg_pool_forward_kernel";
}

void launch_global_avg_pool_backward(const float* dy, float* dx, const ImageExtents& e,
                                     cudaStream_t stream) {
  if (e.n * e.c * e.hw == 0) return;
  global_avg_pool_backward_kernel<<<elementwise_blocks(e.n * e.c * e.hw), kElementwiseBlock, 0,
                                    stream>>>(dy, dx, Img{e.n, e.c, e.hw, e.nhwc});
  CUDA_LAUNCH_CHECK() << "global_avg_pool_backward_kernel";
}

void launch_nchw_to_nhwc(const float* x, float* y, const ImageExtents& e, cudaStream_t stream) {
  launch_transpose(x, y, Img{e.n, e.c, e.hw, /*nhwc=*/true}, stream);
}

void launch_nhwc_to_nchw(const float* x, float* y, const ImageExtents& e, cudaStream_t stream) {
  launch_transpose(x, y, Img{e.n, e.c, e.hw, /*nhwc=*/false}, stream);
}

}  // namespace ddpb::gpu
