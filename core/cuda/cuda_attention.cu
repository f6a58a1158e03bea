// Causal self-attention, the straightforward way: per-head q, k, v in their own buffers,
// batched cuBLASLt GEMMs for the scores and for att @ v, and a causal softmax kernel. The
// [B,H,T,T] probabilities are kept for backward (core/ops.h). A fused, flash-style kernel
// that never materialises them is a separate piece of work; this one is the reference.
//
// Layouts: qkv [B,T,3,H,D] (q | k | v along the last dim, each split into H heads of D);
// head-major buffers [P,B,H,T,D], so that head (b,h) is a dense [T,D] matrix at a fixed
// stride, which is what a strided-batched GEMM needs.
#include <cuda_runtime.h>

#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_gemm.h"
#include "core/cuda/cuda_kernels.h"

namespace ddpb::gpu {
namespace {

// ============================== kernels ==============================================

struct HeadShape {
  int64_t batch, seq, heads, head_dim, parts;
};

// [B,T,P,H,D] -> [P,B,H,T,D]. Indexed by the output, so writes are coalesced; reads are
// contiguous along D. The output coordinates are walked (Note [Incremental index walks]):
// digits (d, t, h, b, p).
__global__ void split_heads_kernel(const float* in, float* out, HeadShape s) {
  const int64_t total = s.parts * s.batch * s.heads * s.seq * s.head_dim;
  const int64_t radix[4] = {s.head_dim, s.seq, s.heads, s.batch};
  int64_t i = global_thread_index();
  IndexWalk<5> at;
  at.start(i, global_thread_count(), radix);
  for (; i < total; i += global_thread_count(), at.advance(radix)) {
    const int64_t d = at.d[0], t = at.d[1], h = at.d[2], b = at.d[3], p = at.d[4];
    out[i] = in[(((b * s.seq + t) * s.parts + p) * s.heads + h) * s.head_dim + d];
  }
}

// [P,B,H,T,D] -> [B,T,P,H,D], indexed by the output: digits (d, h, p, t, b), walked.
__global__ void merge_heads_kernel(const float* in, float* out, HeadShape s) {
  const int64_t total = s.parts * s.batch * s.heads * s.seq * s.head_dim;
  const int64_t radix[4] = {s.head_dim, s.heads, s.parts, s.seq};
  int64_t i = global_thread_index();
  IndexWalk<5> at;
  at.start(i, global_thread_count(), radix);
  for (; i < total; i += global_thread_count(), at.advance(radix)) {
    const int64_t d = at.d[0], h = at.d[1], p = at.d[2], t = at.d[3], b = at.d[4];
    out[i] = in[(((p * s.batch + b) * s.heads + h) * s.seq + t) * s.head_dim + d];
  }
}

// In place on att [B*H*T, T] holding the scaled scores: row (b,h,t) becomes the softmax of
// its first t+1 entries, and the masked entries s > t become exactly 0.
__global__ void causal_softmax_forward_kernel(float* att, int64_t seq) {
  __shared__ float shared[kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t t = row % seq;
  float* a = att + row * seq;
  float row_max = -INFINITY;
  for (int64_t s = threadIdx.x; s <= t; s += blockDim.x) row_max = fmaxf(row_max, a[s]);
  row_max = block_reduce_max(row_max, shared);
  float sum = 0.0f;
  for (int64_t s = threadIdx.x; s <= t; s += blockDim.x) sum += expf(a[s] - row_max);
  sum = block_reduce_sum(sum, shared);
  for (int64_t s = threadIdx.x; s < seq; s += blockDim.x) {
    a[s] = s <= t ? expf(a[s] - row_max) / sum : 0.0f;
  }
}

// In place on datt: d(scores) = scale * att * (datt - sum_s(att * datt)), 0 where masked.
// The 1/sqrt(D) of the forward scores is applied here, so the dq and dk GEMMs use alpha = 1.
__global__ void causal_softmax_backward_kernel(const float* att, float* datt, int64_t seq,
                                               float scale) {
  __shared__ float shared[kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t t = row % seq;
  const float* a = att + row * seq;
  float* da = datt + row * seq;
  float dot = 0.0f;
  for (int64_t s = threadIdx.x; s <= t; s += blockDim.x) dot += a[s] * da[s];
  dot = block_reduce_sum(dot, shared);
  for (int64_t s = threadIdx.x; s < seq; s += blockDim.x) {
    da[s] = s <= t ? scale * a[s] * (da[s] - dot) : 0.0f;
  }
}

// ============================== launch helpers =======================================

struct AttentionDims {
  int64_t batch, seq, channels, heads, head_dim;
  int64_t tensor_elems() const { return batch * seq * channels; }  // one of q, k, v
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }
};

AttentionDims make_dims(int64_t batch, int64_t seq, int64_t channels, int64_t heads) {
  DDPB_CHECK(batch > 0 && seq > 0 && heads > 0 && channels > 0 && channels % heads == 0)
      << "attention with B=" << batch << " T=" << seq << " C=" << channels << " H=" << heads;
  DDPB_CHECK(batch * heads * seq <= INT32_MAX)
      << "attention with B*H*T = " << batch * heads * seq << " rows exceeds the grid";
  return {batch, seq, channels, heads, channels / heads};
}

void split_heads(const float* in, float* out, const AttentionDims& d, int64_t parts,
                 cudaStream_t stream) {
  const HeadShape shape{d.batch, d.seq, d.heads, d.head_dim, parts};
  split_heads_kernel<<<elementwise_blocks(parts * d.tensor_elems()), kElementwiseBlock, 0,
                       stream>>>(in, out, shape);
  CUDA_LAUNCH_CHECK() << "split_heads_kernel";
}

void merge_heads(const float* in, float* out, const AttentionDims& d, int64_t parts,
                 cudaStream_t stream) {
  const HeadShape shape{d.batch, d.seq, d.heads, d.head_dim, parts};
  merge_heads_kernel<<<elementwise_blocks(parts * d.tensor_elems()), kElementwiseBlock, 0,
                       stream>>>(in, out, shape);
  CUDA_LAUNCH_CHECK() << "merge_heads_kernel";
}

// c_i = alpha * op(a_i) @ op(b_i) for every head i; all operands dense per head.
void batched_matmul(const GemmContext& ctx, const AttentionDims& d, const float* a, bool trans_a,
                    const float* b, bool trans_b, float* c, int64_t m, int64_t n, int64_t k,
                    float alpha) {
  Matmul mm;
  mm.a = a;
  mm.trans_a = trans_a;
  mm.b = b;
  mm.trans_b = trans_b;
  mm.c = c;
  mm.m = m;
  mm.n = n;
  mm.k = k;
  mm.alpha = alpha;
  mm.batch = d.batch * d.heads;
  mm.stride_a = m * k;
  mm.stride_b = k * n;
  mm.stride_c = m * n;
  launch_matmul(ctx, mm);
}

}  // namespace

// ============================== launchers ============================================

int64_t attention_forward_scratch_floats(int64_t batch, int64_t seq, int64_t channels,
                                         int64_t /*heads*/) {
  return 4 * batch * seq * channels;  // q, k, v and y, head-major
}

void launch_attention_forward(const GemmContext& ctx, const float* qkv, float* out, float* att,
                              int64_t batch, int64_t seq, int64_t channels, int64_t heads,
                              float* scratch) {
  const AttentionDims d = make_dims(batch, seq, channels, heads);
  DDPB_CHECK(scratch != nullptr) << "attention_forward needs scratch";
  float* q = scratch;
  float* k = q + d.tensor_elems();
  float* v = k + d.tensor_elems();
  float* y = v + d.tensor_elems();
  const int64_t T = d.seq;
  const int64_t D = d.head_dim;

  split_heads(qkv, q, d, /*parts=*/3, ctx.stream);
  // scores = q @ k^T / sqrt(D), written straight into att and normalised in place.
  batched_matmul(ctx, d, q, false, k, /*trans_b=*/true, att, T, T, D, d.scale());
  causal_softmax_forward_kernel<<<static_cast<unsigned>(d.batch * d.heads * T),
                                  row_block_threads(T), 0, ctx.stream>>>(att, T);
  CUDA_LAUNCH_CHECK() << "causal_softmax_forward_kernel";
  batched_matmul(ctx, d, att, false, v, false, y, T, D, T, 1.0f);
  merge_heads(y, out, d, /*parts=*/1, ctx.stream);
}

int64_t attention_backward_scratch_floats(int64_t batch, int64_t seq, int64_t channels,
                                          int64_t heads) {
  // q, k, v; dy; dq, dk, dv (all head-major) and d(att).
  return 7 * batch * seq * channels + batch * heads * seq * seq;
}

void launch_attention_backward(const GemmContext& ctx, const float* dout, const float* qkv,
                               const float* att, float* dqkv, int64_t batch, int64_t seq,
                               int64_t channels, int64_t heads, float* scratch) {
  const AttentionDims d = make_dims(batch, seq, channels, heads);
  DDPB_CHECK(scratch != nullptr) << "attention_backward needs scratch";
  const int64_t n = d.tensor_elems();
  float* q = scratch;
  float* k = q + n;
  float* v = k + n;
  float* dy = v + n;
  float* dq = dy + n;
  float* dk = dq + n;
  float* dv = dk + n;
  float* datt = dv + n;
  const int64_t T = d.seq;
  const int64_t D = d.head_dim;

  split_heads(qkv, q, d, /*parts=*/3, ctx.stream);
  split_heads(dout, dy, d, /*parts=*/1, ctx.stream);
  // y = att @ v:  datt = dy @ v^T,  dv = att^T @ dy.
  batched_matmul(ctx, d, dy, false, v, /*trans_b=*/true, datt, T, T, D, 1.0f);
  batched_matmul(ctx, d, att, /*trans_a=*/true, dy, false, dv, T, D, T, 1.0f);
  // Through the causal softmax and the 1/sqrt(D) scale: datt becomes d(q @ k^T).
  causal_softmax_backward_kernel<<<static_cast<unsigned>(d.batch * d.heads * T),
                                   row_block_threads(T), 0, ctx.stream>>>(att, datt, T, d.scale());
  CUDA_LAUNCH_CHECK() << "causal_softmax_backward_kernel";
  // scores = q @ k^T:  dq = dscores @ k,  dk = dscores^T @ q.
  batched_matmul(ctx, d, datt, false, k, false, dq, T, D, T, 1.0f);
  batched_matmul(ctx, d, datt, /*trans_a=*/true, q, false, dk, T, D, T, 1.0f);
  merge_heads(dq, dqkv, d, /*parts=*/3, ctx.stream);  // dq, dk, dv are adjacent
}

}  // namespace ddpb::gpu
