// Causal self-attention on CUDA without the [B,H,T,T] scores: the flash-attention algorithm
// (Dao et al.) in fp32, the same one core/cpu/cpu_flash_attention.cpp runs with BLAS tiles.
//
// Layout: q, k and v are read straight from the packed qkv [B,T,3C] (head h of token t at
// column h*D of its third), out/dout are [B,T,C], lse is [B,H,T]; dq, dk and dv are written
// straight into dqkv [B,T,3C]. Nothing is split into head-major copies.
//
// Work split. A block owns kRows rows of one (batch, head): query rows in the forward and
// dq kernels, key rows in the dk/dv kernel. kLanes adjacent threads share a row, each
// holding D / kLanes of its elements in registers, interleaved (lane p holds elements
// p, p + kLanes, ...) so that the lanes of a row read different shared-memory banks. Dot
// products are summed over the lanes with shuffles. The other operand's rows are staged in
// shared memory kTile at a time.
//
// Every loop bound is uniform across the block, and rows past T or masked by causality
// still run the arithmetic and shuffles (their results are discarded): a shuffle needs all
// lanes of the warp.
//
//   forward   per query tile: for each key tile, scores (kTile per row, in registers), the
//             online softmax update of the running max, sum and output; lse = max + log sum.
//   delta     Delta_i = sum(dout_i * out_i) per row.
//   dq        per query row: for each key j <= i, p = exp(s - lse_i), dp = dout_i . v_j,
//             dq += p (dp - Delta_i) k_j; times the score scale.
//   dk, dv    per key row: for each query i >= j, the same p and dp; dv += p dout_i,
//             dk += p (dp - Delta_i) q_i; dk times the score scale.
#include <cuda_runtime.h>

#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"

namespace ddpb::gpu {
namespace {

constexpr int kRows = 64;  // rows a block owns
constexpr int kTile = 32;  // rows of the other operand staged per step

struct FlashShape {
  int batch, seq, channels, heads;  // B, T, C, H
};

// Sum over the kLanes adjacent lanes that share a row (all 32 lanes must arrive).
template <int kLanes>
__device__ __forceinline__ float lane_group_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A thread's part of a row of D = E * kLanes floats is elements lane, lane + kLanes, ...
// (see the top of the file). The helpers below are the only places that index it.

// dst = scale * this lane's part of `row`.
template <int E, int kLanes>
__device__ __forceinline__ void load_part(float (&dst)[E], const float* row, int lane,
                                          float scale = 1.0f) {
#pragma unroll
  for (int e = 0; e < E; ++e) dst[e] = row[e * kLanes + lane] * scale;
}

// This lane's part of `row` = scale * src.
template <int E, int kLanes>
__device__ __forceinline__ void store_part(float* row, const float (&src)[E], int lane,
                                           float scale = 1.0f) {
#pragma unroll
  for (int e = 0; e < E; ++e) row[e * kLanes + lane] = src[e] * scale;
}

// The dot product of the whole row with the row whose part `part` holds, summed over the
// row's lanes: every lane of the warp must call it (it shuffles).
template <int E, int kLanes>
__device__ __forceinline__ float row_dot(const float (&part)[E], const float* row, int lane) {
  float sum = 0.0f;
#pragma unroll
  for (int e = 0; e < E; ++e) sum += part[e] * row[e * kLanes + lane];
  return lane_group_sum<kLanes>(sum);
}

// acc += alpha * this lane's part of `row`.
template <int E, int kLanes>
__device__ __forceinline__ void add_scaled(float (&acc)[E], float alpha, const float* row,
                                           int lane) {
#pragma unroll
  for (int e = 0; e < E; ++e) acc[e] += alpha * row[e * kLanes + lane];
}

// Row `t` of part `part` (0 q, 1 k, 2 v) of head h in qkv.
__device__ __forceinline__ const float* qkv_row(const float* qkv, const FlashShape& s, int b, int h,
                                                int part, int t, int head_dim) {
  return qkv + (static_cast<int64_t>(b) * s.seq + t) * 3 * s.channels + part * s.channels +
         h * head_dim;
}

__device__ __forceinline__ int64_t out_offset(const FlashShape& s, int b, int h, int t,
                                              int head_dim) {
  return (static_cast<int64_t>(b) * s.seq + t) * s.channels + h * head_dim;
}

// Copies rows [first, first + kTile) of `part` (or of `rows_base` when given, [B,T,C]-shaped)
// into tile[kTile][D], zeros past T.
template <int D>
__device__ __forceinline__ void stage_tile(float (*tile)[D], const float* qkv, const float* bt_c,
                                           const FlashShape& s, int b, int h, int part, int first) {
  for (int idx = threadIdx.x; idx < kTile * D; idx += blockDim.x) {
    const int r = idx / D, e = idx % D, t = first + r;
    float v = 0.0f;
    if (t < s.seq) {
      v = bt_c != nullptr ? bt_c[out_offset(s, b, h, t, D) + e]
                          : qkv_row(qkv, s, b, h, part, t, D)[e];
    }
    tile[r][e] = v;
  }
}

template <int D, int kLanes>
__global__ void __launch_bounds__(kRows* kLanes)
    flash_forward_kernel(const float* qkv, float* out, float* lse, FlashShape s, float scale) {
  constexpr int E = D / kLanes;
  __shared__ float k_tile[kTile][D];
  __shared__ float v_tile[kTile][D];
  const int b = blockIdx.y / s.heads, h = blockIdx.y % s.heads;
  const int lane = threadIdx.x % kLanes;
  const int i = blockIdx.x * kRows + threadIdx.x / kLanes;
  const bool active = i < s.seq;
  const float* qrow = qkv_row(qkv, s, b, h, 0, active ? i : s.seq - 1, D);
  float q[E], o[E] = {};
  load_part<E, kLanes>(q, qrow, lane, scale);
  float row_max = -INFINITY, row_sum = 0.0f;
  const int key_end = min(s.seq, (blockIdx.x + 1) * kRows);  // the block's last query + 1
  for (int j0 = 0; j0 < key_end; j0 += kTile) {
    __syncthreads();  // the previous tile is no longer read
    stage_tile<D>(k_tile, qkv, nullptr, s, b, h, 1, j0);
    stage_tile<D>(v_tile, qkv, nullptr, s, b, h, 2, j0);
    __syncthreads();
    float score[kTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int r = 0; r < kTile; ++r) {
      const float dot = row_dot<E, kLanes>(q, k_tile[r], lane);
      score[r] = active && j0 + r <= i ? dot : -INFINITY;
      tile_max = fmaxf(tile_max, score[r]);
    }
    // A tile with no key visible to row i (all after it, or the row is past T) changes
    // nothing; the guards keep exp(-inf - -inf) = NaN out of the state.
    const bool any = tile_max != -INFINITY;
    const float new_max = fmaxf(row_max, tile_max);
    const float correction = any ? expf(row_max - new_max) : 1.0f;  // 0 while row_max is -inf
    row_sum *= correction;
#pragma unroll
    for (int e = 0; e < E; ++e) o[e] *= correction;
#pragma unroll
    for (int r = 0; r < kTile; ++r) {
      const float p = any ? expf(score[r] - new_max) : 0.0f;  // exp(-inf) = 0 for masked keys
      row_sum += p;
      add_scaled<E, kLanes>(o, p, v_tile[r], lane);
    }
    row_max = new_max;
  }
  if (!active) return;  // no shuffles below
  float* orow = out + out_offset(s, b, h, i, D);
  store_part<E, kLanes>(orow, o, lane, 1.0f / row_sum);
  if (lane == 0) lse[(static_cast<int64_t>(b) * s.heads + h) * s.seq + i] = row_max + logf(row_sum);
}

// delta[b,h,t] = sum_e dout[b,t,h*D+e] * out[b,t,h*D+e]; one warp per row, so that a
// warp's loads are D consecutive floats.
__global__ void flash_delta_kernel(const float* dout, const float* out, float* delta, FlashShape s,
                                   int head_dim) {
  const int64_t rows = static_cast<int64_t>(s.batch) * s.heads * s.seq;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = global_thread_count() / kWarpSize;
  for (int64_t idx = global_thread_index() / kWarpSize; idx < rows; idx += warps) {
    const int t = static_cast<int>(idx % s.seq);
    const int h = static_cast<int>((idx / s.seq) % s.heads);
    const int b = static_cast<int>(idx / (static_cast<int64_t>(s.seq) * s.heads));
    const int64_t off = out_offset(s, b, h, t, head_dim);
    float acc = 0.0f;
    for (int e = lane; e < head_dim; e += kWarpSize) acc += dout[off + e] * out[off + e];
    acc = warp_reduce_sum(acc);  // the loop bound is uniform per warp: every lane arrives
    if (lane == 0) delta[idx] = acc;
  }
}

template <int D, int kLanes>
__global__ void __launch_bounds__(kRows* kLanes)
    flash_dq_kernel(const float* dout, const float* qkv, const float* lse, const float* delta,
                    float* dqkv, FlashShape s, float scale) {
  constexpr int E = D / kLanes;
  __shared__ float k_tile[kTile][D];
  __shared__ float v_tile[kTile][D];
  const int b = blockIdx.y / s.heads, h = blockIdx.y % s.heads;
  const int lane = threadIdx.x % kLanes;
  const int i = blockIdx.x * kRows + threadIdx.x / kLanes;
  const bool active = i < s.seq;
  const int ic = active ? i : s.seq - 1;
  const float* qrow = qkv_row(qkv, s, b, h, 0, ic, D);
  const float* dorow = dout + out_offset(s, b, h, ic, D);
  const int64_t stat = (static_cast<int64_t>(b) * s.heads + h) * s.seq + ic;
  const float row_lse = lse[stat], row_delta = delta[stat];
  float q[E], d_o[E], dq[E] = {};
  load_part<E, kLanes>(q, qrow, lane, scale);
  load_part<E, kLanes>(d_o, dorow, lane);
  const int key_end = min(s.seq, (blockIdx.x + 1) * kRows);
  for (int j0 = 0; j0 < key_end; j0 += kTile) {
    __syncthreads();
    stage_tile<D>(k_tile, qkv, nullptr, s, b, h, 1, j0);
    stage_tile<D>(v_tile, qkv, nullptr, s, b, h, 2, j0);
    __syncthreads();
#pragma unroll 4
    for (int r = 0; r < kTile; ++r) {
      const float score = row_dot<E, kLanes>(q, k_tile[r], lane);
      const float dp = row_dot<E, kLanes>(d_o, v_tile[r], lane);
      const float p = active && j0 + r <= i ? expf(score - row_lse) : 0.0f;
      add_scaled<E, kLanes>(dq, p * (dp - row_delta), k_tile[r], lane);
    }
  }
  if (!active) return;
  float* dqrow = dqkv + (static_cast<int64_t>(b) * s.seq + i) * 3 * s.channels + h * D;
  store_part<E, kLanes>(dqrow, dq, lane, scale);
}

template <int D, int kLanes>
__global__ void __launch_bounds__(kRows* kLanes)
    flash_dkv_kernel(const float* dout, const float* qkv, const float* lse, const float* delta,
                     float* dqkv, FlashShape s, float scale) {
  constexpr int E = D / kLanes;
  __shared__ float q_tile[kTile][D];
  __shared__ float do_tile[kTile][D];
  __shared__ float lse_tile[kTile];
  __shared__ float delta_tile[kTile];
  const int b = blockIdx.y / s.heads, h = blockIdx.y % s.heads;
  const int lane = threadIdx.x % kLanes;
  const int j = blockIdx.x * kRows + threadIdx.x / kLanes;
  const bool active = j < s.seq;
  const int jc = active ? j : s.seq - 1;
  const float* krow = qkv_row(qkv, s, b, h, 1, jc, D);
  const float* vrow = qkv_row(qkv, s, b, h, 2, jc, D);
  const int64_t stats = (static_cast<int64_t>(b) * s.heads + h) * s.seq;
  float k[E], v[E], dk[E] = {}, dv[E] = {};
  load_part<E, kLanes>(k, krow, lane, scale);
  load_part<E, kLanes>(v, vrow, lane);
  // Queries at or after the block's first key.
  for (int i0 = blockIdx.x * kRows; i0 < s.seq; i0 += kTile) {
    __syncthreads();
    stage_tile<D>(q_tile, qkv, nullptr, s, b, h, 0, i0);
    stage_tile<D>(do_tile, nullptr, dout, s, b, h, 0, i0);
    for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
      const bool in = i0 + r < s.seq;
      lse_tile[r] = in ? lse[stats + i0 + r] : 0.0f;
      delta_tile[r] = in ? delta[stats + i0 + r] : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int r = 0; r < kTile; ++r) {
      const float score = row_dot<E, kLanes>(k, q_tile[r], lane);
      const float dp = row_dot<E, kLanes>(v, do_tile[r], lane);
      const int i = i0 + r;
      const float p = active && i < s.seq && i >= j ? expf(score - lse_tile[r]) : 0.0f;
      add_scaled<E, kLanes>(dv, p, do_tile[r], lane);
      add_scaled<E, kLanes>(dk, p * (dp - delta_tile[r]), q_tile[r], lane);
    }
  }
  if (!active) return;
  float* dkrow = dqkv + (static_cast<int64_t>(b) * s.seq + j) * 3 * s.channels + s.channels + h * D;
  store_part<E, kLanes>(dkrow, dk, lane, scale);
  store_part<E, kLanes>(dkrow + s.channels, dv, lane);
}

FlashShape make_shape(int64_t batch, int64_t seq, int64_t channels, int64_t heads) {
  DDPB_CHECK(batch > 0 && seq > 0 && heads > 0 && channels % heads == 0)
      << "flash attention with B=" << batch << " T=" << seq << " C=" << channels << " H=" << heads;
  DDPB_CHECK(flash_attention_supports(channels / heads))
      << "flash attention on CUDA supports head_dim 16, 32, 64 or 128, not " << channels / heads
      << " (use --attention math)";
  DDPB_CHECK(batch * heads <= 65535 && seq <= INT32_MAX && 3 * channels <= INT32_MAX)
      << "flash attention: B*H = " << batch * heads << " exceeds the grid";
  return {static_cast<int>(batch), static_cast<int>(seq), static_cast<int>(channels),
          static_cast<int>(heads)};
}

dim3 grid_for(const FlashShape& s) {
  return dim3(static_cast<unsigned>((s.seq + kRows - 1) / kRows),
              static_cast<unsigned>(s.batch * s.heads));
}

// Calls fn.template operator()<D, kLanes>() for the head size: enough lanes per row that a
// thread holds at most 32 elements of each register array.
template <typename Fn>
void dispatch_head_dim(int head_dim, Fn&& fn) {
  switch (head_dim) {
    case 16:
      return fn.template operator()<16, 1>();
    case 32:
      return fn.template operator()<32, 1>();
    case 64:
      return fn.template operator()<64, 2>();
    case 128:
      return fn.template operator()<128, 4>();
    default:
      DDPB_CHECK(false) << "unsupported head_dim " << head_dim;
  }
}

}  // namespace

bool flash_attention_supports(int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

void launch_flash_attention_forward(const float* qkv, float* out, float* lse, int64_t batch,
                                    int64_t seq, int64_t channels, int64_t heads,
                                    cudaStream_t stream) {
  const FlashShape s = make_shape(batch, seq, channels, heads);
  const int head_dim = s.channels / s.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  dispatch_head_dim(head_dim, [&]<int D, int kLanes>() {
    flash_forward_kernel<D, kLanes>
        <<<grid_for(s), kRows * kLanes, 0, stream>>>(qkv, out, lse, s, scale);
    CUDA_LAUNCH_CHECK() << "flash_forward_kernel";
  });
}

int64_t flash_attention_backward_scratch_floats(int64_t batch, int64_t seq, int64_t heads) {
  return batch * heads * seq;  // delta
}

void launch_flash_attention_backward(const float* dout, const float* qkv, const float* out,
                                     const float* lse, float* dqkv, int64_t batch, int64_t seq,
                                     int64_t channels, int64_t heads, float* scratch,
                                     cudaStream_t stream) {
  const FlashShape s = make_shape(batch, seq, channels, heads);
  const int head_dim = s.channels / s.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  DDPB_CHECK(scratch != nullptr) << "flash_attention_backward needs scratch";
  float* delta = scratch;
  flash_delta_kernel<<<elementwise_blocks(batch * heads * seq * kWarpSize), kElementwiseBlock, 0,
                       stream>>>(dout, out, delta, s, head_dim);
  CUDA_LAUNCH_CHECK() << "flash_delta_kernel";
  dispatch_head_dim(head_dim, [&]<int D, int kLanes>() {
    flash_dq_kernel<D, kLanes>
        <<<grid_for(s), kRows * kLanes, 0, stream>>>(dout, qkv, lse, delta, dqkv, s, scale);
    CUDA_LAUNCH_CHECK() << "flash_dq_kernel";
    flash_dkv_kernel<D, kLanes>
        <<<grid_for(s), kRows * kLanes, 0, stream>>>(dout, qkv, lse, delta, dqkv, s, scale);
    CUDA_LAUNCH_CHECK() << "flash_dkv_kernel";
  });
}

}  // namespace ddpb::gpu
