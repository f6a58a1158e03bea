// Modules: named parameter trees with PyTorch's names, shapes and layouts, so that a
// state dict maps one-to-one (a Linear weight is [out, in]).
//
// Parameters are created on the module's device and initialised deterministically from
// (seed, parameter name) on the host, so every device and rank starts identical.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/functional.h"

namespace ddpb::nn {

using autograd::Var;

struct NamedParameter {
  std::string name;
  Var var;
};

// A buffer: module state that is not trained but is saved, loaded, replicated and broadcast
// with the parameters (BatchNorm's running statistics), as PyTorch's register_buffer.
struct NamedBuffer {
  std::string name;
  Tensor tensor;
};

class Module;

// Note [Module forward hooks]
// A module's forward can be bracketed by hooks (PyTorch's register_forward_pre_hook and
// register_forward_hook): pre-hooks run right before its forward computes anything, with the
// module; forward hooks right after, with the module and its output Vars. FSDP all-gathers a
// unit's parameters in the pre-hook and frees them in the forward hook, where it also puts a
// pre-backward hook on the outputs (Note [Pre-backward hooks] in core/autograd.h). Hooks run
// in registration order, on the thread running the forward; the handle a registration
// returns removes it. Forwards here have no common signature (Linear takes an activation,
// Embedding ids), so the base class cannot wrap them: each forward runs its body through
// with_forward_hooks(), as every module in this file does, and a module that does not (a
// workload's own) still gets its hooks when its caller runs the call through the module's
// with_forward_hooks() instead. One or the other, not both, or the hooks run twice. Without
// hooks the wrapper costs a null test.
using ForwardPreHook = std::function<void(const Module& module)>;
using ForwardHook = std::function<void(const Module& module, const std::vector<Var>& outputs)>;

class Module {
 public:
  virtual ~Module() = default;
  // See Note [Module forward hooks].
  autograd::HookHandle register_forward_pre_hook(ForwardPreHook hook);
  autograd::HookHandle register_forward_hook(ForwardHook hook);
  void clear_forward_hooks();
  // Runs the pre-hooks, then `body` (this module's forward, returning a Var or a vector of
  // Vars), then the forward hooks with its outputs; returns what body returned.
  template <typename Body>
  auto with_forward_hooks(Body&& body) const -> std::invoke_result_t<Body&> {
    if (!forward_hooks_) return body();
    run_forward_pre_hooks();
    auto out = body();
    if constexpr (std::is_same_v<decltype(out), Var>) {
      run_forward_hooks({out});
    } else {
      run_forward_hooks(out);
    }
    return out;
  }

  // All parameters, depth first in registration order, with dotted names ("h.0.ln_1.weight").
  // A parameter shared by two modules (tied weights) is listed once, under its first name.
  std::vector<NamedParameter> named_parameters() const;
  std::vector<Var> parameters() const;
  void zero_grad() const;  // zeroes existing gradients in place (keeps bucket views)
  // All buffers, depth first in registration order, with dotted names
  // ("layer1.0.bn1.running_mean").
  std::vector<NamedBuffer> named_buffers() const;
  // Training (the default) or evaluation mode, for this module and every child (PyTorch's
  // train() / eval()): BatchNorm uses batch statistics and updates its buffers only in training.
  void train(bool on = true);
  bool is_training() const { return training_; }
  // Calls fn on this module and every descendant, depth first (PyTorch's Module.apply).
  void apply(const std::function<void(Module&)>& fn);
  // This module ("") and every descendant with its dotted name ("h.0", "h.0.attn.c_attn"),
  // depth first in registration order (PyTorch's named_modules): what a wrapping policy picks
  // units from.
  std::vector<std::pair<std::string, Module*>> named_modules();

 protected:
  Var& register_parameter(std::string name, Var var);
  Tensor& register_buffer(std::string name, Tensor tensor);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    children_.emplace_back(std::move(name), module);
    return module;
  }

 private:
  void collect(const std::string& prefix, std::vector<NamedParameter>& out) const;
  void collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) const;
  std::vector<std::pair<std::string, Var>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  bool training_ = true;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;

  // Shared with the handles (weakly), which may outlive the module.
  struct ForwardHooks {
    autograd::HookList<ForwardPreHook> pre;
    autograd::HookList<ForwardHook> post;
  };
  ForwardHooks& forward_hooks();
  void run_forward_pre_hooks() const;
  void run_forward_hooks(const std::vector<Var>& outputs) const;
  std::shared_ptr<ForwardHooks> forward_hooks_;  // null until a hook is registered
};

// How a parameter is filled at construction.
struct Init {
  enum class Kind { Zeros, Ones, Normal, Uniform } kind = Kind::Zeros;
  float scale = 0.0f;  // std for Normal, bound for Uniform
  static Init zeros() { return {Kind::Zeros, 0.0f}; }
  static Init ones() { return {Kind::Ones, 0.0f}; }
  static Init normal(float std) { return {Kind::Normal, std}; }
  static Init uniform(float bound) { return {Kind::Uniform, bound}; }
};

// A parameter tensor on `device`, filled from (seed, name) independent of the device.
Var make_parameter(const Shape& shape, const Init& init, uint64_t seed, const std::string& name,
                   const Device& device);

struct Context {
  Device device;
  uint64_t seed = 0;
  std::string prefix;  // full name of the module being built, for per-parameter seeds
  Context child(const std::string& name) const {
    return {device, seed, prefix.empty() ? name : prefix + "." + name};
  }
  std::string param_name(const std::string& name) const {
    return prefix.empty() ? name : prefix + "." + name;
  }
};

class Linear : public Module {
 public:
  // PyTorch's default init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias; `weight_std`
  // > 0 selects N(0, std) (GPT-2 style) with a zero bias.
  Linear(const Context& ctx, int64_t in, int64_t out, bool bias = true, float weight_std = 0.0f);
  Var forward(const Var& x, ops::Activation act = ops::Activation::None) const;
  const Var& weight() const { return weight_; }

 private:
  Var weight_, bias_;
};

class LayerNorm : public Module {
 public:
  LayerNorm(const Context& ctx, int64_t dim, float eps = 1e-5f);
  Var forward(const Var& x) const;

 private:
  Var weight_, bias_;
  float eps_;
};

class Embedding : public Module {
 public:
  Embedding(const Context& ctx, int64_t num, int64_t dim, float std = 1.0f);
  Var forward(const Tensor& ids) const;  // -> [N, dim]
  const Var& weight() const { return weight_; }

 private:
  Var weight_;
};

// PyTorch's Conv2d without bias (ResNet's), square kernel; weights initialised as torchvision's
// ResNet does: kaiming_normal_(mode="fan_out", nonlinearity="relu"), N(0, 2 / (out * k * k)).
class Conv2d : public Module {
 public:
  Conv2d(const Context& ctx, int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
         int64_t padding = 0);
  Var forward(const Var& x) const;
  const Var& weight() const { return weight_; }

 private:
  Var weight_;
  ops::Conv2dGeometry geometry_;
};

// PyTorch's BatchNorm2d (affine, tracking running statistics): weight 1, bias 0, buffers
// running_mean 0, running_var 1, num_batches_tracked 0 (i64). With a sync set (DDP's
// --sync-bn), it is SyncBatchNorm: statistics over every rank's batch.
class BatchNorm2d : public Module {
 public:
  BatchNorm2d(const Context& ctx, int64_t channels, float eps = 1e-5f, float momentum = 0.1f);
  Var forward(const Var& x) const;
  void set_sync(fn::BatchNormSync* sync) { sync_ = sync; }
  int64_t channels() const { return weight_.data().numel(); }

 private:
  Var weight_, bias_;
  fn::BatchNormBuffers buffers_;
  float eps_, momentum_;
  fn::BatchNormSync* sync_ = nullptr;
};

}  // namespace ddpb::nn
