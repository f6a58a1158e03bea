// FSDP's projection (Note [Unit schedule] in bench/project/projection.h): the two streams'
// arithmetic on a hand-made two-unit model with known collective times (prefetch on and off,
// full_shard and shard_grad_op, the root, no_shard's all-reduces), the model picked by the
// trait shards_parameters, and FSDP's transient units kept in its projected memory (Note
// [Projected memory]).
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "bench/project/cost_model.h"
#include "bench/project/projection.h"
#include "tests/bench/project/toy_basis.h"

namespace ddpb::bench {
// Named, not anonymous: the unity build joins this file with the other projection tests.
namespace unit_schedule_test {

// Two units of 3 ms forward and 6 ms backward whose all-gather and reduce-scatter take 2 ms.
std::vector<UnitCost> two_units() {
  UnitCost u;
  u.forward_ms = 3, u.backward_ms = 6, u.gather_ms = 2, u.reduce_scatter_ms = 2;
  return {u, u};
}

UnitScheduleOptions options(bool regather, bool prefetch) {
  return {
      .regather_backward = regather, .forward_prefetch = prefetch, .backward_prefetch = prefetch};
}

// full_shard, prefetch on: B's gather runs under A's forward (A waits 2 ms for its own);
// backward gathers B at 8 (waits to 10) with A prefetched behind it (done at 12, under B's
// backward), B's reduce-scatter at 16-18, A's at 22-24: exposed 2 + 2 + 2.
TEST(UnitSchedule, FullShardWithPrefetchHidesAllButTheFirstGatherOfEachPass) {
  const UnitScheduleResult r =
      simulate_unit_schedule(two_units(), std::nullopt, options(true, true));
  EXPECT_DOUBLE_EQ(r.comm_ms, 4 * 2 + 2 * 2) << "two gathers and a reduce-scatter per unit";
  EXPECT_DOUBLE_EQ(r.compute_end_ms, 22);
  EXPECT_DOUBLE_EQ(r.end_ms, 24);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 6);
}

// Prefetch off: every gather is waited for, and A's backward gather queues behind B's
// reduce-scatter (18-20, then 20-22): exposed 2 + 2 + 2 + 4 + 2.
TEST(UnitSchedule, FullShardWithoutPrefetchWaitsForEveryGather) {
  const UnitScheduleResult r =
      simulate_unit_schedule(two_units(), std::nullopt, options(true, false));
  EXPECT_DOUBLE_EQ(r.comm_ms, 12);
  EXPECT_DOUBLE_EQ(r.compute_end_ms, 28);
  EXPECT_DOUBLE_EQ(r.end_ms, 30);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 12);
}

// shard_grad_op keeps the units from forward: backward waits for nothing, and only the last
// reduce-scatter (20-22) is exposed beside the forward's first gather.
TEST(UnitSchedule, ShardGradOpGathersOnce) {
  const UnitScheduleResult on =
      simulate_unit_schedule(two_units(), std::nullopt, options(false, true));
  EXPECT_DOUBLE_EQ(on.comm_ms, 2 * 2 + 2 * 2);
  EXPECT_DOUBLE_EQ(on.compute_end_ms, 20);
  EXPECT_DOUBLE_EQ(on.exposed_ms, 4);
  const UnitScheduleResult off =
      simulate_unit_schedule(two_units(), std::nullopt, options(false, false));
  EXPECT_DOUBLE_EQ(off.compute_end_ms, 22) << "B's forward gather waited for: 2 ms more";
  EXPECT_DOUBLE_EQ(off.exposed_ms, 6);
}

// The root (1 ms gathers and reduce-scatter, 1 ms forward, 2 ms backward): gathered first with
// A prefetched behind it, its compute at forward's end and backward's start, its reduce-scatter
// after A's (28-29).
TEST(UnitSchedule, TheRootIsGatheredFirstAndReduceScatteredLast) {
  UnitCost root;
  root.forward_ms = 1, root.backward_ms = 2, root.gather_ms = 1, root.reduce_scatter_ms = 1;
  const UnitScheduleResult r = simulate_unit_schedule(two_units(), root, options(true, true));
  EXPECT_DOUBLE_EQ(r.comm_ms, 14);
  EXPECT_DOUBLE_EQ(r.compute_end_ms, 26);
  EXPECT_DOUBLE_EQ(r.end_ms, 29);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 29 - 21);
}

// no_shard: gathers and reduce-scatters over one device cost nothing; the all-reduces (4 ms
// each) start after backward, in unit order: all exposed.
TEST(UnitSchedule, NoShardAllReducesAfterBackward) {
  std::vector<UnitCost> units = two_units();
  for (UnitCost& u : units) u.gather_ms = u.reduce_scatter_ms = 0, u.allreduce_ms = 4;
  const UnitScheduleResult r = simulate_unit_schedule(units, std::nullopt, options(false, true));
  EXPECT_DOUBLE_EQ(r.comm_ms, 8);
  EXPECT_DOUBLE_EQ(r.compute_end_ms, 18);
  EXPECT_DOUBLE_EQ(r.exposed_ms, 8);
}

// The same two units as a measured run: 1e6 parameters and 4 MB each, forward 6 ms and backward
// 12 ms in all, optimizer 1 ms over 1/2 of the parameters, on a link of 1 GB/s and no latency,
// where each all-gather and reduce-scatter at 2 devices moves half of 4 MB: 2 ms.
DesignBasis fsdp_basis(const char* strategy_name, bool regather, bool prefetch) {
  DesignBasis d = testing::toy_basis().designs[testing::kDdp];
  d.design.name = strategy_name, d.design.label = "FSDP";
  d.design.has_buckets = false;
  d.design.shards_parameters = d.design.shards_gradients = d.design.shards_optimizer_state = true;
  d.design.gradient_op = "reduce_scatter";
  d.world_size = 2;
  UnitInputs in;
  in.forward_ms = 6, in.backward_ms = 12, in.optimizer_ms = 1, in.optimizer_shards = 2;
  in.units = {{"a", 1e6, 4e6}, {"b", 1e6, 4e6}};
  in.regather_backward = regather;
  in.forward_prefetch = in.backward_prefetch = prefetch;
  d.inputs = in;
  return d;
}

Topology one_gb_link() {
  Topology t;
  t.name = "hand";
  t.node_size = 8;
  t.intra = {0, 1};
  return t;
}

TEST(UnitSchedule, TheTraitPicksTheUnitModel) {
  DesignBasis d = fsdp_basis("fsdp", true, true);
  EXPECT_EQ(gradient_model(d.design), GradientModel::UnitSchedule);
  d.design.shards_parameters = false;
  EXPECT_EQ(gradient_model(d.design), GradientModel::BucketedReduceScatter)
      << "negative control: ZeRO's row, whose parameters are not sharded";
}

// Step = forward + backward + exposed + the optimizer's share (Note [Sharded steps]), with the
// exposed times of the schedules above; at one device nothing is communicated.
TEST(UnitSchedule, ProjectedStepsOfTheTwoUnitModel) {
  ProjectionBasis b = testing::toy_basis();
  const Topology t = one_gb_link();
  const auto step = [&](const DesignBasis& d, int n) {
    return project_design(b, d, t, n, {}).value();
  };
  const DesignPoint full = step(fsdp_basis("fsdp", true, true), 2);
  EXPECT_DOUBLE_EQ(full.step_ms, 18 + 6 + 1);
  EXPECT_DOUBLE_EQ(full.comm_ms, 12);
  EXPECT_DOUBLE_EQ(full.exposed_ms, 6);
  EXPECT_DOUBLE_EQ(step(fsdp_basis("fsdp", true, false), 2).step_ms, 18 + 12 + 1);
  EXPECT_DOUBLE_EQ(step(fsdp_basis("fsdp-grad-op", false, true), 2).step_ms, 18 + 4 + 1);
  EXPECT_DOUBLE_EQ(step(fsdp_basis("fsdp-grad-op", false, false), 2).step_ms, 18 + 6 + 1);
  // nccl-tests' (p-1)/p of 3 x 8 MB over the 12 ms of collectives.
  EXPECT_NEAR(full.busbw_GBps, 24e6 * 0.5 / 12e6, 1e-12);
  const DesignPoint one = step(fsdp_basis("fsdp", true, true), 1);
  EXPECT_DOUBLE_EQ(one.step_ms, 18 + 2) << "no collective, the whole optimizer";
  EXPECT_DOUBLE_EQ(full.efficiency, 20.0 / 25);
  // At 4 devices each collective moves 3/4 of 4 MB, 3 ms; the optimizer steps 1/4.
  const DesignPoint four = step(fsdp_basis("fsdp", true, true), 4);
  EXPECT_DOUBLE_EQ(four.exposed_ms, 3 + 3 + 3);
  EXPECT_DOUBLE_EQ(four.step_ms, 18 + 9 + 0.5);
}

// Note [Projected memory]: FSDP at 2 devices promised parameters 4Ψ/2 + 8 MB of gathered units
// (Ψ = 2e6); at 8 devices the shard is 4Ψ/8 and the gathered units stay 8 MB.
TEST(UnitSchedule, GatheredUnitsAreKeptInProjectedMemory) {
  DesignBasis d = fsdp_basis("fsdp", true, true);
  d.memory =
      MemoryBasis{30e6, 0, {{"parameters", 12000000}}, 2, 2000000, {{"parameters", 8000000}}};
  EXPECT_NEAR(*projected_memory(d, 2, {}), 30e6, 1) << "as measured";
  EXPECT_NEAR(*projected_memory(d, 8, {}), 30e6 - 4e6 + 1e6, 1);
  d.memory->transient.clear();  // negative control: all of the promise sharded
  EXPECT_NEAR(*projected_memory(d, 8, {}), 30e6 - 12e6 + 3e6, 1);
}

}  // namespace unit_schedule_test
}  // namespace ddpb::bench
