// Optimizer updates against PyTorch's formulas, computed by hand in double.
#include <cmath>

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

}  // namespace
}  // namespace ddpb
