// --bucket-cap-mb auto as real DDP processes: every rank ends on rank 0's choice, the record
// keeps the search, and the run equals one with that cap fixed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "bench/run/bucket_tuner.h"
#include "ddp_runs.h"

namespace ddpb {
namespace {

using testing::CliResult;
using testing::max_param_rel_diff;
using testing::run_cli;
using testing::TempDir;
using testing::ddp_runs::record;
using testing::ddp_runs::train;

TEST(DdpBucketAutotune, EqualsTheChosenFixedCap) {
  TempDir dir("ddp_autotune");
  const std::string base = "--mode ddp --world-size 2 --workload mlp-small --global-batch 16";
  const std::string autotuned = train(dir, "auto", base + " --bucket-cap-mb auto", 3, 3, 39);
  const nlohmann::json rec = record(dir, "auto");
  const auto& search = rec["mode"]["details"]["bucket_autotune"];
  ASSERT_EQ(search["candidates"].size(), 6u) << search.dump();
  const double chosen = search["chosen_mb"].get<double>();
  double fastest = 1e300;
  for (const auto& c : search["candidates"])
    fastest = std::min(fastest, c["median_ms"].get<double>());
  // Note [Bucket autotune ties]: the largest cap within kTie of the fastest.
  const double tie = fastest * (1.0 + bench::BucketCapTuner::kTie);
  double largest_in_tie = 0;
  for (const auto& c : search["candidates"]) {
    if (c["median_ms"].get<double>() <= tie)
      largest_in_tie = std::max(largest_in_tie, c["cap_mb"].get<double>());
  }
  EXPECT_EQ(chosen, largest_in_tie) << search.dump();
  // mlp-small's 12.1 MiB of gradients: the search stops there (Note [Bucket autotune range]).
  EXPECT_LT(search["range_mb"][1].get<double>(), 12.2);
  // The buckets of the measured steps are the chosen cap's (mlp-small's 12 MiB of gradients in
  // 1 MiB first bucket plus buckets of at most the cap).
  const std::string fixed =
      train(dir, "fixed", base + fmt::format(" --bucket-cap-mb {:g}", chosen), 3, 3, 39);
  EXPECT_EQ(record(dir, "fixed")["mode"]["details"]["buckets_rebuilt"],
            rec["mode"]["details"]["buckets_rebuilt"]);
  const double d = max_param_rel_diff(autotuned, fixed);
  std::printf("autotune chose %g MB; against the fixed cap: max rel diff %g\n", chosen, d);
  EXPECT_EQ(d, 0.0) << "two ranks sum each element in the same order whatever the buckets";
}

TEST(DdpBucketAutotune, TooShortAWarmupOrUnusedParametersAreUsageErrors) {
  const std::string base = "run --mode ddp --world-size 2 --workload mlp-small --steps 1 --quiet ";
  CliResult r = run_cli(base + "--bucket-cap-mb auto --warmup 5");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("at least 39 steps"), std::string::npos) << r.output;
  r = run_cli(base + "--bucket-cap-mb auto --find-unused-params");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_cli("run --mode single --workload mlp-small --steps 1 --quiet --bucket-cap-mb auto");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_cli(base + "--bucket-cap-mb automatic");
  EXPECT_EQ(r.code, 2) << r.output;
}

}  // namespace
}  // namespace ddpb
