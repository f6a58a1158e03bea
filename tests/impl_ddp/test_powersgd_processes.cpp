// --comm-hook powersgd as real DDP processes on CPU (Gloo): the bytes on the wire, the
// records and trace spans of its collectives, accumulation, and its usage errors. Its
// numerics are checked against a float64 reference in tests/bench/run/test_replay.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

#include "ddp_runs.h"

namespace ddpb {
namespace {

using testing::CliResult;
using testing::max_param_rel_diff;
using testing::run_cli;
using testing::TempDir;
using testing::ddp_runs::record;
using testing::ddp_runs::train;

const char* kMlp = "--mode ddp --world-size 2 --workload mlp-small --global-batch 16";

// mlp-small: three [1024,1024] weights, one [10,1024], biases of 1024, 1024, 1024 and 10.
// Uncompressed: every element. At rank r each weight sends P [rows, r] and Q [cols, r]
// ((10 + 1024) * r * 2 < 10240 holds for r <= 4, so the last layer compresses too); the
// biases go uncompressed.
int64_t mlp_small_bytes(int r) {
  const int64_t biases = 3 * 1024 + 10;
  if (r == 0) return 4 * (3 * 1024 * 1024 + 10 * 1024 + biases);
  return 4 * (3 * (1024 + 1024) * r + (10 + 1024) * r + biases);
}

TEST(DdpPowerSgd, BytesFallByTheExpectedFactorFromTheStartIteration) {
  TempDir dir("ddp_powersgd_bytes");
  for (int r : {1, 2}) {
    const std::string name = "rank" + std::to_string(r);
    train(dir, name,
          std::string(kMlp) + " --comm-hook powersgd --powersgd-start-iter 2 --powersgd-rank " +
              std::to_string(r) + " --trace " + (dir / name) + ".trace.json",
          3, 4);
    const nlohmann::json rec = record(dir, name);
    ASSERT_EQ(rec["steps"].size(), 4u);
    for (const auto& step : rec["steps"]) {
      const int64_t want = mlp_small_bytes(step["step"].get<int>() <= 2 ? 0 : r);
      EXPECT_EQ(step["mode"]["comm_bytes"].get<int64_t>(), want)
          << "rank " << r << " step " << step["step"];
    }
    std::printf("powersgd rank %d: %lld bytes per step instead of %lld (%.0fx less)\n", r,
                static_cast<long long>(mlp_small_bytes(r)),
                static_cast<long long>(mlp_small_bytes(0)),
                static_cast<double>(mlp_small_bytes(0)) / static_cast<double>(mlp_small_bytes(r)));
    // Its collectives, in their order, and the compute between them, in the record and the
    // trace.
    for (const auto& b : rec["steps"].back()["mode"]["buckets"]) {
      std::string names;
      for (const auto& c : b["collectives"]) names += c["name"].get<std::string>() + " ";
      EXPECT_TRUE(names == "uncompressed P Q " || names == "P Q " || names == "uncompressed ")
          << "bucket " << b["bucket"] << ": " << names;
      EXPECT_GT(b["hook_compute_ms"].get<double>(), 0.0);
    }
    std::ifstream in(dir / (name + ".trace.json"));
    const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* span : {"powersgd P bucket 0", "powersgd Q bucket 0",
                             "powersgd.compute_q bucket 0", "powersgd.decompress bucket 0"})
      EXPECT_NE(trace.find(span), std::string::npos) << span;
  }
}

// PowerSGD compresses the accumulated gradient, which is the larger batch's gradient.
TEST(DdpPowerSgd, AccumulationAndBucketViewsEqualTheLargerBatch) {
  TempDir dir("ddp_powersgd_acc");
  const std::string hook = " --comm-hook powersgd --powersgd-start-iter 2 --powersgd-rank 2";
  const std::string big =
      train(dir, "big", "--mode ddp --world-size 2 --workload mlp-small --global-batch 32" + hook);
  const std::string acc = train(dir, "acc",
                                "--mode ddp --world-size 2 --workload mlp-small --global-batch 8 "
                                "--accumulate 4 --grad-as-bucket-view" +
                                    hook);
  const double d = max_param_rel_diff(acc, big);
  std::printf("powersgd, accumulate 4 x batch 8 with bucket views vs batch 32: max rel diff %.3g\n",
              d);
  EXPECT_LE(d, 1e-4);
}

TEST(DdpPowerSgd, OptionsAreCheckedAsUsageErrors) {
  for (const char* bad :
       {"--powersgd-rank 2", "--comm-hook powersgd --powersgd-start-iter 1",
        "--comm-hook powersgd --powersgd-rank 0", "--comm-hook fp16 --powersgd-no-warm-start"}) {
    CliResult r = run_cli(std::string("run ") + kMlp + " --steps 1 --quiet " + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("powersgd"), std::string::npos) << r.output;
  }
}

// Issue 25, P1: --powersgd-rank 1024 with no minimum compression rate made a step of
// mlp-small take 50 s (P and Q larger than the matrices, orthogonalised every step). Such a
// rank now sends the matrices uncompressed, and a rank whose orthogonalisation still dwarfs
// the step is warned about.
TEST(DdpPowerSgd, ARankThatCannotCompressIsNotOrthogonalisedAndADominantHookIsWarned) {
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult big = run_cli(std::string("run ") + kMlp +
                                " --steps 3 --warmup 1 --quiet --comm-hook powersgd "
                                "--powersgd-start-iter 2 --powersgd-rank 1024 "
                                "--powersgd-min-compression-rate 0");
  EXPECT_EQ(big.code, 0) << big.output;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  const CliResult heavy = run_cli(std::string("run ") + kMlp +
                                  " --steps 2 --warmup 1 --quiet --comm-hook powersgd "
                                  "--powersgd-start-iter 2 --powersgd-rank 200");
  EXPECT_EQ(heavy.code, 0) << heavy.output;
  EXPECT_NE(heavy.output.find("ddpbench: warning: the powersgd comm hook's own compute took"),
            std::string::npos)
      << heavy.output;
}

}  // namespace
}  // namespace ddpb
