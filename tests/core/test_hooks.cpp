// Gradient-ready hooks: see Note [Gradient-ready hooks] in core/autograd.h. Module forward
// hooks, pre-backward hooks and freeable parameters, FSDP's prerequisites: Note [Module
// forward hooks] in core/nn.h, Note [Pre-backward hooks] and Note [Freeable parameters] in
// core/autograd.h.
#include <map>
#include <thread>

#include "../util/error_of.h"
#include "core/allocator.h"
#include "core/optim.h"

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

// ---- Module forward hooks (Note [Module forward hooks]) ----------------------------------

// A Sequential of Linears (fused ReLU between), its forward run through with_forward_hooks
// as an FSDP unit's would be. Parameters "0.weight", "0.bias", "1.weight", ...
struct Stack final : nn::Module {
  std::vector<std::shared_ptr<nn::Linear>> layers;
  explicit Stack(const std::vector<int64_t>& sizes, uint64_t seed = 1,
                 const Device& device = Device::cpu()) {
    nn::Context ctx{device, seed, ""};
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      const std::string name = std::to_string(i);
      layers.push_back(register_module(
          name, std::make_shared<nn::Linear>(ctx.child(name), sizes[i], sizes[i + 1])));
    }
  }
  Var forward(const Var& x) const {
    return with_forward_hooks([&] {
      Var h = x;
      for (size_t i = 0; i < layers.size(); ++i) {
        const bool last = i + 1 == layers.size();
        h = layers[i]->forward(h, last ? ops::Activation::None : ops::Activation::ReLU);
      }
      return h;
    });
  }
};

Tensor labels(int64_t n, int64_t classes) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 7 + 3) % classes);
  return Tensor::from_ints(v, {n});
}

TEST(ModuleForwardHook, PreAndPostRunAroundTheForwardInRegistrationOrder) {
  nn::Linear lin(nn::Context{Device::cpu(), 1, "fc"}, 4, 3);
  std::vector<std::string> log;
  Var seen_output;
  const nn::Module* seen_module = nullptr;
  lin.register_forward_pre_hook([&](const nn::Module& m) {
    seen_module = &m;
    log.push_back("pre A");
  });
  lin.register_forward_pre_hook([&](const nn::Module&) { log.push_back("pre B"); });
  lin.register_forward_hook([&](const nn::Module&, const std::vector<Var>& outputs) {
    ASSERT_EQ(outputs.size(), 1u);
    seen_output = outputs[0];
    log.push_back("post A");
  });
  lin.register_forward_hook(
      [&](const nn::Module&, const std::vector<Var>&) { log.push_back("post B"); });
  Var y = lin.forward(Var(random_tensor({2, 4}, 1)));
  EXPECT_EQ(log, (std::vector<std::string>{"pre A", "pre B", "post A", "post B"}));
  EXPECT_EQ(seen_module, &lin);
  EXPECT_EQ(seen_output.impl(), y.impl()) << "the forward hook sees the output itself";
  lin.forward(Var(random_tensor({2, 4}, 2)));
  EXPECT_EQ(log.size(), 8u) << "every forward runs them";
}

TEST(ModuleForwardHook, NestedModulesBracketTheirChildren) {
  Stack net({4, 5, 6, 3});
  std::vector<std::string> log;
  auto watch_unit = [&](nn::Module& m, const std::string& name) {
    m.register_forward_pre_hook([&log, name](const nn::Module&) { log.push_back(name + " pre"); });
    m.register_forward_hook([&log, name](const nn::Module&, const std::vector<Var>&) {
      log.push_back(name + " post");
    });
  };
  watch_unit(net, "stack");
  for (size_t i = 0; i < net.layers.size(); ++i) watch_unit(*net.layers[i], std::to_string(i));
  net.forward(Var(random_tensor({2, 4}, 1)));
  EXPECT_EQ(log, (std::vector<std::string>{"stack pre", "0 pre", "0 post", "1 pre", "1 post",
                                           "2 pre", "2 post", "stack post"}));
}

TEST(ModuleForwardHook, RemovedHooksDoNotRun) {
  nn::Linear lin(nn::Context{Device::cpu(), 1, "fc"}, 4, 3);
  int a = 0, b = 0, once = 0;
  auto ha = lin.register_forward_pre_hook([&](const nn::Module&) { ++a; });
  lin.register_forward_hook([&](const nn::Module&, const std::vector<Var>&) { ++b; });
  // A hook may remove itself while the hooks run (a one-shot hook).
  auto hook_once = std::make_shared<autograd::HookHandle>();
  *hook_once = lin.register_forward_pre_hook([&once, hook_once](const nn::Module&) {
    ++once;
    hook_once->remove();
  });
  Var x(random_tensor({2, 4}, 1));
  lin.forward(x);
  ha.remove();
  ha.remove();  // a second remove does nothing
  lin.forward(x);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(once, 1);
  lin.clear_forward_hooks();
  lin.forward(x);
  EXPECT_EQ(b, 2);

  // A handle may outlive its module.
  autograd::HookHandle orphan;
  {
    nn::Linear gone(nn::Context{Device::cpu(), 1, "gone"}, 4, 3);
    orphan = gone.register_forward_hook([](const nn::Module&, const std::vector<Var>&) {});
  }
  orphan.remove();
}

TEST(ModuleForwardHook, ACallerRunsTheHooksOfAModuleThatDoesNotOptIn) {
  // A workload's Model runs its forward without the wrapper; its caller wraps the call. The
  // Linears inside run their own hooks either way.
  auto spec = find_workload("mlp-small");
  spec.in_features = 8;
  spec.hidden = {8};
  auto model = make_model(spec, Device::cpu(), 1);
  std::vector<std::string> log;
  model->register_forward_pre_hook([&](const nn::Module&) { log.push_back("model pre"); });
  model->register_forward_hook(
      [&](const nn::Module&, const std::vector<Var>&) { log.push_back("model post"); });
  int inner = 0;
  model->apply([&](nn::Module& m) {
    if (dynamic_cast<nn::Linear*>(&m))
      m.register_forward_pre_hook([&](const nn::Module&) { ++inner; });
  });
  Tensor x = random_tensor({2, 8}, 1);
  model->forward(x);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(inner, 2);
  model->with_forward_hooks([&] { return model->forward(x); });
  EXPECT_EQ(log, (std::vector<std::string>{"model pre", "model post"}));
  EXPECT_EQ(inner, 4);
}

// ---- Pre-backward hooks (Note [Pre-backward hooks]) -------------------------------------

TEST(PreBackwardHook, FiresWithTheCompleteGradientBeforeTheProducerRuns) {
  nn::Linear lin(nn::Context{Device::cpu(), 1, "fc"}, 4, 3);
  std::vector<std::string> log;
  lin.weight().register_grad_ready_hook([&](const Var&) { log.push_back("weight ready"); });
  Var h = lin.forward(Var(random_tensor({2, 4}, 1)));
  std::vector<float> grad_seen;
  h.register_grad_hook([&](const Tensor& g) {
    log.push_back("h grad");
    grad_seen = g.to_floats();
  });
  // h has two consumers: the hook sees their contributions summed.
  fn::add(h, h).backward(Tensor::from_floats(std::vector<float>(6, 1.0f), {2, 3}));
  EXPECT_EQ(log, (std::vector<std::string>{"h grad", "weight ready"}));
  EXPECT_EQ(grad_seen, std::vector<float>(6, 2.0f));
}

TEST(PreBackwardHook, UnitsFireInReverseForwardOrderBeforeTheirParametersAreReady) {
  Stack net({6, 5, 5, 4});
  std::vector<std::string> log;  // "pre N" and "ready N" (N: the unit)
  for (size_t i = 0; i < net.layers.size(); ++i) {
    const std::string unit = std::to_string(i);
    net.layers[i]->register_forward_hook([&log, unit](const nn::Module&,
                                                      const std::vector<Var>& outputs) {
      autograd::register_multi_grad_hook(outputs, [&log, unit] { log.push_back("pre " + unit); });
    });
    for (auto& p : net.layers[i]->parameters())
      p.register_grad_ready_hook([&log, unit](const Var&) { log.push_back("ready " + unit); });
  }
  for (int step = 0; step < 2; ++step) {
    log.clear();
    Var loss = model_loss(net.forward(Var(random_tensor({3, 6}, 10 + step))), labels(3, 4));
    loss.backward();
    EXPECT_EQ(log, (std::vector<std::string>{"pre 2", "ready 2", "ready 2", "pre 1", "ready 1",
                                             "ready 1", "pre 0", "ready 0", "ready 0"}))
        << "step " << step;
  }
}

// A unit with two outputs: h = fc(x), then relu(h) and gelu(h).
struct TwoOutputs final : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  TwoOutputs() {
    nn::Context ctx{Device::cpu(), 3, ""};
    fc = register_module("fc", std::make_shared<nn::Linear>(ctx.child("fc"), 4, 3));
  }
  std::vector<Var> forward(const Var& x) const {
    return with_forward_hooks([&] {
      Var h = fc->forward(x);
      return std::vector<Var>{fn::relu(h), fn::gelu(h)};
    });
  }
};

TEST(PreBackwardHook, SeveralOutputsFireOncePerBackwardBeforeTheUnit) {
  TwoOutputs unit;
  std::vector<std::string> log;
  unit.register_forward_hook([&](const nn::Module&, const std::vector<Var>& outputs) {
    EXPECT_EQ(outputs.size(), 2u);
    autograd::register_multi_grad_hook(outputs, [&] { log.push_back("pre unit"); });
  });
  unit.fc->weight().register_grad_ready_hook([&](const Var&) { log.push_back("fc ready"); });
  auto outs = unit.forward(Var(random_tensor({2, 4}, 1)));
  Var loss = model_loss(fn::add(outs[0], outs[1]), labels(2, 3));
  loss.backward();
  EXPECT_EQ(log, (std::vector<std::string>{"pre unit", "fc ready"}));
  // The same graph again: once more.
  loss.backward();
  EXPECT_EQ(log, (std::vector<std::string>{"pre unit", "fc ready", "pre unit", "fc ready"}));
  // Only one output used: still once, still first.
  log.clear();
  auto again = unit.forward(Var(random_tensor({2, 4}, 2)));
  model_loss(again[1], labels(2, 3)).backward();
  EXPECT_EQ(log, (std::vector<std::string>{"pre unit", "fc ready"}));
}

TEST(PreBackwardHook, RemovedHooksDoNotFireAndLeavesAreRefused) {
  nn::Linear lin(nn::Context{Device::cpu(), 1, "fc"}, 4, 3);
  Var h = lin.forward(Var(random_tensor({2, 4}, 1)));
  Var g = fn::relu(h);
  int single = 0, multi = 0;
  auto hs = h.register_grad_hook([&](const Tensor&) { ++single; });
  auto hm = autograd::register_multi_grad_hook({h, g}, [&] { ++multi; });
  Tensor ones = Tensor::from_floats(std::vector<float>(6, 1.0f), {2, 3});
  g.backward(ones);
  EXPECT_EQ(single, 1);
  EXPECT_EQ(multi, 1);
  hs.remove();
  hm.remove();
  g.backward(ones);
  EXPECT_EQ(single, 1);
  EXPECT_EQ(multi, 1);
  EXPECT_THROW(lin.weight().register_grad_hook([](const Tensor&) {}), Error);
  EXPECT_THROW(Var(random_tensor({2}, 1)).register_grad_hook([](const Tensor&) {}), Error);
  // Nothing that needs a gradient: nothing to fire, nothing to remove.
  autograd::register_multi_grad_hook({Var(random_tensor({2}, 1)), lin.weight()}, [] {}).remove();
}

TEST(PreBackwardHook, ConcurrentBackwardsOnSeparateGraphsFireOnTheirOwnThreads) {
  // As DP's replicas: a module and a graph per thread, run at the same time.
  std::atomic<int> fired{0};
  std::atomic<bool> wrong_thread{false};
  auto worker = [&](int salt) {
    nn::Linear lin(nn::Context{Device::cpu(), 1, "fc"}, 8, 4);
    const auto me = std::this_thread::get_id();
    lin.register_forward_hook([&, me](const nn::Module&, const std::vector<Var>& outputs) {
      autograd::register_multi_grad_hook(outputs, [&, me] {
        if (std::this_thread::get_id() != me) wrong_thread = true;
        ++fired;
      });
    });
    for (int step = 0; step < 20; ++step) {
      Var h = lin.forward(Var(random_tensor({4, 8}, static_cast<uint64_t>(salt * 100 + step))));
      fn::relu(h).backward(Tensor::from_floats(std::vector<float>(16, 1.0f), {4, 4}));
    }
  };
  std::thread a(worker, 1), b(worker, 2);
  a.join();
  b.join();
  EXPECT_EQ(fired.load(), 40);
  EXPECT_FALSE(wrong_thread.load());
}

// ---- Freeable parameters (Note [Freeable parameters]) -----------------------------------

TEST(AutogradFreeableParameter, FreeReleasesTheMemoryAndKeepsShapeAndIdentity) {
  const Device device = Device::cpu(6);  // an allocator no other test uses
  auto& allocator = device_allocator(device);
  nn::Linear lin(nn::Context{device, 1, "fc"}, 128, 64);
  const Var w = lin.weight();
  const autograd::VarImpl* identity = w.impl();
  const MemoryStats before = allocator.stats();
  const auto parameter_bytes = [&] {
    return allocator.stats().current_by_category[static_cast<size_t>(MemoryCategory::Parameters)];
  };

  w.free_storage();
  EXPECT_TRUE(w.storage_freed());
  const int64_t freed = allocator.stats().current_bytes;
  EXPECT_EQ(freed, before.current_bytes - int64_t(CachingAllocator::round_size(128 * 64 * 4)));
  EXPECT_EQ(w.shape(), (Shape{64, 128}));
  EXPECT_EQ(w.data().dtype(), DType::F32);
  EXPECT_EQ(w.data().device(), device);
  EXPECT_EQ(lin.named_parameters()[0].var.impl(), identity);
  w.free_storage();  // already freed: nothing
  EXPECT_EQ(allocator.stats().current_bytes, freed);

  const int64_t parameters_while_freed = parameter_bytes();
  w.restore_storage();
  EXPECT_FALSE(w.storage_freed());
  EXPECT_EQ(allocator.stats().current_bytes, before.current_bytes);
  EXPECT_EQ(parameter_bytes(), parameters_while_freed + 128 * 64 * 4) << "filed as parameters";
  w.restore_storage();  // already allocated: nothing
  EXPECT_EQ(allocator.stats().current_bytes, before.current_bytes);
  EXPECT_EQ(lin.weight().impl(), identity);
}

TEST(AutogradFreeableParameter, UsingAFreedParameterThrowsNamingIt) {
  nn::Linear lin(nn::Context{Device::cpu(), 1, "h.0.fc"}, 4, 3);
  lin.weight().free_storage();
  Var x(random_tensor({2, 4}, 1));
  const std::string forward = testing::error_of<Error>([&] { lin.forward(x); });
  EXPECT_NE(forward.find("parameter 'h.0.fc.weight'"), std::string::npos) << forward;
  EXPECT_NE(forward.find("freed"), std::string::npos) << forward;
  EXPECT_NE(
      testing::error_of<Error>([&] { lin.weight().data().to_floats(); }).find("h.0.fc.weight"),
      std::string::npos);
  // An optimizer step reads it too.
  lin.weight().set_grad(Tensor::zeros({3, 4}, DType::F32, Device::cpu()));
  optim::SGD sgd({lin.weight()}, 0.1f, 0.9f, 0.0f);
  EXPECT_NE(testing::error_of<Error>([&] { sgd.step(); }).find("h.0.fc.weight"), std::string::npos);
  // A Var without a name is described by its tensor.
  Var unnamed(random_tensor({5}, 2), true);
  unnamed.free_storage();
  EXPECT_NE(
      testing::error_of<Error>([&] { fn::relu(unnamed); }).find("a parameter f32[5] on cpu:0"),
      std::string::npos);
}

TEST(AutogradFreeableParameter, FreedAfterForwardRestoredBeforeBackward) {
  // Autograd saved the weights in forward; freeing releases their memory under the saved
  // tensors, and restoring (values written again) makes them whole for backward.
  Stack ref({6, 5, 4}, 4), net({6, 5, 4}, 4);
  Tensor x = random_tensor({3, 6}, 1);
  model_loss(ref.forward(Var(x)), labels(3, 4)).backward();
  std::map<std::string, Tensor> kept;
  for (auto& p : net.named_parameters()) kept[p.name] = p.var.data().clone();
  Var loss = model_loss(net.forward(Var(x)), labels(3, 4));
  for (auto& p : net.parameters()) p.free_storage();
  const std::string error = testing::error_of<Error>([&] { loss.backward(); });
  EXPECT_NE(error.find("parameter '1.weight'"), std::string::npos) << error;
  for (auto& p : net.named_parameters()) {
    p.var.restore_storage();
    ops::copy(kept[p.name], p.var.data());
  }
  loss.backward();
  auto want = ref.named_parameters();
  auto got = net.named_parameters();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].var.grad().to_floats(), want[i].var.grad().to_floats()) << want[i].name;
}

// FSDP's cycle on a Stack whose Linears are the units: a unit's parameters are gathered
// (restored, values copied from a kept copy as an all-gather would) in its pre-forward hook,
// freed in its forward hook, which also hooks its outputs to gather them again before its
// backward. Losses, gradients and SGD steps equal those of the same model never freed.
TEST(AutogradFreeableParameter, FsdpCycleMatchesTheModelNeverFreed) {
  Stack ref({6, 5, 5, 4}, 9), net({6, 5, 5, 4}, 9);
  std::map<const autograd::VarImpl*, Tensor> kept;
  for (auto& p : net.parameters()) kept[p.impl()] = p.data().clone();
  auto gather = [&kept](const nn::Module& unit) {
    for (auto& p : unit.parameters()) {
      p.restore_storage();
      ops::copy(kept[p.impl()], p.data());
    }
  };
  auto free_all = [](const nn::Module& unit) {
    for (auto& p : unit.parameters()) p.free_storage();
  };
  int ready = 0, freed_at_ready = 0;
  for (auto& layer : net.layers) {
    layer->register_forward_pre_hook(gather);
    layer->register_forward_hook([&](const nn::Module& unit, const std::vector<Var>& outputs) {
      free_all(unit);
      autograd::register_multi_grad_hook(outputs, [&gather, u = &unit] { gather(*u); });
    });
    for (auto& p : layer->parameters()) {
      p.register_grad_ready_hook([&](const Var& v) {
        ++ready;
        freed_at_ready += v.storage_freed();
      });
    }
  }
  free_all(net);
  optim::SGD ref_sgd(ref.parameters(), 0.1f, 0.9f, 0.0f), sgd(net.parameters(), 0.1f, 0.9f, 0.0f);
  for (int step = 0; step < 3; ++step) {
    Tensor x = random_tensor({3, 6}, 20 + step);
    Var ref_loss = model_loss(ref.forward(Var(x)), labels(3, 4));
    ref_loss.backward();
    Var loss = model_loss(net.forward(Var(x)), labels(3, 4));
    for (auto& p : net.parameters()) EXPECT_TRUE(p.storage_freed()) << "step " << step;
    loss.backward();
    EXPECT_EQ(loss.data().item(), ref_loss.data().item()) << "step " << step;
    EXPECT_EQ(ready, 6 * (step + 1));
    EXPECT_EQ(freed_at_ready, 0) << "every unit gathered before its backward";
    // The gradients do not depend on the parameters' memory.
    free_all(net);
    auto want = ref.named_parameters();
    auto got = net.named_parameters();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].var.grad().to_floats(), want[i].var.grad().to_floats()) << want[i].name;
    }
    // The optimizer steps the same Vars once gathered.
    gather(net);
    ref_sgd.step();
    sgd.step();
    ref_sgd.zero_grad();
    sgd.zero_grad();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].var.data().to_floats(), want[i].var.data().to_floats()) << want[i].name;
      kept[got[i].var.impl()] = got[i].var.data().clone();
    }
    free_all(net);
  }
}

TEST(AutogradFreeableParameter, ViewsAreFreedWithTheirBufferAndRestoredByRebinding) {
  Var a(random_tensor({4}, 1), true), b(random_tensor({6}, 2), true);
  a.set_name("a");
  Tensor flat = Tensor::empty({10}, DType::F32, Device::cpu());
  ops::copy(a.data(), flat.flat_view(0, {4}));
  ops::copy(b.data(), flat.flat_view(4, {6}));
  const auto a_values = a.data().to_floats();
  a.set_data(flat.flat_view(0, {4}));
  b.set_data(flat.flat_view(4, {6}));
  const std::string alone = testing::error_of<Error>([&] { a.free_storage(); });
  EXPECT_NE(alone.find("view into a larger buffer"), std::string::npos) << alone;
  EXPECT_FALSE(a.storage_freed());

  flat.storage()->release("unit 0's flat buffer");
  EXPECT_TRUE(a.storage_freed());
  EXPECT_TRUE(b.storage_freed());
  EXPECT_NE(testing::error_of<Error>([&] { fn::relu(b); }).find("unit 0's flat buffer"),
            std::string::npos);

  // Gathered into a new buffer: rebind to views of it.
  Tensor gathered = Tensor::empty({10}, DType::F32, Device::cpu());
  ops::copy(Tensor::from_floats(a_values, {4}), gathered.flat_view(0, {4}));
  ops::zero(gathered.flat_view(4, {6}));
  int fired = 0;
  a.register_grad_ready_hook([&](const Var&) { ++fired; });
  a.restore_storage(gathered.flat_view(0, {4}));
  b.restore_storage(gathered.flat_view(4, {6}));
  EXPECT_FALSE(a.storage_freed());
  EXPECT_EQ(a.data().to_floats(), a_values);
  fn::relu(a).backward(Tensor::from_floats({1, 1, 1, 1}, {4}));
  EXPECT_EQ(fired, 1);

  EXPECT_THROW(a.restore_storage(random_tensor({5}, 1)), Error);
  Tensor released = Tensor::empty({4}, DType::F32, Device::cpu());
  released.storage()->release("another buffer");
  EXPECT_THROW(a.restore_storage(released), Error);
}

}  // namespace
}  // namespace ddpb
