// workloads/training_gemms.h: the GEMM list of a training step, checked against the shapes
// worked out by hand and against the model's own FLOP count.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "workloads/model.h"
#include "workloads/training_gemms.h"

namespace ddpb {
namespace {

std::map<std::string, TrainingGemm> by_name(const std::vector<TrainingGemm>& gemms) {
  std::map<std::string, TrainingGemm> m;
  for (const auto& g : gemms) EXPECT_TRUE(m.emplace(g.name(), g).second) << g.name();
  return m;
}

TEST(TrainingGemms, MlpSmallAsWorkedOutByHand) {
  // 1024 -> 1024 x3 -> 10 at batch 64; the first layer has no dx.
  const auto m = by_name(training_gemms(find_workload("mlp-small"), 64));
  ASSERT_EQ(m.size(), 6u);
  const TrainingGemm& fwd = m.at("fwd_hidden");
  EXPECT_EQ(std::tie(fwd.m, fwd.n, fwd.k, fwd.calls), std::make_tuple(64, 1024, 1024, 3));
  EXPECT_TRUE(fwd.trans_b && !fwd.trans_a && fwd.bias);
  EXPECT_EQ(fwd.act, ops::Activation::ReLU);
  EXPECT_EQ(m.at("dx_hidden").calls, 2);
  const TrainingGemm& dw = m.at("dw_hidden");
  EXPECT_EQ(std::tie(dw.m, dw.n, dw.k, dw.calls), std::make_tuple(1024, 1024, 64, 3));
  EXPECT_TRUE(dw.trans_a && !dw.trans_b && !dw.bias);
  const TrainingGemm& head = m.at("fwd_head");
  EXPECT_EQ(std::tie(head.m, head.n, head.k, head.calls), std::make_tuple(64, 10, 1024, 1));
  EXPECT_EQ(head.act, ops::Activation::None);
  EXPECT_EQ(m.at("dx_head").n, 1024);
  EXPECT_EQ(m.at("dw_head").m, 10);
}

TEST(TrainingGemms, MlpWideNamesItsDifferentFirstLayer) {
  const auto m = by_name(training_gemms(find_workload("mlp-wide"), 64));
  EXPECT_EQ(m.at("fwd_in").k, 4096);
  EXPECT_EQ(m.count("dx_in"), 0u);
  EXPECT_EQ(m.at("fwd_hidden").calls, 2);
  EXPECT_EQ(m.at("dx_hidden").calls, 2);
}

TEST(TrainingGemms, GptAndEmbed) {
  const auto gpt = by_name(training_gemms(find_workload("gpt-tiny"), 8));
  EXPECT_EQ(gpt.size(), 15u);  // 5 layers x fwd/dx/dw
  const TrainingGemm& fc = gpt.at("fwd_c_fc");
  EXPECT_EQ(std::tie(fc.m, fc.n, fc.k, fc.calls), std::make_tuple(512, 512, 128, 2));
  EXPECT_FALSE(gpt.at("fwd_lm_head").bias) << "the LM head is tied to wte";
  EXPECT_EQ(gpt.at("fwd_lm_head").calls, 1);
  const auto embed = by_name(training_gemms(find_workload("embed"), 64));
  EXPECT_EQ(embed.size(), 6u);
  EXPECT_EQ(embed.at("dx_head0").calls, 1) << "the embedding table needs the head's dx";
}

// Every GEMM's FLOPs, weighted by calls, add up to the workload's training FLOPs per sample
// times the batch (MLP: exactly; the model also counts the bias-free skip of mlp-skip, and
// gpt its attention, which are not GEMMs here).
TEST(TrainingGemms, FlopsMatchTheModelsCountForTheMlp) {
  const WorkloadSpec& spec = find_workload("mlp-small");
  double flops = 0;
  for (const auto& g : training_gemms(spec, 64)) flops += g.calls * g.flops();
  auto model = make_model(spec, Device::cpu(), 1);
  // The model counts 3 x forward (dx for every layer); the list has no dx for layer 0.
  const double first_layer_dx = 2.0 * 64 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(flops + first_layer_dx, 64 * model->train_flops_per_sample());
}

}  // namespace
}  // namespace ddpb

namespace ddpb {
namespace {

// The estimate that bounds a run's memory before anything is allocated is the real count.
TEST(ParameterCount, TheEstimateFromTheSpecIsWhatTheModelHolds) {
  for (const auto& spec : workload_presets()) {
    if (spec.gpu_size) continue;  // too big to build here; same formulas
    auto model = make_model(spec, Device::cpu(), 0);
    int64_t n = 0;
    for (auto& p : model->named_parameters()) n += p.var.data().numel();
    EXPECT_EQ(estimated_parameter_count(spec), n) << spec.name;
  }
}

}  // namespace
}  // namespace ddpb
