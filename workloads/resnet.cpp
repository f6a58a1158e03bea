#include "workloads/resnet.h"

#include "core/check.h"

namespace ddpb {
namespace {

// The multiply-adds of a convolution over a `size` x `size` input, and its output size.
struct ConvCount {
  double flops;
  int64_t out_size;
};
ConvCount conv_count(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding,
                     int64_t size) {
  const int64_t o = (size + 2 * padding - kernel) / stride + 1;
  return {2.0 * double(in) * double(out) * double(kernel * kernel) * double(o * o), o};
}

}  // namespace

// One residual block; `bottleneck` selects torchvision's Bottleneck over BasicBlock.
class ResNetModel::Block : public nn::Module {
 public:
  Block(const nn::Context& ctx, int64_t in, int64_t planes, int64_t stride, bool bottleneck,
        int64_t& size, double& flops) {
    const int64_t out = bottleneck ? planes * 4 : planes;
    const int64_t in_size = size;
    if (bottleneck) {
      add_conv(ctx, "1", in, planes, 1, 1, 0, size, flops);
      add_conv(ctx, "2", planes, planes, 3, stride, 1, size, flops);
      add_conv(ctx, "3", planes, out, 1, 1, 0, size, flops);
    } else {
      add_conv(ctx, "1", in, planes, 3, stride, 1, size, flops);
      add_conv(ctx, "2", planes, planes, 3, 1, 1, size, flops);
    }
    if (stride != 1 || in != out) {
      down_conv_ = register_module(
          "downsample.0",
          std::make_shared<nn::Conv2d>(ctx.child("downsample.0"), in, out, 1, stride));
      down_bn_ = register_module("downsample.1",
                                 std::make_shared<nn::BatchNorm2d>(ctx.child("downsample.1"), out));
      flops += conv_count(in, out, 1, stride, 0, in_size).flops;
    }
  }

  // A block is a unit of a sharded design: its forward runs its hooks (Note [Module forward
  // hooks]).
  autograd::Var forward(const autograd::Var& x) const {
    return with_forward_hooks([&] {
      autograd::Var h = x;
      for (size_t i = 0; i < convs_.size(); ++i) {
        h = bns_[i]->forward(convs_[i]->forward(h));
        if (i + 1 < convs_.size()) h = fn::relu(h);
      }
      const autograd::Var identity = down_conv_ ? down_bn_->forward(down_conv_->forward(x)) : x;
      return fn::relu(fn::add(h, identity));
    });
  }

 private:
  void add_conv(const nn::Context& ctx, const std::string& k, int64_t in, int64_t out,
                int64_t kernel, int64_t stride, int64_t padding, int64_t& size, double& flops) {
    convs_.push_back(register_module(
        "conv" + k,
        std::make_shared<nn::Conv2d>(ctx.child("conv" + k), in, out, kernel, stride, padding)));
    bns_.push_back(
        register_module("bn" + k, std::make_shared<nn::BatchNorm2d>(ctx.child("bn" + k), out)));
    const ConvCount c = conv_count(in, out, kernel, stride, padding, size);
    flops += c.flops;
    size = c.out_size;
  }

  std::vector<std::shared_ptr<nn::Conv2d>> convs_;
  std::vector<std::shared_ptr<nn::BatchNorm2d>> bns_;
  std::shared_ptr<nn::Conv2d> down_conv_;
  std::shared_ptr<nn::BatchNorm2d> down_bn_;
};

ResNetModel::ResNetModel(const WorkloadSpec& spec, const Device& device, uint64_t seed)
    : image_size_(spec.image_size) {
  DDPB_CHECK(spec.blocks.size() == 4) << spec.name << ": a ResNet has four stages";
  const nn::Context root{device, seed, ""};
  conv1_ =
      register_module("conv1", std::make_shared<nn::Conv2d>(root.child("conv1"), 3, 64, 7, 2, 3));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(root.child("bn1"), 64));
  const ConvCount stem = conv_count(3, 64, 7, 2, 3, image_size_);
  forward_flops_ = stem.flops;
  int64_t size = (stem.out_size + 2 - 3) / 2 + 1;  // the max pool
  int64_t in = 64;
  for (int64_t stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int64_t j = 0; j < spec.blocks[static_cast<size_t>(stage)]; ++j) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(j);
      const int64_t stride = (stage > 0 && j == 0) ? 2 : 1;
      blocks_.push_back(
          register_module(name, std::make_shared<Block>(root.child(name), in, planes, stride,
                                                        spec.bottleneck, size, forward_flops_)));
      in = spec.bottleneck ? planes * 4 : planes;
    }
  }
  fc_ = register_module("fc", std::make_shared<nn::Linear>(root.child("fc"), in, spec.classes));
  forward_flops_ += 2.0 * double(in) * double(spec.classes);
}

autograd::Var ResNetModel::forward(const Tensor& x) const {
  DDPB_USAGE_CHECK(x.dim() == 4 && x.size(1) == 3)
      << "resnet expects images [B, 3, H, W], got " << x.describe();
  autograd::Var h =
      fn::relu(bn1_->forward(conv1_->forward(autograd::Var(fn::images_in_layout(x)))));
  h = fn::max_pool2d(h, 3, {.stride = 2, .padding = 1});
  for (const auto& block : blocks_) h = block->forward(h);
  return fc_->forward(fn::global_avg_pool(h));
}

}  // namespace ddpb
