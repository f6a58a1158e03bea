// The critical path on synthetic steps with known answers (Note [Critical path]): the shares
// add up to the step, a late rank's lead is rank 0's wait, a slow DP replica's extra work is
// device 0's, and the Gantt lanes hold every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/measure/critical_path.h"
#include "bench/run/designs.h"

namespace ddpb::bench {
namespace {

using reports::NamedValues;
using reports::RunRecord;
using reports::StepRecord;

StepRecord step(int64_t index, double time_ms, NamedValues<double> phases) {
  StepRecord s;
  s.step = index;
  s.measured = true;
  s.time_ms = time_ms;
  s.phases_ms = std::move(phases);
  return s;
}

double shares(const reports::CriticalPath& c) {
  return c.compute_ms + c.communication_ms + c.data_ms + c.wait_ms + c.host_ms;
}

// Three measured steps of 20, 25 and 30 ms; the 25 ms one is the median. Its phases add up to
// 24.5 ms, so 0.5 ms is host time.
RunRecord ddp_record() {
  RunRecord r;
  r.config.mode = "ddp";
  r.design = design_named("ddp").info;
  r.summary.step_time_ms.median = 25;
  StepRecord warmup = step(0, 90, {{"data", 80}});
  warmup.measured = false;
  r.steps.push_back(warmup);
  const NamedValues<double> phases = {{"backward_compute", 10},
                                      {"comm_exposed", 4},
                                      {"data", 1},
                                      {"forward", 8},
                                      {"optimizer", 1.5}};
  r.steps.push_back(step(1, 20, phases));
  r.steps.push_back(step(2, 25, phases));
  r.steps.push_back(step(3, 30, phases));
  reports::StepModeData mode;
  reports::BucketTiming b;
  b.bucket = 0;
  b.launch_ms = 12;
  b.start_ms = 12.5;
  b.complete_ms = 22;
  mode.buckets = std::vector{b};
  r.steps[2].mode = mode;
  reports::RankRecord rank1;
  rank1.rank = 1;
  rank1.phases_median_ms = {
      {"data", "data", 1}, {"forward", "compute", 8}, {"backward_compute", "compute", 13}};
  r.ranks = std::vector<reports::RankRecord>{reports::RankRecord{}, rank1};
  return r;
}

TEST(CriticalPath, ALateRanksLeadAtItsLastBucketIsRankZerosWait) {
  // Rank 1's last bucket is ready 3 ms after rank 0's in the median step (measured index 1).
  const std::vector<std::vector<std::vector<double>>> ready = {{{9, 18}, {9, 18}, {9, 18}},
                                                               {{9, 18}, {9.5, 21}, {9, 18}}};
  const auto c = critical_path(ddp_record(), ready);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 2);
  EXPECT_DOUBLE_EQ(c->step_ms, 25);
  EXPECT_DOUBLE_EQ(c->wait_ms, 3);
  EXPECT_EQ(c->waited_for, 1);
  EXPECT_DOUBLE_EQ(c->communication_ms, 1) << "comm_exposed 4 ms less the 3 ms wait";
  EXPECT_DOUBLE_EQ(c->compute_ms, 19.5);
  EXPECT_DOUBLE_EQ(c->data_ms, 1);
  EXPECT_DOUBLE_EQ(c->host_ms, 0.5);
  EXPECT_NEAR(shares(*c), c->step_ms, 0.02 * c->step_ms);
  // The chain in time order: data, forward, backward_compute, the wait, the rest of comm, the
  // optimizer, then host; contiguous from 0 to the step's end.
  std::vector<std::string> labels;
  double t = 0;
  for (const auto& s : c->path) {
    labels.push_back(s.label);
    EXPECT_DOUBLE_EQ(s.start_ms, t) << s.label;
    t = s.end_ms;
  }
  EXPECT_DOUBLE_EQ(t, 25);
  EXPECT_EQ(labels,
            (std::vector<std::string>{"data", "forward", "backward_compute", "waits for rank 1",
                                      "comm_exposed", "optimizer", "outside the phases"}));
  // Lanes: rank 0's five phases and its bucket, rank 1's three phase medians.
  int rank0 = 0, rank1 = 0, buckets = 0;
  for (const auto& s : c->lanes) {
    rank0 += s.rank == 0 && s.label.rfind("bucket", 0) != 0;
    rank1 += s.rank == 1;
    buckets += s.label == "bucket 0";
  }
  EXPECT_EQ(rank0, 5);
  EXPECT_EQ(rank1, 3);
  EXPECT_EQ(buckets, 1);
}

TEST(CriticalPath, NoLeadNoWaitAndTheWaitNeverExceedsTheExposedCommunication) {
  const std::vector<std::vector<std::vector<double>>> even = {{{9, 18}, {9, 18}, {9, 18}},
                                                              {{9, 18}, {9, 17}, {9, 18}}};
  auto c = critical_path(ddp_record(), even);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->wait_ms, 0);
  EXPECT_FALSE(c->waited_for);
  EXPECT_DOUBLE_EQ(c->communication_ms, 4);
  const std::vector<std::vector<std::vector<double>>> very_late = {{{9, 18}, {9, 18}, {9, 18}},
                                                                   {{9, 18}, {9, 60}, {9, 18}}};
  c = critical_path(ddp_record(), very_late);
  EXPECT_DOUBLE_EQ(c->wait_ms, 4) << "capped by comm_exposed";
  EXPECT_NEAR(shares(*c), 25, 0.5);
  // A log that kept only the last two steps still lines up (the median is the first of them).
  const std::vector<std::vector<std::vector<double>>> latest = {{{9, 18}, {9, 18}},
                                                                {{9.5, 21}, {9, 18}}};
  c = critical_path(ddp_record(), latest);
  EXPECT_DOUBLE_EQ(c->wait_ms, 3);
  // Without ready times (world size 1, uneven inputs): no wait, still the whole step.
  c = critical_path(ddp_record());
  EXPECT_EQ(c->wait_ms, 0);
  EXPECT_NEAR(shares(*c), 25, 1e-9);
  EXPECT_FALSE(critical_path(RunRecord{}));
}

// The row decides where a wait shows and what kind a span is (Note [Designs in records]): a
// design whose ranks are processes waits in its own last communication phase; a row without
// one shows no wait and names no rank, rather than a wait it cannot place.
TEST(CriticalPath, TheDesignsRowPlacesTheWaitAndKindsTheSpans) {
  const std::vector<std::vector<std::vector<double>>> ready = {{{9, 18}, {9, 18}, {9, 18}},
                                                               {{9, 18}, {9.5, 21}, {9, 18}}};
  RunRecord r = ddp_record();
  r.design.phases.erase(
      std::remove_if(r.design.phases.begin(), r.design.phases.end(),
                     [](const reports::DesignPhase& p) { return p.kind == "communication"; }),
      r.design.phases.end());
  auto c = critical_path(r, ready);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->waited_for.has_value());
  EXPECT_DOUBLE_EQ(c->wait_ms, 0);
  EXPECT_NEAR(shares(*c), c->step_ms, 1e-9);
  // A row that calls comm_exposed compute: its span and its share say so, and with no
  // communication phase in the step there is again no wait to place.
  r = ddp_record();
  for (auto& p : r.design.phases)
    if (p.phase == "comm_exposed") p.kind = "compute";
  c = critical_path(r, ready);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->communication_ms, 0);
  EXPECT_DOUBLE_EQ(c->compute_ms, 19.5 + 4);
  EXPECT_FALSE(c->waited_for.has_value());
}

TEST(CriticalPath, ASlowDpReplicasExtraWorkIsDeviceZerosWait) {
  RunRecord r;
  r.config.mode = "dp";
  r.design = design_named("dp").info;
  r.summary.step_time_ms.median = 30;
  StepRecord s = step(0, 30,
                      {{"backward", 9},
                       {"data", 1},
                       {"forward", 7},
                       {"gather", 1},
                       {"loss", 0.5},
                       {"optimizer", 2},
                       {"reduce", 3},
                       {"replicate", 3},
                       {"scatter", 2}});
  reports::StepModeData mode;
  mode.devices =
      std::vector<reports::DpDeviceStep>{{"cpu:0", 16, 11, 19}, {"cpu:1", 16, 15.5, 14.5}};
  s.mode = mode;
  r.steps.push_back(s);
  const auto c = critical_path(r);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->wait_ms, 5) << "forward + backward 16 ms, device 0's own work 11 ms";
  EXPECT_EQ(c->waited_for, 1);
  EXPECT_DOUBLE_EQ(c->communication_ms, 9) << "scatter, replicate, gather, reduce";
  EXPECT_DOUBLE_EQ(c->compute_ms, 7 + 4 + 0.5 + 2);
  EXPECT_DOUBLE_EQ(c->host_ms, 1.5);
  EXPECT_NEAR(shares(*c), 30, 0.02 * 30);
  int replica = 0;
  for (const auto& span : c->lanes) replica += span.rank == 1;
  EXPECT_EQ(replica, 2) << "device 1's forward and backward work";
}

}  // namespace
}  // namespace ddpb::bench
