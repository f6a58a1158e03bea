// Note [Workload families]: a family added from outside the table (here: "softmax-regression",
// one Linear layer) is a workload like any other — found by name, its model and dataset
// built, its estimates right, trained by a step — with nothing else changed. And the
// built-in table itself: every preset's family exists, and the traits say what the code
// used to decide by family name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/optim.h"
#include "data/synthetic.h"
#include "workloads/family.h"

namespace ddpb {
namespace {

class SoftmaxRegression final : public Model {
 public:
  SoftmaxRegression(const WorkloadSpec& spec, const Device& device, uint64_t seed)
      : fc_(register_module("fc", std::make_shared<nn::Linear>(nn::Context{device, seed, "fc"},
                                                               spec.in_features, spec.classes))) {}
  autograd::Var forward(const Tensor& x) const override { return fc_->forward(autograd::Var(x)); }
  double train_flops_per_sample() const override { return 0; }

 private:
  std::shared_ptr<nn::Linear> fc_;
};

WorkloadFamily softmax_regression_family() {
  WorkloadFamily f;
  f.name = "softmax-regression";
  f.default_batch = 16;
  f.make_model = make_model_of<SoftmaxRegression>();
  f.make_dataset = [](const WorkloadSpec& s, uint64_t seed) {
    return std::shared_ptr<const Dataset>(std::make_shared<ClassificationDataset>(
        s.dataset_size, static_cast<int>(s.in_features), static_cast<int>(s.classes), seed));
  };
  f.parameter_count = [](const WorkloadSpec& s) { return s.in_features * s.classes + s.classes; };
  f.training_gemms = [](const WorkloadSpec& s, int64_t batch) {
    std::vector<TrainingGemm> out;
    add_linear_gemms(out, s.name, "fc", batch, s.in_features, s.classes, true,
                     ops::Activation::None, 1, false);
    return out;
  };
  f.batch_shapes = [](const WorkloadSpec& s, int64_t b) {
    return BatchShapes{{b, s.in_features}, DType::F32, {b, s.classes}};
  };
  return f;
}

TEST(WorkloadFamilies, AFamilyAddedFromOutsideTheTableIsAWorkloadLikeAnyOther) {
  register_workload_family(softmax_regression_family());
  register_workload_preset({.name = "softmax-tiny",
                            .family = "softmax-regression",
                            .description = "one Linear 20 -> 3",
                            .dataset_size = 256,
                            .in_features = 20,
                            .classes = 3});
  const WorkloadSpec& spec = find_workload("softmax-tiny");
  EXPECT_EQ(default_global_batch("softmax-tiny"), 16);
  auto model = make_model(spec, Device::cpu(), 7);
  int64_t params = 0;
  for (auto& p : model->named_parameters()) params += p.var.data().numel();
  EXPECT_EQ(estimated_parameter_count(spec), params);
  EXPECT_EQ(params, 20 * 3 + 3);
  ASSERT_EQ(training_gemms(spec, 16).size(), 2u);  // fwd and dw: the input needs no dx

  auto data = make_dataset(spec, 7);
  const Batch batch = make_batch(*data, {0, 1, 2, 3});
  const BatchShapes shapes = family_of(spec).batch_shapes(spec, 4);
  EXPECT_EQ(batch.x.shape(), shapes.input);
  optim::SGD sgd(model->parameters(), /*lr=*/0.5f, /*momentum=*/0.0f, /*weight_decay=*/0.0f);
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    sgd.zero_grad();
    autograd::Var loss = model_loss(model->forward(batch.x), batch.y);
    EXPECT_EQ(model->forward(batch.x).data().shape(), shapes.logits);
    loss.backward();
    sgd.step();
    (step == 0 ? first : last) = loss.data().item();
  }
  EXPECT_LT(last, first) << "20 SGD steps on 4 samples did not lower the loss";
  const nlohmann::json listed = preset_json(spec);
  EXPECT_EQ(listed.at("family"), "softmax-regression");
  EXPECT_EQ(listed.at("parameters"), 63);
}

TEST(WorkloadFamilies, NamesAlreadyTakenAndUnknownFamiliesAreRefused) {
  EXPECT_THROW(register_workload_family(workload_family("mlp")), Error);
  EXPECT_THROW(register_workload_preset({.name = "mlp-small", .family = "mlp"}), Error);
  EXPECT_THROW(register_workload_preset({.name = "new-one", .family = "no-such-family"}), Error);
  WorkloadFamily incomplete;
  incomplete.name = "incomplete";
  EXPECT_THROW(register_workload_family(incomplete), Error);
}

TEST(WorkloadFamilies, TheTableHoldsTheTraitsTheCodeDecidesBy) {
  for (const auto& spec : workload_presets()) {
    const WorkloadFamily& f = family_of(spec);
    SCOPED_TRACE(spec.name);
    EXPECT_EQ(f.traits.batch_norm, spec.family == "resnet");
    EXPECT_EQ(f.traits.images, spec.family == "resnet");
    EXPECT_EQ(f.traits.graph_capturable, spec.family != "resnet");
    EXPECT_EQ(preset_json(spec).at("default_batch"), f.default_batch);
  }
  EXPECT_EQ(default_global_batch("mlp-small"), 64);
  EXPECT_EQ(default_global_batch("gpt-tiny"), 8);
  EXPECT_EQ(default_global_batch("embed"), 64);
  EXPECT_EQ(default_global_batch("resnet-tiny"), 32);
}

// The units a sharded design wraps (a transformer block, a ResNet block) run their forward
// hooks (Note [Module forward hooks]): once per block and forward, in forward order.
TEST(WorkloadFamilies, BlocksRunTheirForwardHooks) {
  for (const auto& [workload, prefix] : std::vector<std::pair<std::string, std::string>>{
           {"gpt-tiny", "h."}, {"resnet-tiny", "layer"}}) {
    SCOPED_TRACE(workload);
    const WorkloadSpec& spec = find_workload(workload);
    auto model = make_model(spec, Device::cpu(), 7);
    std::vector<std::string> ran;
    std::vector<autograd::HookHandle> handles;
    for (auto& [name, module] : model->named_modules()) {
      // "h.0" or "layer1.0": a block itself, not one of its parts.
      const bool block = name.starts_with(prefix) &&
                         std::count(name.begin(), name.end(), '.') == 1 &&
                         std::isdigit(static_cast<unsigned char>(name.back()));
      if (!block) continue;
      handles.push_back(module->register_forward_pre_hook(
          [&ran, n = name](const nn::Module&) { ran.push_back(n); }));
    }
    ASSERT_FALSE(handles.empty());
    auto data = make_dataset(spec, 7);
    const Batch batch = make_batch(*data, {0, 1});
    model->forward(batch.x);
    EXPECT_EQ(ran.size(), handles.size()) << "each block once";
    EXPECT_TRUE(std::is_sorted(ran.begin(), ran.end())) << "in forward order";
  }
}

// WorkloadFamily::blocks, what FSDP wraps as units (Note [FSDP's step]): every block's modules
// exist in the model, no module is in two blocks, each runs its forward hooks once a forward,
// and the blocks run in the order listed; mlp-skip's data-dependent `skip` is in none.
TEST(WorkloadFamilies, BlocksAreDisjointModulesThatRunTheirHooksInForwardOrder) {
  for (const std::string workload :
       {"mlp-small", "mlp-skip", "gpt-tiny", "resnet-tiny", "embed-tiny"}) {
    SCOPED_TRACE(workload);
    const WorkloadSpec& spec = find_workload(workload);
    auto model = make_model(spec, Device::cpu(), 7);
    std::map<std::string, nn::Module*> modules;
    for (auto& [name, module] : model->named_modules()) modules.emplace(name, module);
    const std::vector<std::vector<std::string>> blocks = family_of(spec).blocks(spec);
    ASSERT_GE(blocks.size(), 2u);
    std::vector<std::string> listed, ran;
    std::vector<autograd::HookHandle> handles;
    for (const std::vector<std::string>& block : blocks) {
      ASSERT_FALSE(block.empty());
      for (const std::string& name : block) {
        ASSERT_TRUE(modules.contains(name)) << name << " is no module of " << workload;
        EXPECT_EQ(std::count(listed.begin(), listed.end(), name), 0) << name << " twice";
        listed.push_back(name);
        handles.push_back(modules[name]->register_forward_pre_hook(
            [&ran, name](const nn::Module&) { ran.push_back(name); }));
      }
    }
    EXPECT_EQ(std::count(listed.begin(), listed.end(), "skip"), 0);
    auto data = make_dataset(spec, 7);
    model->forward(make_batch(*data, {0, 1}).x);
    EXPECT_EQ(ran, listed) << "each block's modules once, in forward order";
  }
  // Blocks are optional: a family registered without them (softmax-regression above) has none.
  WorkloadFamily plain = softmax_regression_family();
  plain.name = "softmax-without-blocks";
  register_workload_family(plain);
  EXPECT_TRUE(workload_family("softmax-without-blocks").blocks(find_workload("mlp-small")).empty());
}

}  // namespace
}  // namespace ddpb
