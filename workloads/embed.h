// `embed`: a communication-bound model. A large embedding table (`emb.weight`, tens of MB)
// looked up for a bag of ids per sample, the rows concatenated, then a small MLP
// (`head.0`, ReLU, `head.1`). Almost all parameters are in the table but only a few rows get
// a gradient, so compute is tiny while every step still reduces the whole table: the case
// where DP's replicate/reduce and DDP's AllReduce cost the most.
#pragma once

#include "workloads/model.h"

namespace ddpb {

class EmbedModel final : public Model {
 public:
  EmbedModel(const WorkloadSpec& spec, const Device& device, uint64_t seed);
  autograd::Var forward(const Tensor& x) const override;  // x i32 [B, ids_per_sample]
  double train_flops_per_sample() const override;

 private:
  WorkloadSpec spec_;
  std::shared_ptr<nn::Embedding> emb_;
  std::shared_ptr<nn::Linear> head0_, head1_;
};

}  // namespace ddpb
