// `mlp`: Linear layers `layers.{i}` with ReLU between them and none after the last.
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
};

}  // namespace ddpb
