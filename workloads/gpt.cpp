#include "workloads/gpt.h"

#include <cmath>

#include "core/check.h"

namespace ddpb {

using autograd::Var;

GptBlock::GptBlock(const nn::Context& ctx, const WorkloadSpec& spec)
    : n_head_(spec.n_head), seq_len_(spec.seq_len), n_embd_(spec.n_embd) {
  const int64_t c = spec.n_embd;
  constexpr float kStd = 0.02f;
  // GPT-2 scales the residual projections by 1/sqrt(2 * n_layer).
  const float proj_std = kStd / std::sqrt(2.0f * static_cast<float>(spec.n_layer));
  ln_1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(ctx.child("ln_1"), c));
  c_attn_ = register_module(
      "attn.c_attn", std::make_shared<nn::Linear>(ctx.child("attn.c_attn"), c, 3 * c, true, kStd));
  attn_proj_ = register_module(
      "attn.c_proj", std::make_shared<nn::Linear>(ctx.child("attn.c_proj"), c, c, true, proj_std));
  ln_2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(ctx.child("ln_2"), c));
  c_fc_ = register_module(
      "mlp.c_fc", std::make_shared<nn::Linear>(ctx.child("mlp.c_fc"), c, 4 * c, true, kStd));
  mlp_proj_ = register_module("mlp.c_proj", std::make_shared<nn::Linear>(ctx.child("mlp.c_proj"),
                                                                         4 * c, c, true, proj_std));
}

// A block is a unit of a sharded design: its forward runs its hooks (Note [Module forward
// hooks]).
Var GptBlock::forward(const Var& x, int64_t batch) const {
  return with_forward_hooks([&] {
    Var qkv = c_attn_->forward(ln_1_->forward(x));
    Var att = fn::causal_attention(fn::reshape(qkv, {batch, seq_len_, 3 * n_embd_}),
                                   static_cast<int>(n_head_));
    Var h = fn::add(x, attn_proj_->forward(fn::reshape(att, {batch * seq_len_, n_embd_})));
    Var m = mlp_proj_->forward(fn::gelu(c_fc_->forward(ln_2_->forward(h))));
    return fn::add(h, m);
  });
}

GptModel::GptModel(const WorkloadSpec& spec, const Device& device, uint64_t seed) : spec_(spec) {
  DDPB_CHECK(spec.n_embd % spec.n_head == 0)
      << "n_embd " << spec.n_embd << " does not split into " << spec.n_head << " heads";
  nn::Context ctx{device, seed, ""};
  wte_ = register_module(
      "wte", std::make_shared<nn::Embedding>(ctx.child("wte"), spec.vocab, spec.n_embd, 0.02f));
  wpe_ = register_module(
      "wpe", std::make_shared<nn::Embedding>(ctx.child("wpe"), spec.seq_len, spec.n_embd, 0.01f));
  for (int64_t i = 0; i < spec.n_layer; ++i) {
    auto name = "h." + std::to_string(i);
    blocks_.push_back(register_module(name, std::make_shared<GptBlock>(ctx.child(name), spec)));
  }
  ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(ctx.child("ln_f"), spec.n_embd));
}

Var GptModel::forward(const Tensor& x) const {
  DDPB_CHECK(x.dim() == 2 && x.size(1) == spec_.seq_len && x.dtype() == DType::I32)
      << "gpt expects i32 tokens [B, " << spec_.seq_len << "], got " << x.describe();
  const int64_t b = x.size(0), t = spec_.seq_len;
  if (!positions_.defined() || positions_.numel() != b * t || positions_.device() != x.device()) {
    // Built once per batch size: a host-to-device copy per step would sync the stream.
    std::vector<int32_t> pos(static_cast<size_t>(b * t));
    for (int64_t i = 0; i < b * t; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i % t);
    positions_ = Tensor::from_ints(pos, {b * t}, x.device());
  }
  Var h = fn::add(wte_->forward(x), wpe_->forward(positions_));
  for (const auto& block : blocks_) h = block->forward(h, b);
  h = ln_f_->forward(h);
  // The LM head is wte itself (weight tying): logits = h wte^T.
  return fn::linear(h, wte_->weight(), Var());
}

double GptModel::train_flops_per_sample() const {
  const double c = static_cast<double>(spec_.n_embd), t = static_cast<double>(spec_.seq_len);
  const double l = static_cast<double>(spec_.n_layer), v = static_cast<double>(spec_.vocab);
  // Per token: QKV 6c^2, proj 2c^2, MLP 16c^2 (multiply-adds x2), attention 4tc, head 2cv.
  double per_token = l * (24.0 * c * c + 4.0 * t * c) + 2.0 * c * v;
  return 3.0 * per_token * t;
}

}  // namespace ddpb
