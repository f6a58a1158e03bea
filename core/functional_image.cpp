// Differentiable image ops (core/functional.h): convolution, batch normalisation and pooling
// on image Vars in the run's layout (ops::image_layout(), recorded in each Node), each
// recording a Node whose apply() runs the backward kernels of core/ops.h.
#include "core/check.h"
#include "core/functional.h"

namespace ddpb::fn {
namespace {

using autograd::make_result;
using autograd::Node;

class Conv2dBackward final : public Node {
 public:
  Tensor x, weight;
  ops::Conv2dGeometry geometry;
  ops::ImageLayout layout = ops::ImageLayout::NCHW;
  const char* name() const override { return "Conv2dBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<Tensor> grads(2);
    if (needs_input_grad(0)) {
      grads[0] = Tensor::empty(x.shape(), DType::F32, x.device());
      ops::conv2d_backward_data(dy, weight, grads[0], geometry, layout);
    }
    // The weight gradient may go straight into DDP's bucket (Note [Gradient destinations]).
    if (needs_input_grad(1)) {
      grads[1] = autograd::gradient_buffer(1, weight.shape(), DType::F32, x.device());
      ops::conv2d_backward_weight(dy, x, grads[1], geometry, layout);
    }
    return grads;
  }
};

class BatchNormBackward final : public Node {
 public:
  Tensor x, weight, mean, invstd, count;
  bool training = true;
  BatchNormSync* sync = nullptr;
  ops::ImageLayout layout = ops::ImageLayout::NCHW;
  const char* name() const override { return "BatchNormBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const int64_t c = mean.numel();
    Tensor sums = Tensor::empty({2 * c}, DType::F32, x.device());  // sum_dy | sum_dy_xhat
    ops::batch_norm_backward_reduce(dy, x, mean, invstd, sums, layout);
    std::vector<Tensor> grads(3);
    // The parameter gradients are this device's sums, before any cross-rank reduction: DDP
    // averages them with the other gradients, as PyTorch's SyncBatchNorm leaves them.
    if (needs_input_grad(1)) {
      grads[1] = autograd::gradient_buffer(1, {c}, DType::F32, x.device());
      ops::copy(sums.flat_view(c, {c}), grads[1]);
    }
    if (needs_input_grad(2)) {
      grads[2] = autograd::gradient_buffer(2, {c}, DType::F32, x.device());
      ops::copy(sums.flat_view(0, {c}), grads[2]);
    }
    if (needs_input_grad(0)) grads[0] = input_gradient(dy, sums);
    return grads;
  }

 private:
  Tensor input_gradient(const Tensor& dy, const Tensor& sums) {
    const int64_t c = mean.numel();
    Tensor dx = Tensor::empty(x.shape(), DType::F32, x.device());
    if (!training) {  // the statistics are constants: dx = dy * invstd * weight
      Tensor zeros = Tensor::zeros({c}, DType::F32, x.device());
      ops::batch_norm_elemt(dy, zeros, invstd, weight, zeros, dx, layout);
      return dx;
    }
    if (sync != nullptr) sync->all_reduce_sum(sums);
    ops::batch_norm_backward_elemt(dy, x, mean, invstd, weight, sums, count, dx, layout);
    return dx;
  }
};

class MaxPool2dBackward final : public Node {
 public:
  Tensor indices;
  Shape input_shape;
  Device device;
  int64_t kernel = 0;
  ops::Conv2dGeometry geometry;
  ops::ImageLayout layout = ops::ImageLayout::NCHW;
  const char* name() const override { return "MaxPool2dBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(input_shape, DType::F32, device);
    ops::max_pool2d_backward(dy, indices, dx, kernel, geometry, layout);
    return {dx};
  }
};

class GlobalAvgPoolBackward final : public Node {
 public:
  Shape input_shape;
  Device device;
  ops::ImageLayout layout = ops::ImageLayout::NCHW;
  const char* name() const override { return "GlobalAvgPoolBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(input_shape, DType::F32, device);
    ops::global_avg_pool_backward(dy, dx, layout);
    return {dx};
  }
};

// Packs running_mean | running_var | 1 as one group's statistics, for eval mode.
Tensor running_stats(const BatchNormBuffers& b) {
  const int64_t c = b.running_mean.numel();
  Tensor stats = Tensor::empty({1, 2 * c + 1}, DType::F32, b.running_mean.device());
  ops::copy(b.running_mean, stats.flat_view(0, {c}));
  ops::copy(b.running_var, stats.flat_view(c, {c}));
  ops::fill(stats.flat_view(2 * c, {1}), 1.0f);
  return stats;
}

}  // namespace

Var conv2d(const Var& x, const Var& weight, ops::Conv2dGeometry geometry) {
  const ops::ImageLayout layout = ops::image_layout();
  const Tensor& xd = x.data();
  const Tensor& w = weight.data();
  DDPB_USAGE_CHECK(xd.dim() == 4 && w.dim() == 4 && ops::image_dims(xd, layout).c == w.size(1))
      << "conv2d: input " << xd.describe() << " (" << enum_name(layout) << ") does not have the "
      << w.size(1) << " channels that weight " << w.describe() << " expects";
  const ops::ImageDims d = ops::image_dims(xd, layout);
  const int64_t p = geometry.out_extent(d.h, w.size(2));
  const int64_t q = geometry.out_extent(d.w, w.size(3));
  DDPB_USAGE_CHECK(p >= 1 && q >= 1)
      << "conv2d: input " << xd.describe() << " is too small for a " << w.size(2) << "x"
      << w.size(3) << " kernel with padding " << geometry.padding;
  Tensor y =
      Tensor::empty(ops::image_shape({d.n, w.size(0), p, q}, layout), DType::F32, xd.device());
  ops::conv2d_forward(xd, w, y, geometry, layout);
  auto node = std::make_shared<Conv2dBackward>();
  node->x = xd;
  node->weight = w;
  node->geometry = geometry;
  node->layout = layout;
  return make_result(y, node, {x, weight});
}

Var batch_norm(const Var& x, const Var& weight, const Var& bias, const BatchNormBuffers& buffers,
               const BatchNormOptions& options) {
  const ops::ImageLayout layout = ops::image_layout();
  const Tensor& xd = x.data();
  DDPB_USAGE_CHECK(xd.dim() == 4) << "batch_norm needs an image batch, got " << xd.describe();
  const int64_t c = ops::image_dims(xd, layout).c;
  DDPB_USAGE_CHECK(weight.data().numel() == c)
      << "batch_norm: input " << xd.describe() << " has " << c << " channels, the layer "
      << weight.data().numel();
  DDPB_USAGE_CHECK(!options.training || options.sync != nullptr || xd.numel() / c > 1)
      << "batch_norm: expected more than 1 value per channel when training, got input "
      << xd.describe();
  Tensor mean = Tensor::empty({c}, DType::F32, xd.device());
  Tensor invstd = Tensor::empty({c}, DType::F32, xd.device());
  Tensor count = Tensor::empty({1}, DType::F32, xd.device());
  if (options.training) {
    Tensor stats = Tensor::empty({2 * c + 1}, DType::F32, xd.device());
    ops::batch_norm_stats(xd, stats, layout);
    Tensor groups =
        options.sync != nullptr ? options.sync->all_gather(stats) : stats.view({1, 2 * c + 1});
    ops::batch_norm_gather_stats(groups, options.eps, options.momentum, mean, invstd, count,
                                 buffers.running_mean, buffers.running_var,
                                 buffers.num_batches_tracked);
  } else {
    ops::batch_norm_gather_stats(running_stats(buffers), options.eps, 0.0f, mean, invstd, count,
                                 Tensor(), Tensor(), Tensor());
  }
  Tensor y = Tensor::empty(xd.shape(), DType::F32, xd.device());
  ops::batch_norm_elemt(xd, mean, invstd, weight.data(), bias.data(), y, layout);
  auto node = std::make_shared<BatchNormBackward>();
  node->x = xd;
  node->weight = weight.data();
  node->mean = mean;
  node->invstd = invstd;
  node->count = count;
  node->training = options.training;
  node->sync = options.sync;
  node->layout = layout;
  return make_result(y, node, {x, weight, bias});
}

Var max_pool2d(const Var& x, int64_t kernel, ops::Conv2dGeometry geometry) {
  const ops::ImageLayout layout = ops::image_layout();
  const Tensor& xd = x.data();
  DDPB_USAGE_CHECK(xd.dim() == 4) << "max_pool2d needs an image batch, got " << xd.describe();
  const ops::ImageDims d = ops::image_dims(xd, layout);
  const int64_t p = geometry.out_extent(d.h, kernel);
  const int64_t q = geometry.out_extent(d.w, kernel);
  DDPB_USAGE_CHECK(p >= 1 && q >= 1)
      << "max_pool2d: input " << xd.describe() << " is too small for a " << kernel << "x" << kernel
      << " window";
  Tensor y = Tensor::empty(ops::image_shape({d.n, d.c, p, q}, layout), DType::F32, xd.device());
  Tensor indices = Tensor::empty(y.shape(), DType::I32, xd.device());
  ops::max_pool2d_forward(xd, y, indices, kernel, geometry, layout);
  auto node = std::make_shared<MaxPool2dBackward>();
  node->indices = indices;
  node->input_shape = xd.shape();
  node->device = xd.device();
  node->kernel = kernel;
  node->geometry = geometry;
  node->layout = layout;
  return make_result(y, node, {x});
}

Var global_avg_pool(const Var& x) {
  const ops::ImageLayout layout = ops::image_layout();
  const Tensor& xd = x.data();
  DDPB_USAGE_CHECK(xd.dim() == 4) << "global_avg_pool needs an image batch, got " << xd.describe();
  const ops::ImageDims d = ops::image_dims(xd, layout);
  Tensor y = Tensor::empty({d.n, d.c}, DType::F32, xd.device());
  ops::global_avg_pool_forward(xd, y, layout);
  auto node = std::make_shared<GlobalAvgPoolBackward>();
  node->input_shape = xd.shape();
  node->device = xd.device();
  node->layout = layout;
  return make_result(y, node, {x});
}

Tensor images_in_layout(const Tensor& x) {
  if (ops::image_layout() == ops::ImageLayout::NCHW) return x;
  Tensor y = Tensor::empty(
      ops::image_shape(ops::image_dims(x, ops::ImageLayout::NCHW), ops::ImageLayout::NHWC),
      DType::F32, x.device());
  ops::nchw_to_nhwc(x, y);
  return y;
}

}  // namespace ddpb::fn
