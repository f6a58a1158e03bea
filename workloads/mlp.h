// `mlp`: Linear layers `layers.{i}` with ReLU between them and none after the last.
// With spec.conditional_branch, a `skip` Linear from the input to the logits is used only
// when the batch's first feature is positive (so some steps, and some ranks, skip it).
#pragma once

#include "workloads/model.h"

namespace ddpb {

class MlpModel final : public Model {
 public:
  MlpModel(const WorkloadSpec& spec, const Device& device, uint64_t seed);
  autograd::Var forward(const Tensor& x) const override;
  double train_flops_per_sample() const override;

 private:
  std::vector<std::shared_ptr<nn::Linear>> layers_;
  std::vector<int64_t> widths_;
  std::shared_ptr<nn::Linear> skip_;  // conditional branch (spec.conditional_branch)
};

}  // namespace ddpb
