// Bucket blame on synthetic timelines with known answers (Note [Bucket blame]).
#include <gtest/gtest.h>

#include "bench/measure/bucket_blame.h"
#include "core/check.h"
#include "core/step_phase.h"

namespace ddpb::bench {
namespace {

using ReadyTimes = std::vector<std::vector<std::vector<double>>>;

// `steps` steps of `buckets` buckets, bucket b ready at 100 * step + 2 * b on every rank, plus
// `late_ms` on `late_rank` (from bucket `late_from` on) and a deterministic jitter of up to
// `jitter_ms` on every rank.
ReadyTimes timeline(int ranks, int steps, int buckets, int late_rank, double late_ms,
                    int late_from = 0, double jitter_ms = 0) {
  ReadyTimes t(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    for (int s = 0; s < steps; ++s) {
      std::vector<double> step;
      for (int b = 0; b < buckets; ++b) {
        const double jitter = jitter_ms * (((r * 7 + s * 13 + b * 5) % 11) / 10.0);
        const double late = (r == late_rank && b >= late_from) ? late_ms : 0;
        step.push_back(100.0 * s + 2.0 * b + jitter + late);
      }
      t[static_cast<size_t>(r)].push_back(step);
    }
  }
  return t;
}

reports::StepTimeStats step_times(double median, double stddev = 0) {
  reports::StepTimeStats s;
  s.median = median;
  s.stddev = stddev;
  return s;
}

std::vector<reports::RankRecord> ranks_with_phases(int ranks, int slow_rank,
                                                   const std::string& slow_phase, double extra) {
  std::vector<reports::RankRecord> out;
  for (int r = 0; r < ranks; ++r) {
    reports::RankRecord rec;
    rec.rank = r;
    for (const char* phase : {"data", "forward", "backward_compute", "comm_exposed", "optimizer"}) {
      double ms = 5;
      if (r == slow_rank && phase == slow_phase) ms += extra;
      // Every other rank waits for the slow one after backward: never the slow rank's phase.
      if (r != slow_rank && std::string(phase) == "comm_exposed") ms += extra;
      rec.phases_median_ms.push_back({phase, phase_kind_name(phase_kind_of(phase)), ms});
    }
    out.push_back(rec);
  }
  return out;
}

TEST(BucketBlame, TheLateRankIsNamedWithItsDelayAndPhase) {
  const auto ready = timeline(4, 10, 5, /*late_rank=*/2, /*late_ms=*/12, 0, /*jitter_ms=*/0.1);
  const auto b =
      bucket_blame(ready, ranks_with_phases(4, 2, "backward_compute", 12), step_times(40));
  EXPECT_EQ(b.steps, 10);
  EXPECT_EQ(b.buckets, 5);
  EXPECT_DOUBLE_EQ(b.noise_ms, std::max(kBlameNoiseFloorMs, kBlameNoiseShare * 40));
  ASSERT_TRUE(b.holder.has_value());
  EXPECT_EQ(*b.holder, 2);
  EXPECT_EQ(b.holder_phase.value_or(""), "backward_compute");
  EXPECT_NEAR(b.holder_phase_excess_ms.value_or(0), 12, 1e-9);
  const reports::RankBlame& r2 = b.per_rank[2];
  EXPECT_EQ(r2.buckets_held, 50);
  EXPECT_DOUBLE_EQ(r2.held_fraction, 1.0);
  // Held back by 12 ms less the jitter of the next slowest rank: between 11.9 and 12.1.
  EXPECT_NEAR(r2.delay_ms_median, 12, 0.1);
  EXPECT_NEAR(r2.delay_ms_per_step, 5 * 12, 5 * 0.1);
  for (const auto& bucket : b.per_bucket) {
    EXPECT_EQ(bucket.last_rank.value_or(-1), 2);
    EXPECT_DOUBLE_EQ(bucket.held_fraction, 1.0);
  }
  EXPECT_EQ(b.per_rank[0].buckets_held, 0);
  EXPECT_NE(b.finding.find("rank 2 holds back 100% of buckets"), std::string::npos) << b.finding;
  EXPECT_NE(b.finding.find("backward_compute is 12.0 ms slower"), std::string::npos) << b.finding;
}

TEST(BucketBlame, JitterNamesNoRank) {
  // Every rank on time up to 0.2 ms: under the noise floor, no bucket is held by anyone.
  const auto ready = timeline(2, 20, 4, -1, 0, 0, /*jitter_ms=*/0.2);
  const auto b = bucket_blame(ready, ranks_with_phases(2, -1, "", 0), step_times(10));
  EXPECT_FALSE(b.holder.has_value());
  EXPECT_FALSE(b.holder_phase.has_value());
  for (const auto& r : b.per_rank) EXPECT_EQ(r.buckets_held, 0);
  for (const auto& bucket : b.per_bucket) EXPECT_FALSE(bucket.last_rank.has_value());
  EXPECT_NE(b.finding.find("no rank holds buckets back"), std::string::npos) << b.finding;
}

TEST(BucketBlame, ASmallSteadyLeadIsNotAHolder) {
  // Rank 1 is always 0.5 ms late: beyond the noise of a 10 ms step (0.25 ms), so it is named on
  // each bucket, but under the holder's minimum (1 ms): it does not hold the step back.
  const auto ready = timeline(2, 10, 3, 1, 0.5);
  const auto b = bucket_blame(ready, ranks_with_phases(2, -1, "", 0), step_times(10));
  EXPECT_FALSE(b.holder.has_value());
  EXPECT_EQ(b.per_rank[1].buckets_held, 30);
  EXPECT_NE(b.finding.find("no rank holds the step back: the most, rank 1"), std::string::npos)
      << b.finding;
}

TEST(BucketBlame, ALeadWithinTheStepsOwnJitterIsNotAHolder) {
  // Rank 0 is 2 ms late on every bucket of 20 ms steps, but the steps vary by 3.5 ms (a
  // standard deviation): the lead cannot be told from the jitter. Steadier steps name it.
  const auto ready = timeline(2, 8, 2, 0, 2.0);
  const auto jittery = bucket_blame(ready, ranks_with_phases(2, -1, "", 0), step_times(20, 3.5));
  EXPECT_FALSE(jittery.holder.has_value());
  EXPECT_DOUBLE_EQ(jittery.holder_threshold_ms, 3.5);
  EXPECT_NE(jittery.finding.find("under the 3.50 ms the steps' own jitter allows"),
            std::string::npos)
      << jittery.finding;
  const auto steady = bucket_blame(ready, ranks_with_phases(2, -1, "", 0), step_times(20, 0.5));
  EXPECT_EQ(steady.holder.value_or(-1), 0);
  EXPECT_DOUBLE_EQ(steady.holder_threshold_ms, std::max(kHolderMinDelayMs, kHolderStepShare * 20));
}

TEST(BucketBlame, RanksThatTakeTurnsBeingLateAreNoHolder) {
  // Rank 0 is 5 ms late in 6 of 10 steps, rank 1 in the other 4: beyond the noise and the
  // threshold, and rank 0 holds 60% of the pairs, but not twice rank 1's 40%.
  auto ready = timeline(2, 10, 2, -1, 0);
  for (size_t s = 0; s < 10; ++s) {
    for (double& t : ready[s < 6 ? 0 : 1][s]) t += 5;
  }
  const auto b = bucket_blame(ready, ranks_with_phases(2, -1, "", 0), step_times(20, 0.5));
  EXPECT_DOUBLE_EQ(b.per_rank[0].held_fraction, 0.6);
  EXPECT_FALSE(b.holder.has_value());
  EXPECT_NE(b.finding.find("the ranks take turns being last"), std::string::npos) << b.finding;
  // The same lead on rank 0 with rank 1 late in 2 steps only: rank 0 is named.
  for (size_t s = 6; s < 8; ++s) {
    for (double& t : ready[1][s]) t -= 5;
  }
  EXPECT_EQ(bucket_blame(ready, ranks_with_phases(2, -1, "", 0), step_times(20, 0.5)).holder, 0);
}

TEST(BucketBlame, ALateStartIsALateRankWithoutASlowPhase) {
  // The last buckets only (from bucket 2 of 4): half the pairs, the holder's threshold.
  const auto ready = timeline(3, 8, 4, 0, 20, /*late_from=*/2);
  const auto b = bucket_blame(ready, ranks_with_phases(3, -1, "", 0), step_times(50));
  ASSERT_TRUE(b.holder.has_value());
  EXPECT_EQ(*b.holder, 0);
  EXPECT_FALSE(b.holder_phase.has_value());
  EXPECT_FALSE(b.per_bucket[0].last_rank.has_value());
  EXPECT_EQ(b.per_bucket[3].last_rank.value_or(-1), 0);
  EXPECT_NE(b.finding.find("outside the timed phases"), std::string::npos) << b.finding;
}

TEST(BucketBlame, StepsWhoseBucketsDifferBetweenRanksAreLeftOut) {
  auto ready = timeline(2, 9, 3, 1, 10);
  ready[0][4].pop_back();  // e.g. a step with an unused parameter's bucket skipped
  const auto b = bucket_blame(ready, ranks_with_phases(2, 1, "data", 10), step_times(30));
  EXPECT_EQ(b.steps, 8);
  EXPECT_EQ(b.per_rank[1].buckets_held, 24);
  EXPECT_EQ(b.holder_phase.value_or(""), "data");
}

TEST(BucketBlame, AQuickSuitesFewStepsNameNoRank) {
  // The same late rank over 4 steps: counted per bucket, but too few steps to name it.
  const auto b =
      bucket_blame(timeline(2, 4, 3, 1, 10), ranks_with_phases(2, 1, "data", 10), step_times(30));
  EXPECT_EQ(b.per_rank[1].buckets_held, 12);
  EXPECT_FALSE(b.holder.has_value());
  EXPECT_NE(b.finding.find("4 measured steps are too few"), std::string::npos) << b.finding;
}

TEST(BucketBlame, OneRankOrUnequalStepCountsAreErrors) {
  EXPECT_THROW(
      bucket_blame(timeline(1, 3, 2, -1, 0), ranks_with_phases(1, -1, "", 0), step_times(10)),
      Error);
  auto ready = timeline(2, 3, 2, -1, 0);
  ready[1].pop_back();
  EXPECT_THROW(bucket_blame(ready, ranks_with_phases(2, -1, "", 0), step_times(10)), Error);
}

}  // namespace
}  // namespace ddpb::bench
