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
    // Four golden-section cuts leave 0.618^4 of log(100): within a factor of 2 of the minimum.
    EXPECT_LT(std::fabs(std::log(t.chosen_mb() / best)), std::log(2.0)) << "best " << best;
    for (const auto& c : t.candidates()) EXPECT_GE(c.median_ms, bowl(t.chosen_mb(), best));
  }
}

TEST(BucketCapTuner, FirstPointsAreTheGoldenSectionOfOneToHundredMb) {
  BucketCapTuner t;
  EXPECT_DOUBLE_EQ(*t.next(), 5.81);  // exp(ln 100 * (1 - 0.618)), three digits
  t.report(10.0);
  EXPECT_DOUBLE_EQ(*t.next(), 17.2);  // exp(ln 100 * 0.618)
  t.report(20.0);                     // the left point was faster: the next one lies left of it
  EXPECT_LT(*t.next(), 5.81);
  const auto j = t.to_json();
  EXPECT_EQ(j["candidates"].size(), 2u);
  EXPECT_EQ(j["chosen_mb"], 5.81);
}

TEST(WarmupBucketSearch, AppliesEachCandidateOnScheduleThenTheChoice) {
  std::vector<std::pair<int64_t, double>> applied;
  int64_t step = 0;
  int agreed = 0;
  WarmupBucketSearch search([&](double mb) { applied.emplace_back(step, mb); },
                            [&](double v) {
                              ++agreed;
                              return v;
                            });
  for (step = 1; step <= BucketCapTuner::kStepsNeeded + 5; ++step)
    search.after_step(step, bowl(applied.empty() ? 25.0 : applied.back().second, 12.0));
  ASSERT_EQ(applied.size(), static_cast<size_t>(BucketCapTuner::kEvaluations + 1));
  EXPECT_EQ(applied.front().first, 1) << "the first candidate after DDP's first-iteration rebuild";
  const int per = BucketCapTuner::kSettleSteps + BucketCapTuner::kMeasuredSteps;
  for (size_t i = 1; i < applied.size(); ++i) EXPECT_EQ(applied[i].first, 1 + per * int64_t(i));
  EXPECT_EQ(applied.back().first, BucketCapTuner::kStepsNeeded)
      << "fixed before the measured steps";
  EXPECT_EQ(applied.back().second, search.tuner().chosen_mb());
  EXPECT_EQ(agreed, BucketCapTuner::kEvaluations) << "one agreed median per candidate";
}

}  // namespace
}  // namespace ddpb::bench
