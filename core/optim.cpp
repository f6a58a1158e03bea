#include "core/optim.h"

#include <vector>

#include "core/memory_category.h"

#include "core/check.h"
#include "core/nvtx.h"
#include "core/ops.h"

namespace ddpb::optim {

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& p : params_) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      ops::zero(p.grad());
    }
  }
}

SGD::SGD(std::vector<autograd::Var> params, float lr, float momentum, float weight_decay)
    : Optimizer(std::move(params)),
      lr_(lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      momentum_buffers_(params_.size()) {}

namespace {

// Note [Optimizer steps over lists]
// step() hands the parameters to one multi-tensor op (ops::sgd_step_multi,
// ops::adamw_step_multi; Note [Multi-tensor apply] in core/cuda/cuda_optim.cu) instead of
// one op per parameter: on CUDA that is a few launches for the whole model instead of one per
// parameter (148 for gpt2-small), with bit-identical results. A list op takes one device and
// one set of scalars, so parameters are grouped by device and, for SGD, by whether this is
// their buffer's first step (a parameter whose first gradient comes late starts its buffer
// late); there is normally a single group.
struct StepGroup {
  Device device;
  bool first_step = false;
  std::vector<Tensor> params, grads, state0, state1;
};

StepGroup& group_for(std::vector<StepGroup>& groups, const Device& device, bool first_step) {
  for (StepGroup& g : groups) {
    if (g.device == device && g.first_step == first_step) return g;
  }
  groups.push_back(StepGroup{device, first_step, {}, {}, {}, {}});
  return groups.back();
}

}  // namespace

void SGD::step() {
  nvtx::Range range("optimizer.sgd", nvtx::Category::Optimizer);
  MemoryCategoryScope state(MemoryCategory::OptimizerState);  // the momentum buffers
  // One list op per group of parameters (Note [Optimizer steps over lists]).
  std::vector<StepGroup> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (!p.grad().defined()) continue;
    bool first = false;
    if (momentum_ != 0.0f && !momentum_buffers_[i].defined()) {
      momentum_buffers_[i] = Tensor::empty(p.shape(), DType::F32, p.data().device());
      first = true;
    }
    StepGroup& g = group_for(groups, p.data().device(), first);
    g.params.push_back(p.data());
    g.grads.push_back(p.grad());
    g.state0.push_back(momentum_buffers_[i]);  // undefined without momentum: not touched
  }
  for (const StepGroup& g : groups) {
    ops::sgd_step_multi(g.params, g.grads, g.state0, lr_, momentum_, weight_decay_, g.first_step);
  }
}

AdamW::AdamW(std::vector<autograd::Var> params, float lr, float beta1, float beta2, float eps,
             float weight_decay)
    : Optimizer(std::move(params)),
      lr_(lr),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      m_(params_.size()),
      v_(params_.size()) {}

void AdamW::step() {
  nvtx::Range range("optimizer.adamw", nvtx::Category::Optimizer);
  MemoryCategoryScope state(MemoryCategory::OptimizerState);  // the two moments
  ++step_;
  // One list op per group of parameters (Note [Optimizer steps over lists]).
  std::vector<StepGroup> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (!p.grad().defined()) continue;
    if (!m_[i].defined()) {
      m_[i] = Tensor::zeros(p.shape(), DType::F32, p.data().device());
      v_[i] = Tensor::zeros(p.shape(), DType::F32, p.data().device());
    }
    StepGroup& g = group_for(groups, p.data().device(), false);
    g.params.push_back(p.data());
    g.grads.push_back(p.grad());
    g.state0.push_back(m_[i]);
    g.state1.push_back(v_[i]);
  }
  for (const StepGroup& g : groups) {
    ops::adamw_step_multi(g.params, g.grads, g.state0, g.state1, lr_, beta1_, beta2_, eps_,
                          weight_decay_, step_);
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c,
                                          std::vector<autograd::Var> params) {
  DDPB_USAGE_CHECK(c.lr > 0.0f) << "--lr must be positive, got " << c.lr;
  DDPB_USAGE_CHECK(c.weight_decay >= 0.0f) << "--weight-decay must be >= 0, got " << c.weight_decay;
  if (c.name == "sgd") {
    DDPB_USAGE_CHECK(c.momentum >= 0.0f && c.momentum < 1.0f)
        << "--momentum must be in [0, 1), got " << c.momentum;
    return std::make_unique<SGD>(std::move(params), c.lr, c.momentum, c.weight_decay);
  }
  if (c.name == "adamw") {
    return std::make_unique<AdamW>(std::move(params), c.lr, c.beta1, c.beta2, c.eps,
                                   c.weight_decay);
  }
  DDPB_USAGE_FAIL() << "unknown optimizer '" << c.name << "' (expected sgd or adamw)";
  return nullptr;
}

}  // namespace ddpb::optim
