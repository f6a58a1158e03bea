// Primitive tensor ops (no autograd). Every op has a CPU and a CUDA implementation behind
// one dispatch (core/backend.h); the device of the tensors picks the implementation.
//
// Contract for every op unless it says otherwise:
//  - all tensors are defined, contiguous, on one device, and f32 (gemm, add, relu, gelu and
//    sum_rows also take bf16, as their comments say: autocast's tensors, Note [Autocast] in
//    core/functional.cpp; they compute in f32 and round a bf16 result once, on store);
//  - outputs are preallocated by the caller and may not alias inputs;
//  - work is enqueued on the *current stream* of that device (current_stream(device)), so
//    on CUDA the call returns before the work is done and on CPU it has run by return.
// Shapes are checked and a mismatch throws ddpb::Error naming the shapes.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "base/named_enum.h"
#include "core/tensor.h"

namespace ddpb::ops {

enum class Activation { None, ReLU, GeLU };

// Precision (`--precision`). FP32 is exact fp32. TF32 lets CUDA tensor cores round the
// operands of f32 GEMMs to tf32 (CPU has no tf32 and computes fp32). BF16 is PyTorch's
// autocast to bfloat16 (Note [Autocast], core/functional.cpp): linear layers read and write
// bf16 tensors, and so do the activations after them; master weights, gradients, their
// reductions and the optimizer state stay f32. GEMMs that still take f32 operands in BF16
// mode (attention's, convolutions') compute with the operands rounded to bf16 and accumulate
// in fp32: CUDA through cuBLASLt's FAST_16BF compute type, CPU by rounding copies of the
// operands before sgemm, so a CPU run has the numerics of a GPU run. See docs/performance.md,
// "Precision". The mode is explicit so that a reduced-precision run is never an accident.
enum class MathMode { FP32, TF32, BF16 };
void set_math_mode(MathMode mode);
MathMode math_mode();
// The --precision names.
constexpr NameTable<MathMode, 3> enum_names(MathMode) {
  return {{{"fp32", MathMode::FP32}, {"tf32", MathMode::TF32}, {"bf16", MathMode::BF16}}};
}

// ---- GEMM ------------------------------------------------------------------------------
// c = act(alpha * op(a) @ op(b) + beta * c + bias), with op(x) = x^T when trans_x.
// a: [M,K] ([K,M] if trans_a); b: [K,N] ([N,K] if trans_b); c: [M,N]; bias: [N] or undefined,
// broadcast over rows. All 2-D. beta != 0 reads c. a and b are both f32 or both bf16; c is
// f32, or bf16 when they are; bias is f32. bf16 operands accumulate in f32, and a bf16 c is
// rounded once, after alpha, beta * c, the bias and the activation.
void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha = 1.0f, float beta = 0.0f, const Tensor& bias = Tensor(),
          Activation act = Activation::None);

// ---- Orthogonalisation (PowerSGD) ------------------------------------------------------
// Modified Gram-Schmidt on the columns of m [N,R], R <= N, in place: column i is divided by
// its 2-norm, then its projection is removed from columns i+1..R-1 (PyTorch's
// _orthogonalize_gram_schmidt). Note [Orthogonalisation epsilon]: with epsilon > 0 a column
// is divided by (norm + epsilon); with epsilon 0 by the norm alone, and a column of zeros
// stays zeros (PyTorch's code means this, though torch's division gives NaN there).
void orthogonalize_columns(const Tensor& m, float epsilon = 0.0f);

// ---- Element-wise ----------------------------------------------------------------------
void fill(const Tensor& t, float value);  // f32
void zero(const Tensor& t);               // any dtype: all bits zero
// out = a + b; a and b f32 or bf16 each, out bf16 only when both are (else f32).
void add(const Tensor& a, const Tensor& b, const Tensor& out);
void mul(const Tensor& a, const Tensor& b, const Tensor& out);   // out = a * b
void axpy(float alpha, const Tensor& x, const Tensor& y);        // y += alpha * x
void scale(const Tensor& t, float s);                            // t *= s
void scale_copy(const Tensor& src, const Tensor& dst, float s);  // dst = s * src
// The activations run in f32 or bf16, every tensor of a call in the same dtype.
void relu_forward(const Tensor& x, const Tensor& y);
void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx);  // dx = dy * (y > 0)
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(const Tensor& x, const Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx);
// Converts between f32, bf16 and f16 (round to nearest even). Same numel.
void cast(const Tensor& src, const Tensor& dst);

// ---- Reductions ------------------------------------------------------------------------
// x [M,N] (f32 or bf16) -> out [N] (f32) = sum over rows.
void sum_rows(const Tensor& x, const Tensor& out);
void sum_all(const Tensor& x, const Tensor& out);  // out [1] = sum of all elements
// out [1] = 1 if every element of x (f32) is finite, else 0.
void all_finite(const Tensor& x, const Tensor& out);

// ---- Softmax, layer norm ---------------------------------------------------------------
void softmax_forward(const Tensor& x, const Tensor& y);  // row-wise over the last dim
void softmax_backward(const Tensor& dy, const Tensor& y, const Tensor& dx);
// x [M,C]; weight, bias [C]; y [M,C]; mean, rstd [M] (saved for backward).
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, float eps);
// Writes dx; *overwrites* dweight and dbias.
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias);

// ---- Embedding -------------------------------------------------------------------------
// ids: i32 [N] with values in [0, V); table [V,C]; out [N,C].
void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out);
// dtable[ids[i]] += dout[i] (scatter-add; dtable is *accumulated into*).
void embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable);

// ---- Causal self-attention -------------------------------------------------------------
// qkv [B,T,3C] packed as (q | k | v) along the last dim, each split into n_head heads of
// C/n_head; out [B,T,C]; att [B,H,T,T] holds the softmax probabilities for backward.
// Scores are scaled by 1/sqrt(head_dim) and masked so that t attends to s <= t.
void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& att, int n_head);
// Writes dqkv [B,T,3C] (overwritten).
void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& att,
                        const Tensor& dqkv, int n_head);

// The same attention, flash-style: the [B,H,T,T] scores are never stored. Forward walks the
// keys in tiles with an online softmax and saves only lse [B,H,T] (each row's log-sum-exp of
// its scaled, masked scores); backward recomputes the probabilities tile by tile from q, k
// and lse, using out for each row's sum(dout * out). Same results as above up to rounding.
// CUDA supports head_dim 16, 32, 64 and 128; CPU any. The CUDA kernels compute in fp32
// whatever ops::math_mode() says (the CPU tiles go through sgemm and follow it).
void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head);
void flash_attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, const Tensor& dqkv, int n_head);

// Which of the two fn::causal_attention uses (`--attention`). Math keeps the probabilities
// (B*H*T*T floats a layer, 48 MiB per layer for gpt2-small at batch 1); Flash keeps lse.
enum class AttentionKind { Math, Flash };
void set_attention_kind(AttentionKind kind);
AttentionKind attention_kind();
// The --attention names.
constexpr NameTable<AttentionKind, 2> enum_names(AttentionKind) {
  return {{{"math", AttentionKind::Math}, {"flash", AttentionKind::Flash}}};
}

// ---- Images: convolution, batch normalisation, pooling (f32) ---------------------------
// Where the channels are: NCHW (PyTorch's default) or NHWC (`--channels-last`, PyTorch's
// channels_last memory format). Tensors are always contiguous, so an NHWC image batch has
// the shape [N,H,W,C]. Convolution weights are [K,C,R,R] (OIHW) in both layouts, as in a
// state dict. Every image op takes the layout of its image tensors.
enum class ImageLayout { NCHW, NHWC };
constexpr NameTable<ImageLayout, 2> enum_names(ImageLayout) {
  return {{{"nchw", ImageLayout::NCHW}, {"nhwc", ImageLayout::NHWC}}};
}
// The run's layout (set once, like the math mode), which core/functional.h's image functions
// use and record.
void set_image_layout(ImageLayout layout);
ImageLayout image_layout();

// An image batch's extents, whatever its layout.
struct ImageDims {
  int64_t n = 0, c = 0, h = 0, w = 0;
};
// Throws Error unless `t` is 4-D.
ImageDims image_dims(const Tensor& t, ImageLayout layout);
Shape image_shape(const ImageDims& d, ImageLayout layout);

// Square kernels, the same stride and padding on both axes (all ResNet needs).
struct Conv2dGeometry {
  int64_t stride = 1;
  int64_t padding = 0;
  // Output extent for an input extent `in` and a kernel extent `kernel`; 0 when the padded
  // input is smaller than the kernel.
  int64_t out_extent(int64_t in, int64_t kernel) const {
    const int64_t span = in + 2 * padding - kernel;
    return span < 0 ? 0 : span / stride + 1;
  }
};
// out f32 [N,C,H,W] = (x / 255 - mean[c]) / stddev[c] from image bytes x u8 [N,C,H,W] (C <= 4):
// ToTensor and Normalize on the device, for batches shipped as bytes (4x fewer over PCIe).
void normalize_u8_images(const Tensor& x, const Tensor& out, const std::vector<float>& mean,
                         const std::vector<float>& stddev);

// y [N,K,P,Q] = x [N,C,H,W] (*) w [K,C,R,S], cross-correlation with zero padding, no bias.
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& y, Conv2dGeometry g,
                    ImageLayout layout = ImageLayout::NCHW);
// dx [N,C,H,W] (overwritten) from dy [N,K,P,Q] and w.
void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx, Conv2dGeometry g,
                          ImageLayout layout = ImageLayout::NCHW);
// dw [K,C,R,S] (overwritten) from dy and x.
void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& dw, Conv2dGeometry g,
                            ImageLayout layout = ImageLayout::NCHW);

// Batch normalisation over (N, H, W) for each channel of x, in the decomposition PyTorch's
// SyncBatchNorm uses, so that one set of kernels serves BatchNorm and SyncBatchNorm (whose
// statistics and gradient sums cross ranks between the steps). Packed layouts keep each
// crossing to one collective:
//   stats [2C+1]      this device's mean [C], biased variance [C] and count N*H*W.
//   gather_stats      from G devices' stats [G, 2C+1]: the union's mean [C], invstd [C] =
//                     1/sqrt(var + eps) and count [1]; when running_mean is defined, running =
//                     (1 - momentum) running + momentum stat, the variance unbiased by the
//                     total count, and num_batches_tracked (i64, one value) += 1.
//   elemt             y = (x - mean) * invstd * weight + bias.
//   backward_reduce   sums [2C]: sum(dy) | sum(dy * xhat), xhat = (x - mean) * invstd; also
//                     the gradients of bias and weight.
//   backward_elemt    dx = weight * invstd * (dy - sum_dy / M - xhat * sum_dy_xhat / M),
//                     M = count.
void batch_norm_stats(const Tensor& x, const Tensor& stats, ImageLayout layout = ImageLayout::NCHW);
void batch_norm_gather_stats(const Tensor& stats, float eps, float momentum, const Tensor& mean,
                             const Tensor& invstd, const Tensor& count, const Tensor& running_mean,
                             const Tensor& running_var, const Tensor& num_batches_tracked);
void batch_norm_elemt(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                      const Tensor& weight, const Tensor& bias, const Tensor& y,
                      ImageLayout layout = ImageLayout::NCHW);
void batch_norm_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean,
                                const Tensor& invstd, const Tensor& sums,
                                ImageLayout layout = ImageLayout::NCHW);
void batch_norm_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& invstd, const Tensor& weight, const Tensor& sums,
                               const Tensor& count, const Tensor& dx,
                               ImageLayout layout = ImageLayout::NCHW);

// Max pooling with a square window; padding counts as -inf, and a NaN in a window wins (as
// in PyTorch). indices i32 (the output's shape) hold the position h * W + w of each maximum
// in its plane.
void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, int64_t kernel,
                        Conv2dGeometry g, ImageLayout layout = ImageLayout::NCHW);
// dx (overwritten) gets each dy at its maximum's position, summed where windows overlap.
void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Tensor& dx, int64_t kernel,
                         Conv2dGeometry g, ImageLayout layout = ImageLayout::NCHW);
// y [N,C] = the mean of each plane of x (adaptive average pooling to 1x1).
void global_avg_pool_forward(const Tensor& x, const Tensor& y,
                             ImageLayout layout = ImageLayout::NCHW);
// dx = dy [N,C] / (H * W), broadcast over each plane.
void global_avg_pool_backward(const Tensor& dy, const Tensor& dx,
                              ImageLayout layout = ImageLayout::NCHW);
// y [N,H,W,C] = x [N,C,H,W] with the channels moved last (the input of a channels-last model).
void nchw_to_nhwc(const Tensor& x, const Tensor& y);

// ---- Softmax cross-entropy (mean over rows) --------------------------------------------
// logits [N,V]; targets i32 [N]; loss [1]; probs [N,V] (saved softmax for backward).
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                           const Tensor& probs);
// dlogits = (probs - onehot(targets)) * dloss / N, with dloss [1] on the device.
void cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& targets,
                            const Tensor& dlogits);

// ---- Copies ----------------------------------------------------------------------------
// dst = src for any pair of devices (host<->device, device<->device, peer), same dtype and
// numel. Enqueued on the current stream of the CUDA side (dst's when both are CUDA).
// Pageable host memory makes a CUDA copy synchronous; pinned memory keeps it async.
void copy(const Tensor& src, const Tensor& dst);

// ---- Optimizer steps (PyTorch formulas, in place) --------------------------------------
// SGD: g = grad + wd*param; buf = first_step ? g : momentum*buf + g; param -= lr*buf.
// With momentum == 0 the buffer is not touched (may be undefined).
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, float lr,
              float momentum, float weight_decay, bool first_step);
// AdamW: param *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// param -= lr * (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps). step counts from 1.
void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, float lr,
                float beta1, float beta2, float eps, float weight_decay, int64_t step);

// The same steps over lists of tensors (a whole model's parameters): entry i updates
// params[i] with grads[i] and its state exactly as the per-tensor op would, bit for bit on
// either device, but CUDA runs the list in a few launches instead of one per tensor
// (Note [Multi-tensor apply], core/cuda/cuda_optim.cu). All tensors on one device; the lists
// have one length (momentum_bufs may also be empty when momentum == 0); entries must not
// share memory.
void sgd_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                    std::span<const Tensor> momentum_bufs, float lr, float momentum,
                    float weight_decay, bool first_step);
void adamw_step_multi(std::span<const Tensor> params, std::span<const Tensor> grads,
                      std::span<const Tensor> m, std::span<const Tensor> v, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int64_t step);

}  // namespace ddpb::ops
