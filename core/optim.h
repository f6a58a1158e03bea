// Optimizers that run on the parameters' device, with PyTorch's update formulas (see
// ops::sgd_step and ops::adamw_step). State is created lazily on the parameter's device.
// A parameter without a gradient this step is skipped, as in PyTorch. step() updates all
// parameters with one multi-tensor op (Note [Optimizer steps over lists] in optim.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/autograd.h"

namespace ddpb::optim {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adamw
  float lr = 0.05f;
  float momentum = 0.9f;      // sgd
  float weight_decay = 0.0f;  // sgd: L2 added to the gradient; adamw: decoupled
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adamw
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // set_to_none (PyTorch 2's default) drops the gradients, so the next backward adopts
  // fresh buffers without a memset and an add; false zeroes them in place, which keeps
  // gradients that are views (DDP's bucket views) attached.
  void zero_grad(bool set_to_none = true);
  const std::vector<autograd::Var>& params() const { return params_; }

 protected:
  explicit Optimizer(std::vector<autograd::Var> params) : params_(std::move(params)) {}
  std::vector<autograd::Var> params_;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<autograd::Var> params, float lr, float momentum, float weight_decay);
  void step() override;

 private:
  float lr_, momentum_, weight_decay_;
  std::vector<Tensor> momentum_buffers_;
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<autograd::Var> params, float lr, float beta1, float beta2, float eps,
        float weight_decay);
  void step() override;

 private:
  float lr_, beta1_, beta2_, eps_, weight_decay_;
  int64_t step_ = 0;
  std::vector<Tensor> m_, v_;
};

// Throws UsageError for an unknown name or an invalid setting.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          std::vector<autograd::Var> params);

}  // namespace ddpb::optim
