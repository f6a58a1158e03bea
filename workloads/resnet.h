// `resnet`: torchvision's ResNet (resnet.py), with its module names, shapes and state_dict
// keys, buffers included, so that a torchvision checkpoint loads here and the other way round:
//   conv1, bn1, relu, maxpool (3x3, stride 2, padding 1),
//   layer{1..4}.{j}: BasicBlock (conv1 3x3, bn1, conv2 3x3, bn2) or Bottleneck (conv1 1x1,
//                    bn1, conv2 3x3 with the stride (ResNet v1.5), bn2, conv3 1x1, bn3), and
//                    downsample.0 (1x1 conv) / downsample.1 (bn) where the shape changes,
//   adaptive average pooling to 1x1, fc.
// Initialisation as torchvision's: convolutions kaiming_normal_(fan_out, relu), BatchNorm
// weight 1 and bias 0, fc PyTorch's default Linear init.
#pragma once

#include "workloads/model.h"

namespace ddpb {

class ResNetModel final : public Model {
 public:
  ResNetModel(const WorkloadSpec& spec, const Device& device, uint64_t seed);
  // x: images f32 [B, 3, H, W].
  autograd::Var forward(const Tensor& x) const override;
  double train_flops_per_sample() const override { return 3.0 * forward_flops_; }
  bool samples_are_images() const override { return true; }

  class Block;

 private:
  std::shared_ptr<nn::Conv2d> conv1_;
  std::shared_ptr<nn::BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<nn::Linear> fc_;
  int64_t image_size_;
  double forward_flops_ = 0;  // 2 x the multiply-adds of every convolution and of fc
};

}  // namespace ddpb
