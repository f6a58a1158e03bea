// `gpt`: the GPT-2 architecture with nanoGPT / Hugging Face parameter names:
// wte, wpe, h.{i}.ln_1, h.{i}.attn.c_attn, h.{i}.attn.c_proj, h.{i}.ln_2, h.{i}.mlp.c_fc,
// h.{i}.mlp.c_proj, ln_f, and an LM head tied to wte (listed once, as wte.weight).
// Pre-LN residual blocks, causal attention, GELU (tanh), no dropout.
#pragma once

#include "workloads/model.h"

namespace ddpb {

class GptBlock final : public nn::Module {
 public:
  GptBlock(const nn::Context& ctx, const WorkloadSpec& spec);
  autograd::Var forward(const autograd::Var& x, int64_t batch) const;  // x [B*T, C]

 private:
  int64_t n_head_, seq_len_, n_embd_;
  std::shared_ptr<nn::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<nn::Linear> c_attn_, attn_proj_, c_fc_, mlp_proj_;
};

class GptModel final : public Model {
 public:
  GptModel(const WorkloadSpec& spec, const Device& device, uint64_t seed);
  autograd::Var forward(const Tensor& x) const override;  // x i32 [B, T] -> [B*T, vocab]
  int64_t tokens_per_sample() const override { return spec_.seq_len; }
  double train_flops_per_sample() const override;

 private:
  WorkloadSpec spec_;
  std::shared_ptr<nn::Embedding> wte_, wpe_;
  std::vector<std::shared_ptr<GptBlock>> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  mutable Tensor positions_;  // position ids [B*T], cached per batch size
};

}  // namespace ddpb
