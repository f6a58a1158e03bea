// The metric formulas of bench/measure/metrics.h and bench/measure/stats.h on synthetic
// timelines whose answers are known by hand (docs/metrics.md), and the configuration's names.
#include <gtest/gtest.h>

#include "bench/run/designs.h"

#include "bench/measure/metrics.h"
#include "bench/measure/stats.h"
#include "bench/run/flag_values.h"
#include "bench/run/run_config.h"

namespace ddpb::bench {
namespace {

TEST(CommTime, UnionOfOverlappingIntervalsAndTheExposedTail) {
  // Buckets busy [0,4), [2,6) (overlapping: union [0,6)), [8,12); backward ends at 10.
  const CommTime t = comm_time({{8, 12}, {0, 4}, {2, 6}}, 10);
  EXPECT_DOUBLE_EQ(t.comm_ms, 10);    // 6 + 4
  EXPECT_DOUBLE_EQ(t.exposed_ms, 2);  // [10,12)
  EXPECT_DOUBLE_EQ(overlap_ratio(t.comm_ms, t.exposed_ms), 0.8);
}

TEST(CommTime, AllAfterBackwardIsAllExposed) {
  const CommTime t = comm_time({{10, 13}, {13, 15}}, 10);  // touching intervals merge
  EXPECT_DOUBLE_EQ(t.comm_ms, 5);
  EXPECT_DOUBLE_EQ(t.exposed_ms, 5);
  EXPECT_DOUBLE_EQ(overlap_ratio(t.comm_ms, t.exposed_ms), 0.0);
}

TEST(CommTime, AllHiddenAndComputeWaitsCount) {
  CommTime t = comm_time({{1, 3}, {4, 6}}, 10);
  EXPECT_DOUBLE_EQ(t.comm_ms, 4);
  EXPECT_DOUBLE_EQ(t.exposed_ms, 0);
  EXPECT_DOUBLE_EQ(overlap_ratio(t.comm_ms, t.exposed_ms), 1.0);
  // Compute blocked 1.5 ms on communication: exposed however early it happened...
  t = comm_time({{1, 3}, {4, 6}}, 10, 1.5);
  EXPECT_DOUBLE_EQ(t.exposed_ms, 1.5);
  // ...but never more than the communication itself.
  t = comm_time({{1, 3}}, 10, 50);
  EXPECT_DOUBLE_EQ(t.exposed_ms, 2);
}

TEST(CommTime, EmptyAndNested) {
  EXPECT_DOUBLE_EQ(comm_time({}, 0).comm_ms, 0);
  EXPECT_DOUBLE_EQ(overlap_ratio(0, 0), 0);
  const CommTime t = comm_time({{0, 10}, {2, 3}, {4, 12}}, 11);  // nested and extending
  EXPECT_DOUBLE_EQ(t.comm_ms, 12);
  EXPECT_DOUBLE_EQ(t.exposed_ms, 1);
}

TEST(CommTime, PytorchsSpanDefinition) {
  // First launch at 2, last completion at 12, backward ends at 10: 8 of the 10 ms span.
  EXPECT_DOUBLE_EQ(span_overlap_ratio(2, 12, 10), 0.8);
  EXPECT_DOUBLE_EQ(span_overlap_ratio(2, 12, 1), 0.0);   // all after backward
  EXPECT_DOUBLE_EQ(span_overlap_ratio(2, 12, 20), 1.0);  // all hidden
  EXPECT_DOUBLE_EQ(span_overlap_ratio(2, 2, 5), 0.0);    // no communication
}

TEST(BusBandwidth, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllToAll, 8), 7.0 / 8);  // nccl-tests' factors
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::SendRecv, 8), 1.0);
  EXPECT_STREQ(busbw_formula(Collective::AllToAll), "busbw = algbw * (n-1)/n");
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllReduce, 1), 0.0);
  // 1 GB in 0.5 s is 2 GB/s of algorithm bandwidth.
  EXPECT_DOUBLE_EQ(algbw_GBps(1e9, 500), 2.0);
  EXPECT_DOUBLE_EQ(algbw_GBps(1e9, 0), 0.0);
  const auto rec = busbw_record(Collective::AllReduce, 4);
  EXPECT_EQ(rec.op, "allreduce");
  EXPECT_DOUBLE_EQ(rec.factor, 1.5);
  EXPECT_EQ(rec.formula, "busbw = algbw * 2(n-1)/n");
}

TEST(Scaling, WeakAndStrong) {
  // 1 device: 100 samples/s; 4 devices: 360 samples/s -> 90% weak-scaling efficiency.
  EXPECT_DOUBLE_EQ(weak_scaling_efficiency(360, 4, 100), 0.9);
  EXPECT_DOUBLE_EQ(weak_scaling_efficiency(360, 4, 0), 0.0);
  // Same global batch: 40 ms on one device, 12.5 ms on four -> 3.2x, 80%.
  EXPECT_DOUBLE_EQ(strong_speedup(40, 12.5), 3.2);
  EXPECT_DOUBLE_EQ(strong_efficiency(40, 12.5, 4), 0.8);
  EXPECT_DOUBLE_EQ(strong_speedup(40, 0), 0.0);
}

TEST(Compute, FlopFraction) {
  EXPECT_DOUBLE_EQ(flop_fraction(50e9, 100e9, 1), 0.5);
  EXPECT_DOUBLE_EQ(flop_fraction(50e9, 100e9, 2), 0.25);
  EXPECT_DOUBLE_EQ(flop_fraction(50e9, 0, 2), 0.0);
}

TEST(Percentiles, LinearInterpolationLikeNumpy) {
  const std::vector<double> v = {5, 1, 4, 2, 3};  // sorted 1..5
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 4.6);  // numpy.percentile([1..5], 90)
  EXPECT_DOUBLE_EQ(percentile(v, 99), 4.96);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  const Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_NEAR(s.stddev, 1.5811388300841898, 1e-12);  // sample standard deviation
  EXPECT_EQ(s.count, 5u);
}

}  // namespace
}  // namespace ddpb::bench

namespace ddpb::bench {
namespace {

TEST(Straggler, ComputeTimeLeavesOutTheWaits) {
  // By the record's kind: data and every communication phase are left out, whatever their
  // name; a phase a record calls compute counts.
  EXPECT_DOUBLE_EQ(compute_time_ms({{"forward", "compute", 3},
                                    {"backward", "compute", 5},
                                    {"comm_exposed", "communication", 7},
                                    {"sync_bn", "communication", 2},
                                    {"data", "data", 11},
                                    {"optimizer", "compute", 1}}),
                   9.0);
  EXPECT_DOUBLE_EQ(compute_time_ms({{"shard_step", "compute", 4}, {"gather", "communication", 6}}),
                   4.0);
}

TEST(Straggler, OnlyRanksOverTwentyPercentAboveTheFastestAreNamed) {
  // Rank 1 is 1.5x the fastest (rank 2); rank 0 is 1.2x exactly, which is not over.
  const StragglerSummary s = straggler_summary({12, 15, 10, 11});
  EXPECT_DOUBLE_EQ(s.skew, 1.5);
  ASSERT_EQ(s.stragglers.size(), 1u);
  EXPECT_EQ(s.stragglers[0].rank, 1);
  EXPECT_DOUBLE_EQ(s.stragglers[0].compute_ms, 15);
  EXPECT_DOUBLE_EQ(s.stragglers[0].skew, 1.5);
}

TEST(Straggler, NoComputeTimeMeansNoSkew) {
  EXPECT_DOUBLE_EQ(straggler_summary({}).skew, 0);
  EXPECT_DOUBLE_EQ(straggler_summary({0, 5}).skew, 0);
  EXPECT_TRUE(straggler_summary({0, 5}).stragglers.empty());
}

// Every enum of the configuration reads back its own names, and nothing else.
template <typename E>
void expect_names_round_trip(const std::string& choices) {
  for (const auto& entry : enum_names(E{})) {
    EXPECT_EQ(enum_from_name<E>(entry.name), entry.value) << entry.name;
    EXPECT_EQ(enum_name(entry.value), entry.name);
  }
  EXPECT_FALSE(enum_from_name<E>("").has_value());
  EXPECT_FALSE(enum_from_name<E>("no-such-name").has_value());
  EXPECT_EQ(enum_choices<E>(), choices);
}

TEST(NamedEnum, ConfigurationEnumsRoundTrip) {
  expect_names_round_trip<comm::CommBackend>("gloo, nccl or mpi");
  expect_names_round_trip<ddp::CommHook>("none, fp16, bf16 or powersgd");
  expect_names_round_trip<ops::MathMode>("fp32, tf32 or bf16");
  expect_names_round_trip<ops::AttentionKind>("math or flash");
}

TEST(NamedEnum, FlagParseErrorListsTheNames) {
  try {
    design_named("dpp");
    FAIL() << "dpp is not a mode";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "--mode must be single, dp, ddp, zero1, zero2, zero1-pytorch, fsdp, fsdp-grad-op, "
                 "fsdp-no-shard or fsdp-hybrid, got 'dpp'");
  }
}

}  // namespace
}  // namespace ddpb::bench
