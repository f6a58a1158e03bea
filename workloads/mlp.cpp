#include "workloads/mlp.h"

#include "core/check.h"

namespace ddpb {

MlpModel::MlpModel(const WorkloadSpec& spec, const Device& device, uint64_t seed) {
  widths_.push_back(spec.in_features);
  for (int64_t h : spec.hidden) widths_.push_back(h);
  widths_.push_back(spec.classes);
  nn::Context ctx{device, seed, "layers"};
  for (size_t i = 0; i + 1 < widths_.size(); ++i) {
    auto name = std::to_string(i);
    layers_.push_back(
        register_module("layers." + name,
                        std::make_shared<nn::Linear>(ctx.child(name), widths_[i], widths_[i + 1])));
  }
  if (spec.conditional_branch) {
    nn::Context root{device, seed, ""};
    skip_ = register_module(
        "skip", std::make_shared<nn::Linear>(root.child("skip"), spec.in_features, spec.classes));
  }
}

autograd::Var MlpModel::forward(const Tensor& x) const {
  DDPB_CHECK(x.dim() == 2 && x.size(1) == widths_.front())
      << "mlp expects [B, " << widths_.front() << "] features, got " << x.describe();
  autograd::Var h(x);
  for (size_t i = 0; i < layers_.size(); ++i) {
    bool last = i + 1 == layers_.size();
    // ReLU is fused into the GEMM epilogue; the last layer produces raw logits.
    h = layers_[i]->forward(h, last ? ops::Activation::None : ops::Activation::ReLU);
  }
  if (skip_ && x.flat_view(0, {1}).item() > 0.0f) h = fn::add(h, skip_->forward(autograd::Var(x)));
  return h;
}

double MlpModel::train_flops_per_sample() const {
  double f = 0.0;
  for (size_t i = 0; i + 1 < widths_.size(); ++i)
    f += 2.0 * double(widths_[i]) * double(widths_[i + 1]);
  return 3.0 * f;
}

}  // namespace ddpb
