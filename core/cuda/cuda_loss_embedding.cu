// Softmax cross-entropy (mean over rows) and token embedding lookup / scatter-add.
#include <cuda_runtime.h>

#include <cmath>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/cuda_kernels.h"

namespace ddpb::gpu {
namespace {

// ============================== kernels ==============================================

// One block per row: probs = softmax(logits), row_loss = logsumexp(logits) - logits[target].
// The loss uses log-sum-exp rather than -log(prob), which would underflow to -log(0) for a
// confidently wrong row.
__global__ void cross_entropy_forward_kernel(const float* logits, const int32_t* targets,
                                             float* probs, float* row_loss, int64_t vocab) {
  __shared__ float shared[kWarpSize];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * vocab;
  float* p = probs + row * vocab;
  float row_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) row_max = fmaxf(row_max, x[c]);
  row_max = block_reduce_max(row_max, shared);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) sum += expf(x[c] - row_max);
  sum = block_reduce_sum(sum, shared);
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) p[c] = expf(x[c] - row_max) / sum;
  if (threadIdx.x == 0) {
    const int32_t t = targets[row];
    row_loss[row] = (t >= 0 && t < vocab) ? logf(sum) + row_max - x[t] : NAN;
  }
}

// dlogits = (probs - onehot(target)) * dloss / rows; dloss is read on the device, so the
// backward pass never waits for the host. This and the embedding kernels walk (row, column)
// (Note [Incremental index walks]) rather than divide by the row length per element.
__global__ void cross_entropy_backward_kernel(const float* dloss, const float* probs,
                                              const int32_t* targets, float* dlogits, int64_t rows,
                                              int64_t vocab) {
  const float scale = dloss[0] / static_cast<float>(rows);
  const int64_t n = rows * vocab;
  const int64_t radix[1] = {vocab};
  int64_t i = global_thread_index();
  IndexWalk<2> at;
  at.start(i, global_thread_count(), radix);
  for (; i < n; i += global_thread_count(), at.advance(radix)) {
    const int64_t row = at.d[1], col = at.d[0];
    const float onehot = targets[row] == col ? 1.0f : 0.0f;
    dlogits[i] = (probs[i] - onehot) * scale;
  }
}

__global__ void embedding_forward_kernel(const int32_t* ids, const float* table, float* out,
                                         int64_t n, int64_t vocab, int64_t channels) {
  const int64_t total = n * channels;
  const int64_t radix[1] = {channels};
  int64_t i = global_thread_index();
  IndexWalk<2> at;
  at.start(i, global_thread_count(), radix);
  for (; i < total; i += global_thread_count(), at.advance(radix)) {
    const int64_t row = at.d[1], c = at.d[0];
    const int32_t id = ids[row];
    out[i] = (id >= 0 && id < vocab) ? table[id * channels + c] : NAN;
  }
}

// Scatter-add with atomics: rows repeating an id add into the same table row, and the order
// of those additions is not fixed (ops.h allows it; all other reductions are deterministic).
__global__ void embedding_backward_kernel(const float* dout, const int32_t* ids, float* dtable,
                                          int64_t n, int64_t vocab, int64_t channels) {
  const int64_t total = n * channels;
  const int64_t radix[1] = {channels};
  int64_t i = global_thread_index();
  IndexWalk<2> at;
  at.start(i, global_thread_count(), radix);
  for (; i < total; i += global_thread_count(), at.advance(radix)) {
    const int64_t row = at.d[1], c = at.d[0];
    const int32_t id = ids[row];
    if (id >= 0 && id < vocab) atomicAdd(&dtable[id * channels + c], dout[i]);
  }
}

}  // namespace

// ============================== launchers ============================================

int64_t cross_entropy_forward_scratch_floats(int64_t rows) {
  return rows + sum_all_scratch_floats(rows);
}

void launch_cross_entropy_forward(const float* logits, const int32_t* targets, float* loss,
                                  float* probs, int64_t rows, int64_t vocab, float* scratch,
                                  cudaStream_t stream) {
  DDPB_CHECK(rows > 0 && vocab > 0 && rows <= INT32_MAX)
      << "cross_entropy_forward over [" << rows << ", " << vocab << "]";
  DDPB_CHECK(scratch != nullptr) << "cross_entropy_forward needs scratch";
  float* row_loss = scratch;
  cross_entropy_forward_kernel<<<static_cast<unsigned>(rows), row_block_threads(vocab), 0,
                                 stream>>>(logits, targets, probs, row_loss, vocab);
  CUDA_LAUNCH_CHECK() << "cross_entropy_forward_kernel";
  // The mean goes through the deterministic sum, so the loss is reproducible bit for bit.
  launch_sum_all(row_loss, rows, loss, 1.0f / static_cast<float>(rows), scratch + rows, stream);
}

void launch_cross_entropy_backward(const float* dloss, const float* probs, const int32_t* targets,
                                   float* dlogits, int64_t rows, int64_t vocab,
                                   cudaStream_t stream) {
  DDPB_CHECK(rows > 0 && vocab > 0)
      << "cross_entropy_backward over [" << rows << ", " << vocab << "]";
  cross_entropy_backward_kernel<<<elementwise_blocks(rows * vocab), kElementwiseBlock, 0, stream>>>(
      dloss, probs, targets, dlogits, rows, vocab);
  CUDA_LAUNCH_CHECK() << "cross_entropy_backward_kernel";
}

void launch_embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n,
                              int64_t vocab, int64_t channels, cudaStream_t stream) {
  DDPB_CHECK(n >= 0 && vocab > 0 && channels > 0)
      << "embedding_forward of " << n << " ids into [" << vocab << ", " << channels << "]";
  if (n == 0) return;
  embedding_forward_kernel<<<elementwise_blocks(n * channels), kElementwiseBlock, 0, stream>>>(
      ids, table, out, n, vocab, channels);
  CUDA_LAUNCH_CHECK() << "embedding_forward_kernel";
}

void launch_embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n,
                               int64_t vocab, int64_t channels, cudaStream_t stream) {
  DDPB_CHECK(n >= 0 && vocab > 0 && channels > 0)
      << "embedding_backward of " << n << " ids into [" << vocab << ", " << channels << "]";
  if (n == 0) return;
  embedding_backward_kernel<<<elementwise_blocks(n * channels), kElementwiseBlock, 0, stream>>>(
      dout, ids, dtable, n, vocab, channels);
  CUDA_LAUNCH_CHECK() << "embedding_backward_kernel";
}

}  // namespace ddpb::gpu
