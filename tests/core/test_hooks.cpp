// Gradient-ready hooks: see Note [Gradient-ready hooks] in core/autograd.h.
#include <map>

#include "core/functional.h"
#include "core/nn.h"
#include "test_util.h"
#include "workloads/model.h"

namespace ddpb {
namespace {

using autograd::Var;
using testing::random_tensor;

struct HookLog {
  std::vector<std::string> order;
  std::map<std::string, std::vector<float>> grad_at_fire;
};

// Registers a hook on every parameter that logs its name and its gradient at that moment.
std::shared_ptr<HookLog> watch(const nn::Module& m) {
  auto log = std::make_shared<HookLog>();
  for (auto& p : m.named_parameters()) {
    p.var.register_grad_ready_hook([log, name = p.name](const Var& v) {
      log->order.push_back(name);
      log->grad_at_fire[name] = v.grad().to_floats();
    });
  }
  return log;
}

WorkloadSpec small_gpt() {
  WorkloadSpec s;
  s.family = "gpt";
  s.n_layer = 2;
  s.n_embd = 16;
  s.n_head = 2;
  s.seq_len = 8;
  s.vocab = 32;
  return s;
}

Tensor tokens(int64_t b, int64_t t, int64_t vocab, int salt) {
  std::vector<int32_t> v(static_cast<size_t>(b * t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 11 + salt) % vocab);
  return Tensor::from_ints(v, {b, t});
}

TEST(GradReadyHook, FiresOncePerParameterWithTheFinalGradient) {
  auto spec = find_workload("mlp-small");
  spec.in_features = 32;
  spec.hidden = {16, 16};
  auto model = make_model(spec, Device::cpu(), 1);
  auto log = watch(*model);
  for (int step = 0; step < 2; ++step) {
    log->order.clear();
    model->zero_grad();
    Tensor x = random_tensor({8, 32}, 5 + step);
    model_loss(model->forward(x), Tensor::from_ints({0, 1, 2, 3, 4, 5, 6, 7}, {8})).backward();
    auto params = model->named_parameters();
    ASSERT_EQ(log->order.size(), params.size()) << "one firing per parameter per backward";
    for (auto& p : params) {
      EXPECT_EQ(std::count(log->order.begin(), log->order.end(), p.name), 1) << p.name;
      // The gradient seen by the hook is already final.
      EXPECT_EQ(log->grad_at_fire[p.name], p.var.grad().to_floats()) << p.name;
    }
  }
}

TEST(GradReadyHook, FiresInReadinessOrderLastLayerFirst) {
  auto spec = find_workload("mlp-small");
  spec.in_features = 8;
  spec.hidden = {8, 8};
  auto model = make_model(spec, Device::cpu(), 1);
  auto log = watch(*model);
  model_loss(model->forward(random_tensor({4, 8}, 3)), Tensor::from_ints({0, 1, 2, 3}, {4}))
      .backward();
  // Backward reaches layer 2 first, then 1, then 0; a layer's weight and bias are ready
  // together, so only the layer index order is fixed.
  std::vector<int> layer_order;
  for (auto& name : log->order) layer_order.push_back(name[7] - '0');  // "layers.N."
  EXPECT_TRUE(std::is_sorted(layer_order.rbegin(), layer_order.rend()))
      << "layer order: " << ::testing::PrintToString(log->order);
  EXPECT_EQ(layer_order.front(), 2);
  EXPECT_EQ(layer_order.back(), 0);
}

TEST(GradReadyHook, TiedWeightFiresOnceAfterBothUses) {
  auto spec = small_gpt();
  auto model = make_model(spec, Device::cpu(), 7);
  auto log = watch(*model);
  Tensor x = tokens(2, 8, 32, 1), y = tokens(2, 8, 32, 5);
  model_loss(model->forward(x), y).backward();
  EXPECT_EQ(std::count(log->order.begin(), log->order.end(), "wte.weight"), 1);
  // wte is used first by the embedding and last by the LM head, so its gradient is final
  // only after the embedding's backward: it fires after every block parameter.
  auto pos = std::find(log->order.begin(), log->order.end(), "wte.weight");
  auto h0 = std::find(log->order.begin(), log->order.end(), "h.0.ln_1.weight");
  EXPECT_GT(pos - h0, 0) << ::testing::PrintToString(log->order);
  auto wte_grad = model->named_parameters()[0].var.grad().to_floats();
  EXPECT_EQ(log->grad_at_fire["wte.weight"], wte_grad);

  // Rows of wte that no input token uses still get a gradient from the LM head, and rows
  // that are used get the embedding's too: the fired gradient holds both contributions.
  // Token 31 never appears in x (ids are (11 i + 1) % 32 for i < 16), so its row is pure head.
  bool head_only_row_nonzero = false;
  for (int j = 0; j < 16; ++j) head_only_row_nonzero |= wte_grad[31 * 16 + j] != 0.0f;
  EXPECT_TRUE(head_only_row_nonzero);
}

TEST(GradReadyHook, UnusedParametersNeverFire) {
  struct TwoBranch : nn::Module {
    std::shared_ptr<nn::Linear> a, b;
    TwoBranch() {
      nn::Context ctx{Device::cpu(), 1, ""};
      a = register_module("a", std::make_shared<nn::Linear>(ctx.child("a"), 4, 3));
      b = register_module("b", std::make_shared<nn::Linear>(ctx.child("b"), 4, 3));
    }
  } net;
  auto log = watch(net);
  Var out = net.a->forward(Var(random_tensor({2, 4}, 1)));
  model_loss(out, Tensor::from_ints({0, 2}, {2})).backward();
  EXPECT_EQ(log->order.size(), 2u);
  for (auto& name : log->order) EXPECT_EQ(name.substr(0, 2), "a.");
  EXPECT_FALSE(net.b->weight().grad().defined());
}

TEST(GradReadyHook, AccumulatesAcrossBackwardsIntoExistingGradient) {
  Var w(random_tensor({3}, 2), true);
  int fired = 0;
  w.register_grad_ready_hook([&](const Var&) { ++fired; });
  for (int i = 0; i < 2; ++i) {
    fn::add(w, w).backward(Tensor::from_floats({1, 1, 1}, {3}));
  }
  EXPECT_EQ(fired, 2);
  EXPECT_EQ(w.grad().to_floats(), (std::vector<float>{4, 4, 4}));
}

}  // namespace
}  // namespace ddpb
