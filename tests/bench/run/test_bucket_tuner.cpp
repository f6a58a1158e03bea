// The bucket-cap autotuner's search (bench/run/bucket_tuner.h) on made-up step times: it
// walks the golden-section points in log space, narrows towards the faster side, keeps the
// fastest candidate, and applies each cap exactly when the warm-up schedule says.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/run/bucket_tuner.h"

namespace ddpb::bench {
namespace {

// A step time with its minimum at `best` MB, convex in log(cap).
double bowl(double cap_mb, double best) {
  const double d = std::log(cap_mb / best);
  return 40.0 + 10.0 * d * d;
}

TEST(BucketCapTuner, NarrowsTowardsTheMinimumAndKeepsTheFastest) {
  for (const double best : {2.0, 12.0, 70.0}) {
    BucketCapTuner t;
    int evaluations = 0;
    while (auto cap = t.next()) {
      EXPECT_GE(*cap, BucketCapTuner::kMinMb);
      EXPECT_LE(*cap, BucketCapTuner::kMaxMb);
      t.report(bowl(*cap, best));
      ++evaluations;
    }
    EXPECT_EQ(evaluations, BucketCapTuner::kEvaluations);
    // Three golden-section cuts leave 0.618^3 of log(100): within a factor of 3 of the minimum.
    EXPECT_LT(std::fabs(std::log(t.chosen_mb() / best)), std::log(3.0)) << "best " << best;
    for (const auto& c : t.candidates())
      EXPECT_GE(c.median_ms * (1 + BucketCapTuner::kTie), bowl(t.chosen_mb(), best));
  }
}

TEST(BucketCapTuner, GoldenSectionOfOneToHundredMbThenTheTop) {
  BucketCapTuner t;
  EXPECT_DOUBLE_EQ(*t.next(), 5.81);  // exp(ln 100 * (1 - 0.618)), three digits
  t.report(10.0);
  EXPECT_DOUBLE_EQ(*t.next(), 17.2);  // exp(ln 100 * 0.618)
  t.report(20.0);                     // the left point was faster: the next one lies left of it
  EXPECT_LT(*t.next(), 5.81);
  for (int i = 2; i < BucketCapTuner::kEvaluations - 1; ++i) t.report(15.0);
  EXPECT_DOUBLE_EQ(*t.next(), 100.0) << "the top last";
  t.report(30.0);
  EXPECT_FALSE(t.next());
  const auto j = t.to_json();
  EXPECT_EQ(j["candidates"].size(), static_cast<size_t>(BucketCapTuner::kEvaluations));
  EXPECT_EQ(j["chosen_mb"], 5.81);
}

// Note [Bucket autotune ties]: within 5% of the fastest, the largest cap wins.
TEST(BucketCapTuner, NearTiesGoToTheLargerCap) {
  BucketCapTuner t;
  t.report(50.0);  // 5.81 MB
  t.report(50.5);  // 17.2 MB, 1% slower
  EXPECT_EQ(t.chosen_mb(), 17.2);
  t.report(45.0);  // the next, clearly faster
  EXPECT_LT(t.chosen_mb(), 5.81);
}

TEST(WarmupBucketSearch, AppliesEachCandidateOnScheduleThenTheChoice) {
  std::vector<std::pair<int64_t, double>> applied;
  int64_t step = 0;
  int agreed = 0;
  // Every candidate its own layout (the cap itself).
  WarmupBucketSearch search(
      0,
      [&](double mb) {
        applied.emplace_back(step, mb);
        return std::to_string(mb);
      },
      [&](double v) {
        ++agreed;
        return v;
      });
  for (step = 1; step <= BucketCapTuner::kStepsNeeded + 5; ++step)
    search.after_step(step, bowl(applied.empty() ? 25.0 : applied.back().second, 12.0));
  ASSERT_EQ(applied.size(), static_cast<size_t>(BucketCapTuner::kEvaluations + 1));
  const int lead = BucketCapTuner::kLeadSteps;
  EXPECT_EQ(applied.front().first, lead) << "the first candidate after the lead-in steps";
  const int per = BucketCapTuner::kSettleSteps + BucketCapTuner::kMeasuredSteps;
  for (size_t i = 1; i < applied.size(); ++i) EXPECT_EQ(applied[i].first, lead + per * int64_t(i));
  EXPECT_EQ(applied.back().first, BucketCapTuner::kStepsNeeded)
      << "fixed before the measured steps";
  EXPECT_EQ(applied.back().second, search.tuner().chosen_mb());
  EXPECT_EQ(agreed, BucketCapTuner::kEvaluations) << "one agreed median per candidate";
}

// Note [Bucket autotune range]: caps that give one layout are measured once.
TEST(WarmupBucketSearch, ASecondCapWithTheSameLayoutIsNotMeasuredAgain) {
  int64_t step = 0;
  int agreed = 0;
  std::vector<int64_t> applied_at;
  WarmupBucketSearch search(
      0,
      [&](double mb) {
        applied_at.push_back(step);
        return std::string(mb >= 10 ? "one bucket" : "many buckets");
      },
      [&](double v) {
        ++agreed;
        return v;
      });
  for (step = 1; step <= BucketCapTuner::kStepsNeeded; ++step) search.after_step(step, 50.0);
  EXPECT_EQ(agreed, 2) << "two layouts, two measurements";
  const auto& cs = search.tuner().candidates();
  ASSERT_EQ(cs.size(), static_cast<size_t>(BucketCapTuner::kEvaluations));
  int reused = 0;
  for (const auto& c : cs) reused += !c.measured;
  EXPECT_EQ(reused, BucketCapTuner::kEvaluations - 2);
  EXPECT_EQ(applied_at.back(), BucketCapTuner::kLeadSteps + 2 * (BucketCapTuner::kSettleSteps +
                                                                 BucketCapTuner::kMeasuredSteps))
      << "done after two candidates' steps";
}

TEST(BucketCapTuner, RangeStopsAtTheModelsGradientBytes) {
  EXPECT_EQ(BucketCapTuner(0).hi_mb(), 100.0);
  EXPECT_EQ(BucketCapTuner(500).hi_mb(), 100.0);
  EXPECT_EQ(BucketCapTuner(500).lo_mb(), 1.0);
  const BucketCapTuner small(1.8);  // gpt-tiny
  EXPECT_EQ(small.hi_mb(), 1.8);
  EXPECT_EQ(small.lo_mb(), 0.113);
  EXPECT_LE(*small.next(), 1.8);
}

}  // namespace
}  // namespace ddpb::bench
