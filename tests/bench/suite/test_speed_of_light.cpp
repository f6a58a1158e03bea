// The speed-of-light bound on hand-built runs with known answers (Note [Speed of light]).
#include <gtest/gtest.h>

#include "bench/project/comm_fit.h"
#include "bench/run/designs.h"
#include "bench/suite/speed_of_light.h"

namespace ddpb::bench {
namespace {

// The bound of a run of a design of the table.
std::optional<reports::SpeedOfLight> bound_of(const reports::SuiteRun& run, const BoundInputs& in) {
  return speed_of_light(run, design_named(run.mode).info, in);
}

reports::SuiteRun run_of(const std::string& mode, int n, double step_ms, double flop_fraction) {
  reports::SuiteRun r;
  r.id = "w/run";
  r.mode = mode;
  r.world_size = n;
  r.status = reports::RunStatus::Ok;
  reports::RunMetrics m;
  m.step_time_ms.median = step_ms;
  m.flop_fraction = flop_fraction;
  m.phases_median_ms = std::vector<reports::PhaseMedian>{{"data", "data", 0.5},
                                                         {"forward", "compute", 6},
                                                         {"backward_compute", "compute", 10},
                                                         {"comm_exposed", "communication", 3},
                                                         {"optimizer", "compute", 1}};
  r.metrics = m;
  return r;
}

reports::BucketTiming bucket(double ready_ms, int64_t bytes) {
  reports::BucketTiming b;
  b.ready_ms = ready_ms;
  b.bytes = bytes;
  return b;
}

TEST(SpeedOfLight, DdpIsComputeAtThePeakPlusTheLastBucketsAllReduce) {
  auto run = run_of("ddp", 2, 20, 0.25);
  run.metrics->buckets =
      std::vector<reports::BucketTiming>{bucket(5, 4'000'000), bucket(9, 1'000'000)};
  BoundInputs in;
  in.peak_flops_per_s = 1e11;
  in.allreduce = Link{100, 1};  // 100 us, 1 GB/s
  const auto s = bound_of(run, in);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->compute_ms, 5.0);  // a quarter of the 20 ms step at the GEMM peak
  // The bucket ready last (1 MB) at the bus bandwidth: 2(p-1)/p · n/β = 1.0 ms (no α).
  EXPECT_NEAR(s->comm_ms, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(s->input_ms, 0.0);  // CPU: no copy
  EXPECT_NEAR(s->bound_ms, 6.0, 1e-12);
  EXPECT_NEAR(s->achieved, 6.0 / 20, 1e-12);
  ASSERT_EQ(s->phases.size(), 4u);
  EXPECT_EQ(s->phases[0].group, "compute");
  EXPECT_DOUBLE_EQ(s->phases[0].measured_ms, 16.0);
  EXPECT_DOUBLE_EQ(s->phases[1].measured_ms, 3.0);
  EXPECT_DOUBLE_EQ(s->phases[2].measured_ms, 0.5);
  EXPECT_DOUBLE_EQ(s->phases[3].measured_ms, 1.0);
  EXPECT_EQ(s->largest_gap, "compute");
  EXPECT_NE(s->link.find("allreduce (alpha 100 us, beta 1 GB/s)"), std::string::npos) << s->link;
}

TEST(SpeedOfLight, DpIsDeviceZerosReplicateAndReduceAdd) {
  auto run = run_of("dp", 2, 20, 0.5);
  run.metrics->comm_bytes_per_step = 4'000'000;
  BoundInputs in;
  in.peak_flops_per_s = 1e11;
  in.copy = Link{10, 10};
  in.reduce_add = Link{20, 5};
  const auto s = bound_of(run, in);
  ASSERT_TRUE(s.has_value());
  // bytes/β_copy + bytes/β_reduce_add = 0.4 + 0.8 ms.
  EXPECT_NEAR(s->comm_ms, 1.2, 1e-12);
  EXPECT_NEAR(s->bound_ms, 11.2, 1e-12);
}

TEST(SpeedOfLight, OneDeviceHasNoCommunicationAndNoPeakMeansNoBound) {
  BoundInputs in;
  in.peak_flops_per_s = 1e11;
  const auto single = bound_of(run_of("single", 1, 10, 0.8), in);
  ASSERT_TRUE(single.has_value());
  EXPECT_DOUBLE_EQ(single->comm_ms, 0.0);
  EXPECT_EQ(single->link, "none (one device)");
  EXPECT_NEAR(single->achieved, 0.8, 1e-12);
  auto no_fraction = run_of("single", 1, 10, 0.8);
  no_fraction.metrics->flop_fraction.reset();
  EXPECT_FALSE(bound_of(no_fraction, in).has_value());
  EXPECT_FALSE(bound_of(run_of("single", 1, 10, 0.8), BoundInputs{}).has_value());
}

TEST(SpeedOfLight, TheSuiteReadsItsPeakAndItsCommFit) {
  reports::SuiteRecord suite;
  suite.suite.device = "cpu";
  suite.gemm_peak = reports::GemmPeakInfo{};
  suite.gemm_peak->flops_per_s = 1e11;
  CommFit fit;
  fit.backend = "gloo", fit.device = "cpu";
  fit.allreduce = Link{100, 1}, fit.copy = Link{10, 10}, fit.reduce_add = Link{20, 5};
  suite.comm_fit = fit.to_json();
  auto ddp = run_of("ddp", 2, 20, 0.25);
  ddp.metrics->buckets = std::vector<reports::BucketTiming>{bucket(9, 1'000'000)};
  suite.runs = {ddp, run_of("single", 1, 10, 0.8)};
  suite.designs = {design_named("single").info, design_named("ddp").info};
  suite.runs[1].metrics->flop_fraction.reset();
  add_speed_of_light(suite);
  ASSERT_TRUE(suite.runs[0].metrics->speed_of_light.has_value());
  EXPECT_NEAR(suite.runs[0].metrics->speed_of_light->bound_ms, 6.0, 1e-12);
  EXPECT_FALSE(suite.runs[1].metrics->speed_of_light.has_value());
}

}  // namespace
}  // namespace ddpb::bench
