#include "core/nn.h"

#include <cmath>
#include <unordered_set>

#include "core/check.h"
#include "core/ops.h"
#include "core/rng.h"

namespace ddpb::nn {

std::vector<NamedParameter> Module::named_parameters() const {
  std::vector<NamedParameter> all;
  collect("", all);
  std::vector<NamedParameter> unique;
  std::unordered_set<const autograd::VarImpl*> seen;
  for (auto& p : all) {
    if (seen.insert(p.var.impl()).second) unique.push_back(std::move(p));
  }
  return unique;
}

std::vector<Var> Module::parameters() const {
  std::vector<Var> out;
  for (auto& p : named_parameters()) out.push_back(p.var);
  return out;
}

void Module::zero_grad() const {
  for (auto& p : named_parameters()) {
    if (p.var.grad().defined()) ops::zero(p.var.grad());
  }
}

std::vector<NamedBuffer> Module::named_buffers() const {
  std::vector<NamedBuffer> all;
  collect_buffers("", all);
  return all;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [name, child] : children_) child->apply(fn);
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [name, child] : children_) {
    for (auto& [sub, m] : child->named_modules())
      out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  }
  return out;
}

Module::ForwardHooks& Module::forward_hooks() {
  if (!forward_hooks_) forward_hooks_ = std::make_shared<ForwardHooks>();
  return *forward_hooks_;
}

autograd::HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  const uint64_t id = forward_hooks().pre.add(std::move(hook));
  return autograd::HookHandle([hooks = std::weak_ptr<ForwardHooks>(forward_hooks_), id] {
    if (auto h = hooks.lock()) h->pre.remove(id);
  });
}

autograd::HookHandle Module::register_forward_hook(ForwardHook hook) {
  const uint64_t id = forward_hooks().post.add(std::move(hook));
  return autograd::HookHandle([hooks = std::weak_ptr<ForwardHooks>(forward_hooks_), id] {
    if (auto h = hooks.lock()) h->post.remove(id);
  });
}

void Module::clear_forward_hooks() {
  forward_hooks_.reset();  // outstanding handles then find nothing to remove
}

void Module::run_forward_pre_hooks() const {
  // A copy of the pointer: a hook may clear this module's hooks while they run.
  if (auto hooks = forward_hooks_) hooks->pre.run(*this);
}

void Module::run_forward_hooks(const std::vector<Var>& outputs) const {
  if (auto hooks = forward_hooks_) hooks->post.run(*this, outputs);
}

Tensor& Module::register_buffer(std::string name, Tensor tensor) {
  buffers_.emplace_back(std::move(name), std::move(tensor));
  return buffers_.back().second;
}

void Module::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) const {
  for (auto& [name, tensor] : buffers_) out.push_back({prefix + name, tensor});
  for (auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

Var& Module::register_parameter(std::string name, Var var) {
  params_.emplace_back(std::move(name), std::move(var));
  return params_.back().second;
}

void Module::collect(const std::string& prefix, std::vector<NamedParameter>& out) const {
  for (auto& [name, var] : params_) out.push_back({prefix + name, var});
  for (auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

Var make_parameter(const Shape& shape, const Init& init, uint64_t seed, const std::string& name,
                   const Device& device) {
  Tensor host = Tensor::empty(shape, DType::F32, Device::cpu());
  float* p = host.data<float>();
  uint64_t stream = hash_name(name.c_str());
  for (int64_t i = 0; i < host.numel(); ++i) {
    auto idx = static_cast<uint64_t>(i);
    switch (init.kind) {
      case Init::Kind::Zeros:
        p[i] = 0.0f;
        break;
      case Init::Kind::Ones:
        p[i] = 1.0f;
        break;
      case Init::Kind::Normal:
        p[i] = static_cast<float>(rng_normal(seed, stream, idx)) * init.scale;
        break;
      case Init::Kind::Uniform:
        p[i] = static_cast<float>(rng_uniform(seed, stream, idx) * 2.0 - 1.0) * init.scale;
        break;
    }
  }
  Tensor t = device == Device::cpu() ? host : host.to(device);
  Var param(t, /*requires_grad=*/true);
  param.set_name(name);  // for messages (Note [Freeable parameters])
  return param;
}

Linear::Linear(const Context& ctx, int64_t in, int64_t out, bool bias, float weight_std) {
  DDPB_CHECK(in > 0 && out > 0) << "Linear(" << in << ", " << out << ") needs positive sizes";
  float bound = 1.0f / std::sqrt(static_cast<float>(in));
  Init w_init = weight_std > 0.0f ? Init::normal(weight_std) : Init::uniform(bound);
  Init b_init = weight_std > 0.0f ? Init::zeros() : Init::uniform(bound);
  weight_ = register_parameter(
      "weight", make_parameter({out, in}, w_init, ctx.seed, ctx.param_name("weight"), ctx.device));
  if (bias) {
    bias_ = register_parameter(
        "bias", make_parameter({out}, b_init, ctx.seed, ctx.param_name("bias"), ctx.device));
  }
}

Var Linear::forward(const Var& x, ops::Activation act) const {
  return with_forward_hooks([&] { return fn::linear(x, weight_, bias_, act); });
}

LayerNorm::LayerNorm(const Context& ctx, int64_t dim, float eps) : eps_(eps) {
  weight_ = register_parameter("weight", make_parameter({dim}, Init::ones(), ctx.seed,
                                                        ctx.param_name("weight"), ctx.device));
  bias_ = register_parameter(
      "bias", make_parameter({dim}, Init::zeros(), ctx.seed, ctx.param_name("bias"), ctx.device));
}

Var LayerNorm::forward(const Var& x) const {
  return with_forward_hooks([&] { return fn::layer_norm(x, weight_, bias_, eps_); });
}

Embedding::Embedding(const Context& ctx, int64_t num, int64_t dim, float std) {
  weight_ = register_parameter("weight", make_parameter({num, dim}, Init::normal(std), ctx.seed,
                                                        ctx.param_name("weight"), ctx.device));
}

Var Embedding::forward(const Tensor& ids) const {
  return with_forward_hooks([&] { return fn::embedding(ids, weight_); });
}

Conv2d::Conv2d(const Context& ctx, int64_t in, int64_t out, int64_t kernel, int64_t stride,
               int64_t padding)
    : geometry_{stride, padding} {
  DDPB_CHECK(in > 0 && out > 0 && kernel > 0 && stride > 0 && padding >= 0)
      << "Conv2d(" << in << ", " << out << ", kernel " << kernel << ", stride " << stride
      << ", padding " << padding << ")";
  const float std = std::sqrt(2.0f / static_cast<float>(out * kernel * kernel));
  weight_ =
      register_parameter("weight", make_parameter({out, in, kernel, kernel}, Init::normal(std),
                                                  ctx.seed, ctx.param_name("weight"), ctx.device));
}

Var Conv2d::forward(const Var& x) const {
  return with_forward_hooks([&] { return fn::conv2d(x, weight_, geometry_); });
}

BatchNorm2d::BatchNorm2d(const Context& ctx, int64_t channels, float eps, float momentum)
    : eps_(eps), momentum_(momentum) {
  weight_ = register_parameter("weight", make_parameter({channels}, Init::ones(), ctx.seed,
                                                        ctx.param_name("weight"), ctx.device));
  bias_ = register_parameter("bias", make_parameter({channels}, Init::zeros(), ctx.seed,
                                                    ctx.param_name("bias"), ctx.device));
  Tensor ones =
      Tensor::from_floats(std::vector<float>(static_cast<size_t>(channels), 1.0f), {channels});
  buffers_.running_mean =
      register_buffer("running_mean", Tensor::zeros({channels}, DType::F32, ctx.device));
  buffers_.running_var = register_buffer("running_var", ones.to(ctx.device));
  buffers_.num_batches_tracked =
      register_buffer("num_batches_tracked", Tensor::zeros({}, DType::I64, ctx.device));
}

Var BatchNorm2d::forward(const Var& x) const {
  return with_forward_hooks([&] {
    return fn::batch_norm(
        x, weight_, bias_, buffers_,
        {.training = is_training(), .momentum = momentum_, .eps = eps_, .sync = sync_});
  });
}

}  // namespace ddpb::nn
