// Launchers of the CUDA backend's kernels (CUDA builds only).
//
// Every launcher takes raw device pointers, sizes and an explicit stream, checks its
// preconditions, enqueues its kernels on that stream and checks the launch. None of them
// synchronises or allocates: when a launcher needs scratch memory, the caller passes a
// device buffer of at least *_scratch_floats() floats (core/cuda/cuda_backend.cpp takes it
// from the stream-ordered caching allocator). The semantics are those of core/ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "core/cuda/cuda_gemm.h"
#include "core/dtype.h"
#include "core/ops.h"

namespace ddpb::gpu {

// ---- cuda_elementwise.cu ---------------------------------------------------------------
void launch_fill(float* x, int64_t n, float value, cudaStream_t stream);
// add, relu and gelu also take bf16 tensors (--precision bf16): they compute in f32 and round a
// bf16 output once, to nearest even (Note [bf16 element-wise kernels], cuda_elementwise.cu).
// a and b F32 or BF16 each; out F32, or BF16 when both are.
void launch_add(const void* a, DType a_dtype, const void* b, DType b_dtype, void* out,
                DType out_dtype, int64_t n, cudaStream_t stream);
void launch_mul(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void launch_axpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
void launch_scale(float* x, int64_t n, float s, cudaStream_t stream);
void launch_scale_copy(const float* src, float* dst, int64_t n, float s, cudaStream_t stream);
// Every tensor of one call in `dtype`, F32 or BF16.
void launch_relu_forward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream);
void launch_relu_backward(const void* dy, const void* y, void* dx, DType dtype, int64_t n,
                          cudaStream_t stream);
void launch_gelu_forward(const void* x, void* y, DType dtype, int64_t n, cudaStream_t stream);
void launch_gelu_backward(const void* dy, const void* x, void* dx, DType dtype, int64_t n,
                          cudaStream_t stream);
// out[i] = x[i] * scale[c] + shift[c], c = (i / plane) % channels (channels <= 4).
void launch_normalize_u8(const uint8_t* x, float* out, int64_t n, int64_t plane, int channels,
                         const float* scale, const float* shift, cudaStream_t stream);
// Any pair of F32, BF16, F16 (round to nearest even).
void launch_cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                 cudaStream_t stream);
// c [rows, cols] = act(c + bias), bias [cols] or null. The GEMM epilogue for when cuBLASLt
// cannot fuse it.
void launch_bias_activation(float* c, int64_t rows, int64_t cols, const float* bias,
                            ops::Activation act, cudaStream_t stream);
// dst [rows, cols] (bf16) = act(src + bias) rounded once, from f32 src: the same epilogue for
// a bf16 GEMM output (Note [bf16 GEMM outputs round once], cuda_gemm.cpp).
void launch_bias_activation_bf16(const float* src, void* dst, int64_t rows, int64_t cols,
                                 const float* bias, ops::Activation act, cudaStream_t stream);

// ---- cuda_reduce.cu --------------------------------------------------------------------
// out [cols] = sum over the rows of x [rows, cols]; x F32 or BF16, summed in f32.
int64_t sum_rows_scratch_floats(int64_t rows, int64_t cols);
void launch_sum_rows(const void* x, DType x_dtype, int64_t rows, int64_t cols, float* out,
                     float* scratch, cudaStream_t stream);
// out [1] = scale * sum(x [n]).
int64_t sum_all_scratch_floats(int64_t n);
void launch_sum_all(const float* x, int64_t n, float* out, float scale, float* scratch,
                    cudaStream_t stream);
// out [1] = 1 when every element is finite, else 0.
void launch_all_finite(const float* x, int64_t n, float* out, cudaStream_t stream);
// Note [Orthogonalisation epsilon] in core/ops.h; m is [n, r] row-major.
void launch_orthogonalize_columns(float* m, int64_t n, int64_t r, float epsilon,
                                  cudaStream_t stream);

// ---- cuda_norm_softmax.cu --------------------------------------------------------------
void launch_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols,
                            cudaStream_t stream);
void launch_softmax_backward(const float* dy, const float* y, float* dx, int64_t rows, int64_t cols,
                             cudaStream_t stream);
void launch_layernorm_forward(const float* x, const float* weight, const float* bias, float* y,
                              float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                              cudaStream_t stream);
int64_t layernorm_backward_scratch_floats(int64_t rows, int64_t cols);
void launch_layernorm_backward(const float* dy, const float* x, const float* weight,
                               const float* mean, const float* rstd, float* dx, float* dweight,
                               float* dbias, int64_t rows, int64_t cols, float* scratch,
                               cudaStream_t stream);

// ---- cuda_loss_embedding.cu ------------------------------------------------------------
// An out-of-range target or id cannot be reported without a host sync, so it is made
// visible instead: its loss (or embedding output row) is NaN. Embedding backward skips such
// ids; cross-entropy backward subtracts no one-hot for such targets.
int64_t cross_entropy_forward_scratch_floats(int64_t rows);
void launch_cross_entropy_forward(const float* logits, const int32_t* targets, float* loss,
                                  float* probs, int64_t rows, int64_t vocab, float* scratch,
                                  cudaStream_t stream);
void launch_cross_entropy_backward(const float* dloss, const float* probs, const int32_t* targets,
                                   float* dlogits, int64_t rows, int64_t vocab,
                                   cudaStream_t stream);
void launch_embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n,
                              int64_t vocab, int64_t channels, cudaStream_t stream);
void launch_embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n,
                               int64_t vocab, int64_t channels, cudaStream_t stream);

// ---- cuda_attention.cu -----------------------------------------------------------------
// Causal self-attention with an explicit probabilities buffer att [B,H,T,T]; qkv [B,T,3C],
// out/dout [B,T,C], dqkv [B,T,3C]. GEMMs run through launch_matmul on ctx.stream.
int64_t attention_forward_scratch_floats(int64_t batch, int64_t seq, int64_t channels,
                                         int64_t heads);
void launch_attention_forward(const GemmContext& ctx, const float* qkv, float* out, float* att,
                              int64_t batch, int64_t seq, int64_t channels, int64_t heads,
                              float* scratch);
int64_t attention_backward_scratch_floats(int64_t batch, int64_t seq, int64_t channels,
                                          int64_t heads);
void launch_attention_backward(const GemmContext& ctx, const float* dout, const float* qkv,
                               const float* att, float* dqkv, int64_t batch, int64_t seq,
                               int64_t channels, int64_t heads, float* scratch);

// ---- cuda_flash_attention.cu -----------------------------------------------------------
// The same attention without att: lse [B,H,T] is saved instead (see core/ops.h).
bool flash_attention_supports(int64_t head_dim);  // 16, 32, 64, 128
void launch_flash_attention_forward(const float* qkv, float* out, float* lse, int64_t batch,
                                    int64_t seq, int64_t channels, int64_t heads,
                                    cudaStream_t stream);
int64_t flash_attention_backward_scratch_floats(int64_t batch, int64_t seq, int64_t heads);
void launch_flash_attention_backward(const float* dout, const float* qkv, const float* out,
                                     const float* lse, float* dqkv, int64_t batch, int64_t seq,
                                     int64_t channels, int64_t heads, float* scratch,
                                     cudaStream_t stream);

// ---- cuda_optim.cu ---------------------------------------------------------------------
// momentum_buf may be null when momentum == 0.
void launch_sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first_step, cudaStream_t stream);
void launch_adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int64_t step,
                       cudaStream_t stream);
// The same steps over a list of tensors in a few launches (Note [Multi-tensor apply] in
// cuda_optim.cu), bit-identical to launch_sgd_step / launch_adamw_step on each entry.
struct SgdTensors {
  float* param;
  const float* grad;
  float* momentum_buf;  // may be null when momentum == 0
  int64_t n;
};
void launch_sgd_step_multi(std::span<const SgdTensors> list, float lr, float momentum,
                           float weight_decay, bool first_step, cudaStream_t stream);
struct AdamwTensors {
  float* param;
  const float* grad;
  float *m, *v;
  int64_t n;
};
void launch_adamw_step_multi(std::span<const AdamwTensors> list, float lr, float beta1, float beta2,
                             float eps, float weight_decay, int64_t step, cudaStream_t stream);

// ---- cuda_norm_pool.cu -----------------------------------------------------------------
// Batch normalisation in core/ops.h's decomposition, and pooling, in either image layout.
struct ImageExtents {
  int64_t n, c, hw;  // hw = H * W
  bool nhwc;
};
struct PoolExtents {
  int64_t n, c, h, w, ph, pw, kernel, stride, padding;
  bool nhwc;
};
// Per-channel reductions in two stages (Note [Batch-norm channel reductions]); `scratch`
// holds the *_scratch_floats(e) floats (null when that is 0).
int64_t batch_norm_stats_scratch_floats(const ImageExtents& e);
void launch_batch_norm_stats(const float* x, float* stats, const ImageExtents& e, float* scratch,
                             cudaStream_t stream);
// running_mean, running_var and num_batches_tracked are null when not updated.
void launch_batch_norm_gather_stats(const float* stats, int64_t groups, int64_t channels, float eps,
                                    float momentum, float* mean, float* invstd, float* count,
                                    float* running_mean, float* running_var,
                                    int64_t* num_batches_tracked, cudaStream_t stream);
void launch_batch_norm_elemt(const float* x, const float* mean, const float* invstd,
                             const float* weight, const float* bias, float* y,
                             const ImageExtents& e, cudaStream_t stream);
int64_t batch_norm_backward_reduce_scratch_floats(const ImageExtents& e);
void launch_batch_norm_backward_reduce(const float* dy, const float* x, const float* mean,
                                       const float* invstd, float* sums, const ImageExtents& e,
                                       float* scratch, cudaStream_t stream);
void launch_batch_norm_backward_elemt(const float* dy, const float* x, const float* mean,
                                      const float* invstd, const float* weight, const float* sums,
                                      const float* count, float* dx, const ImageExtents& e,
                                      cudaStream_t stream);
void launch_max_pool2d_forward(const float* x, float* y, int32_t* indices, const PoolExtents& p,
                               cudaStream_t stream);
void launch_max_pool2d_backward(const float* dy, const int32_t* indices, float* dx,
                                const PoolExtents& p, cudaStream_t stream);
void launch_global_avg_pool_forward(const float* x, float* y, const ImageExtents& e,
                                    cudaStream_t stream);
void launch_global_avg_pool_backward(const float* dy, float* dx, const ImageExtents& e,
                                     cudaStream_t stream);
void launch_nchw_to_nhwc(const float* x, float* y, const ImageExtents& e, cudaStream_t stream);
// The inverse: y [N,C,HW] from x [N,HW,C] (e describes the images; e.nhwc is ignored).
void launch_nhwc_to_nchw(const float* x, float* y, const ImageExtents& e, cudaStream_t stream);

// ---- cuda_conv.cpp ---------------------------------------------------------------------
// One convolution through cuDNN's graph API (Note [cuDNN convolution plans]): x [N,C,H,W],
// w [K,C,R,R], y [N,K,P,Q]. Forward writes y, BackwardData writes x (from dy = y),
// BackwardFilter writes w (from x and dy = y); each overwrites its output.
enum class ConvDirection { Forward, BackwardData, BackwardFilter };
struct ConvDims {
  int64_t n, c, h, w, k, r, stride, padding;
  bool nhwc;  // the images' layout (w is OIHW either way)
};
void run_convolution(ConvDirection direction, const ConvDims& dims, const float* x, const float* w,
                     const float* y, int device, cudaStream_t stream);

}  // namespace ddpb::gpu
