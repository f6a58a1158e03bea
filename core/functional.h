// Differentiable ops on Vars: each runs the forward kernels from core/ops.h and records a
// Node whose apply() runs the backward kernels. Shapes follow PyTorch: Linear weight is
// [out, in] and y = x W^T + b.
#pragma once

#include "core/autograd.h"
#include "core/ops.h"

namespace ddpb::fn {

using autograd::Var;

// x [N, in], weight [out, in], bias [out] (or undefined) -> [N, out]. `act` may be None or
// ReLU (fused into the GEMM epilogue; its backward uses the saved output).
Var linear(const Var& x, const Var& weight, const Var& bias,
           ops::Activation act = ops::Activation::None);
Var relu(const Var& x);
Var gelu(const Var& x);  // tanh approximation
Var add(const Var& a, const Var& b);
// Same data, new shape (gradient reshaped back).
Var reshape(const Var& x, const Shape& shape);
// x [..., C] normalised over C.
Var layer_norm(const Var& x, const Var& weight, const Var& bias, float eps = 1e-5f);
// ids i32 (any shape, N elements), table [V, C] -> [N, C].
Var embedding(const Tensor& ids, const Var& table);
// qkv [B, T, 3C] -> [B, T, C], causal, scaled by 1/sqrt(C/n_head). ops::attention_kind()
// picks the materialised or the flash-style kernels.
Var causal_attention(const Var& qkv, int n_head);
// logits [N, V], targets i32 [N] -> scalar mean loss.
Var cross_entropy(const Var& logits, const Tensor& targets);

// ---- Images (core/functional_image.cpp) -------------------------------------------------
// Image Vars are in the run's layout, ops::image_layout(): [N,C,H,W] (NCHW) or [N,H,W,C]
// (NHWC, --channels-last). Each function reads it when it runs and its backward uses the same.
// x (*) weight [K,C,R,R] -> [N,K,P,Q] (or [N,P,Q,K]), no bias.
Var conv2d(const Var& x, const Var& weight, ops::Conv2dGeometry geometry);

// How SyncBatchNorm's statistics and gradient sums cross ranks. DDP provides it over its
// process group (core knows no process groups); both calls block until the result is
// ready on the tensor's device's current stream.
class BatchNormSync {
 public:
  virtual ~BatchNormSync() = default;
  // Every rank's `local` [K], in rank order: [world size, K].
  virtual Tensor all_gather(const Tensor& local) = 0;
  // Sums `t` over the ranks, in place.
  virtual void all_reduce_sum(const Tensor& t) = 0;
};

// A BatchNorm layer's buffers: running statistics (f32 [C]) and the i64 step count.
struct BatchNormBuffers {
  Tensor running_mean, running_var, num_batches_tracked;
};
struct BatchNormOptions {
  bool training = true;  // batch statistics, buffers updated; else the running statistics
  float momentum = 0.1f;
  float eps = 1e-5f;
  BatchNormSync* sync = nullptr;  // SyncBatchNorm: statistics over every rank's batch
};
// Per-channel normalisation over (N, H, W), then weight * xhat + bias (PyTorch's
// BatchNorm2d; with options.sync, SyncBatchNorm).
Var batch_norm(const Var& x, const Var& weight, const Var& bias, const BatchNormBuffers& buffers,
               const BatchNormOptions& options);
// Max pooling with a square `kernel` window (PyTorch's MaxPool2d).
Var max_pool2d(const Var& x, int64_t kernel, ops::Conv2dGeometry geometry);
// x -> [N,C], each plane's mean (AdaptiveAvgPool2d((1, 1)) then flatten).
Var global_avg_pool(const Var& x);
// A batch of NCHW images (a dataset's) in the run's layout: x itself, or an NHWC copy.
Tensor images_in_layout(const Tensor& x);

}  // namespace ddpb::fn
