// Optimizer updates against PyTorch's formulas, computed by hand in double.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/ops.h"
#include "core/optim.h"
#include "test_util.h"

namespace ddpb {
namespace {

using autograd::Var;

TEST(Optim, SgdMomentumWeightDecayMatchesPyTorchFormula) {
  Var p(Tensor::from_floats({1.0f, -2.0f}, {2}), true);
  optim::SGD sgd({p}, 0.1f, 0.9f, 0.01f);
  double ref[2] = {1.0, -2.0}, buf[2] = {0, 0};
  const double g[2] = {0.5, -0.25};
  for (int step = 0; step < 3; ++step) {
    p.set_grad(Tensor::from_floats({float(g[0]), float(g[1])}, {2}));
    sgd.step();
    for (int i = 0; i < 2; ++i) {
      double d = g[i] + 0.01 * ref[i];
      buf[i] = step == 0 ? d : 0.9 * buf[i] + d;
      ref[i] -= 0.1 * buf[i];
    }
  }
  auto got = p.data().to_floats();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(got[i], ref[i], 1e-6);
}

TEST(Optim, AdamWMatchesPyTorchFormula) {
  Var p(Tensor::from_floats({1.0f, -2.0f, 0.5f}, {3}), true);
  optim::AdamW adam({p}, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f);
  double ref[3] = {1.0, -2.0, 0.5}, m[3] = {}, v[3] = {};
  const double g[3] = {0.3, -0.1, 2.0};
  for (int step = 1; step <= 4; ++step) {
    p.set_grad(Tensor::from_floats({float(g[0]), float(g[1]), float(g[2])}, {3}));
    adam.step();
    for (int i = 0; i < 3; ++i) {
      ref[i] *= 1 - 0.01 * 0.1;
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      double mh = m[i] / (1 - std::pow(0.9, step)), vh = v[i] / (1 - std::pow(0.999, step));
      ref[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  auto got = p.data().to_floats();
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], ref[i], 1e-5);
}

TEST(Optim, ParametersWithoutGradientsAreSkipped) {
  Var p(Tensor::from_floats({1.0f}, {1}), true);
  optim::SGD sgd({p}, 0.1f, 0.9f, 0.0f);
  sgd.step();
  EXPECT_EQ(p.data().to_floats()[0], 1.0f);
}

TEST(Optim, BadSettingsAreUsageErrors) {
  optim::OptimizerConfig c;
  c.name = "lion";
  EXPECT_THROW(optim::make_optimizer(c, {}), UsageError);
  c.name = "sgd";
  c.lr = -1;
  EXPECT_THROW(optim::make_optimizer(c, {}), UsageError);
}

// ---- Multi-tensor steps: exactly the per-tensor results --------------------------------

// The bit patterns of a tensor's floats (NaN-safe, -0 distinct from +0).
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> out;
  for (float f : t.to_floats()) out.push_back(std::bit_cast<uint32_t>(f));
  return out;
}

// Independent copies of the same random tensors, one per size.
std::vector<Tensor> tensors(const std::vector<int64_t>& sizes, uint64_t seed, float scale = 1.0f) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back(testing::random_tensor({sizes[i]}, seed + i, scale));
  }
  return out;
}

const std::vector<int64_t> kListSizes = {1, 3, 1000, 70000, 0, 5};

TEST(Optim, SgdStepMultiIsThePerTensorStepBitForBit) {
  for (float momentum : {0.0f, 0.9f}) {
    auto p_list = tensors(kListSizes, 100), p_each = tensors(kListSizes, 100);
    auto b_list = tensors(kListSizes, 200), b_each = tensors(kListSizes, 200);
    const auto grads = tensors(kListSizes, 300);
    for (bool first : {true, false, false}) {
      ops::sgd_step_multi(p_list, grads, momentum != 0.0f ? b_list : std::vector<Tensor>{}, 0.1f,
                          momentum, 0.01f, first);
      for (size_t i = 0; i < kListSizes.size(); ++i) {
        ops::sgd_step(p_each[i], grads[i], b_each[i], 0.1f, momentum, 0.01f, first);
      }
    }
    for (size_t i = 0; i < kListSizes.size(); ++i) {
      EXPECT_EQ(bits(p_list[i]), bits(p_each[i])) << "momentum " << momentum << ", tensor " << i;
      EXPECT_EQ(bits(b_list[i]), bits(b_each[i])) << "momentum " << momentum << ", tensor " << i;
    }
  }
}

TEST(Optim, AdamwStepMultiIsThePerTensorStepBitForBit) {
  auto p_list = tensors(kListSizes, 400), p_each = tensors(kListSizes, 400);
  auto m_list = tensors(kListSizes, 500, 0.1f), m_each = tensors(kListSizes, 500, 0.1f);
  auto v_list = tensors(kListSizes, 600, 0.0f), v_each = tensors(kListSizes, 600, 0.0f);
  const auto grads = tensors(kListSizes, 700);
  for (int64_t step = 1; step <= 3; ++step) {
    ops::adamw_step_multi(p_list, grads, m_list, v_list, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step);
    for (size_t i = 0; i < kListSizes.size(); ++i) {
      ops::adamw_step(p_each[i], grads[i], m_each[i], v_each[i], 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f,
                      step);
    }
  }
  for (size_t i = 0; i < kListSizes.size(); ++i) {
    EXPECT_EQ(bits(p_list[i]), bits(p_each[i])) << "tensor " << i;
    EXPECT_EQ(bits(m_list[i]), bits(m_each[i])) << "tensor " << i;
    EXPECT_EQ(bits(v_list[i]), bits(v_each[i])) << "tensor " << i;
  }
}

TEST(Optim, MultiTensorStepsCheckTheirLists) {
  auto p = tensors({3, 4}, 800), g = tensors({3, 4}, 801), b = tensors({3, 4}, 802);
  const std::vector<Tensor> one_grad = {g[0]};
  EXPECT_THROW(ops::sgd_step_multi(p, one_grad, b, 0.1f, 0.9f, 0.0f, true), Error);
  const std::vector<Tensor> one_buf = {b[0]};
  EXPECT_THROW(ops::sgd_step_multi(p, g, one_buf, 0.1f, 0.9f, 0.0f, true), Error);
  const std::vector<Tensor> mismatched = {g[1], g[0]};
  EXPECT_THROW(ops::sgd_step_multi(p, mismatched, b, 0.1f, 0.9f, 0.0f, true), Error);
  EXPECT_THROW(ops::adamw_step_multi(p, g, b, {}, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1), Error);
  EXPECT_THROW(ops::adamw_step_multi(p, g, b, g, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0), Error);
  // Empty lists are no-ops; without momentum the buffers are not needed.
  EXPECT_NO_THROW(ops::sgd_step_multi({}, {}, {}, 0.1f, 0.9f, 0.0f, true));
  EXPECT_NO_THROW(ops::adamw_step_multi({}, {}, {}, {}, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1));
  EXPECT_NO_THROW(ops::sgd_step_multi(p, g, {}, 0.1f, 0.0f, 0.0f, false));
}

// The optimizers step through the list ops; a parameter whose first gradient comes late
// starts its momentum buffer late (its own first step), as with the per-tensor ops.
TEST(Optim, SgdOptimizerMatchesPerTensorStepsWithALateParameter) {
  const std::vector<int64_t> sizes = {3, 1000, 7};
  auto data = tensors(sizes, 900);
  auto ref = tensors(sizes, 900);
  const auto grads = tensors(sizes, 901);
  std::vector<Var> params;
  for (const Tensor& t : data) params.emplace_back(t, true);
  optim::SGD sgd(params, 0.1f, 0.9f, 0.01f);
  std::vector<Tensor> bufs(sizes.size());
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool has_grad = !(i == 1 && step == 0);  // parameter 1 joins at step 1
      params[i].set_grad(has_grad ? grads[i] : Tensor());
      if (!has_grad) continue;
      const bool first = !bufs[i].defined();
      if (first) bufs[i] = Tensor::empty({sizes[i]}, DType::F32, Device::cpu());
      ops::sgd_step(ref[i], grads[i], bufs[i], 0.1f, 0.9f, 0.01f, first);
    }
    sgd.step();
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(bits(params[i].data()), bits(ref[i])) << "parameter " << i;
  }
}

TEST(Optim, AdamWOptimizerMatchesPerTensorSteps) {
  const std::vector<int64_t> sizes = {1, 70000, 3};
  auto data = tensors(sizes, 910);
  auto ref = tensors(sizes, 910);
  const auto grads = tensors(sizes, 911);
  std::vector<Var> params;
  for (const Tensor& t : data) params.emplace_back(t, true);
  optim::AdamW adam(params, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f);
  std::vector<Tensor> m, v;
  for (int64_t size : sizes) {
    m.push_back(Tensor::zeros({size}, DType::F32, Device::cpu()));
    v.push_back(Tensor::zeros({size}, DType::F32, Device::cpu()));
  }
  for (int64_t step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      params[i].set_grad(grads[i]);
      ops::adamw_step(ref[i], grads[i], m[i], v[i], 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step);
    }
    adam.step();
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(bits(params[i].data()), bits(ref[i])) << "parameter " << i;
  }
}

}  // namespace
}  // namespace ddpb
