#include "workloads/embed.h"

#include "core/check.h"

namespace ddpb {

EmbedModel::EmbedModel(const WorkloadSpec& spec, const Device& device, uint64_t seed)
    : spec_(spec) {
  nn::Context ctx{device, seed, ""};
  emb_ = register_module(
      "emb", std::make_shared<nn::Embedding>(ctx.child("emb"), spec.vocab, spec.n_embd, 1.0f));
  const int64_t concat = spec.ids_per_sample * spec.n_embd;
  head0_ = register_module(
      "head.0", std::make_shared<nn::Linear>(ctx.child("head.0"), concat, spec.hidden.at(0)));
  head1_ = register_module(
      "head.1", std::make_shared<nn::Linear>(ctx.child("head.1"), spec.hidden.at(0), spec.classes));
}

autograd::Var EmbedModel::forward(const Tensor& x) const {
  DDPB_CHECK(x.dim() == 2 && x.size(1) == spec_.ids_per_sample && x.dtype() == DType::I32)
      << "embed expects i32 ids [B, " << spec_.ids_per_sample << "], got " << x.describe();
  const int64_t b = x.size(0);
  autograd::Var rows = emb_->forward(x);  // [B*K, C]
  autograd::Var h = fn::reshape(rows, {b, spec_.ids_per_sample * spec_.n_embd});
  return head1_->forward(head0_->forward(h, ops::Activation::ReLU));
}

double EmbedModel::train_flops_per_sample() const {
  const double concat = double(spec_.ids_per_sample) * double(spec_.n_embd);
  const double h = double(spec_.hidden.at(0));
  return 3.0 * 2.0 * (concat * h + h * double(spec_.classes));
}

}  // namespace ddpb
