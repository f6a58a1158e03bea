// Note [Model-state memory]: the formulas by trait, their projection to another world size,
// and the measured/expected ratios a run record carries.
#include "reports/memory_model.h"

#include <gtest/gtest.h>

namespace ddpb::reports {
namespace {

DesignInfo design(bool shards_gradients, bool shards_optimizer_state) {
  DesignInfo d;
  d.name = "d";
  d.shards_gradients = shards_gradients;
  d.shards_optimizer_state = shards_optimizer_state;
  return d;
}

TEST(MemoryModel, TheZeroPapersTableInFp32WithAdamW) {
  const int64_t psi = 1000000;
  const DesignInfo ddp = design(false, false), zero1 = design(false, true),
                   zero2 = design(true, true);
  for (int n : {1, 2, 8}) {
    EXPECT_EQ(total_bytes(expected_model_state(ddp, psi, n, 8.0)), 16 * psi) << n;
    EXPECT_EQ(total_bytes(expected_model_state(zero1, psi, n, 8.0)), 8 * psi + 8 * psi / n) << n;
    EXPECT_EQ(total_bytes(expected_model_state(zero2, psi, n, 8.0)), 4 * psi + 12 * psi / n) << n;
  }
  const NamedValues<int64_t> z2 = expected_model_state(zero2, psi, 4, 8.0);
  EXPECT_EQ(named_value(z2, "parameters"), 4 * psi);
  EXPECT_EQ(named_value(z2, "gradients"), psi);
  EXPECT_EQ(named_value(z2, "optimizer_state"), 2 * psi);
}

TEST(MemoryModel, OptimizerStateBytesPerParameter) {
  EXPECT_EQ(optimizer_state_bytes_per_parameter("adamw", 0.9), 8.0);
  EXPECT_EQ(optimizer_state_bytes_per_parameter("sgd", 0.9), 4.0);
  EXPECT_EQ(optimizer_state_bytes_per_parameter("sgd", 0.0), 0.0);
  EXPECT_FALSE(optimizer_state_bytes_per_parameter("lamb", 0.9));
}

TEST(MemoryModel, ProjectingToMoreRanksScalesOnlyWhatIsSharded) {
  const DesignInfo zero1 = design(false, true);
  const NamedValues<int64_t> at2 = expected_model_state(zero1, 800, 2, 8.0);
  const NamedValues<int64_t> at8 = model_state_at_world(zero1, at2, 2, 8);
  EXPECT_EQ(at8, expected_model_state(zero1, 800, 8, 8.0));
  // Measured figures move the same way: only the sharded category changes.
  const NamedValues<int64_t> measured = {{"parameters", 3300}, {"optimizer_state", 3300}};
  const NamedValues<int64_t> moved = model_state_at_world(zero1, measured, 2, 8);
  EXPECT_EQ(named_value(moved, "parameters"), 3300);
  EXPECT_EQ(named_value(moved, "optimizer_state"), 825);
}

TEST(MemoryModel, RatiosPerCategoryAndForTheirSum) {
  const NamedValues<int64_t> expected = {
      {"parameters", 400}, {"gradients", 400}, {"optimizer_state", 0}};
  const NamedValues<int64_t> measured = {
      {"parameters", 400}, {"gradients", 600}, {"optimizer_state", 0}, {"activations", 5000}};
  const NamedValues<double> ratio = measured_over_expected(measured, expected);
  EXPECT_DOUBLE_EQ(named_value(ratio, "parameters"), 1.0);
  EXPECT_DOUBLE_EQ(named_value(ratio, "gradients"), 1.5);
  EXPECT_DOUBLE_EQ(named_value(ratio, "model_state"), 1.25);     // activations are no part of it
  EXPECT_EQ(named_value(ratio, "optimizer_state", -1.0), -1.0);  // nothing expected: no ratio
}

}  // namespace
}  // namespace ddpb::reports
