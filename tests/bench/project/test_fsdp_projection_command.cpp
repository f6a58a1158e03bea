// `ddpbench project` of real FSDP run records (Note [Unit schedule] in
// bench/project/projection.h): full_shard and no_shard (which has no buckets) project at 8 and
// 64 devices with a positive step, on the measured topology and on a GPU topology at
// --device-flops, and the gathered units stay in the projected memory (Note [Projected memory]).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../../util/run_cli.h"

namespace {

namespace fs = std::filesystem;
using ddpb::testing::run_cli;

class FsdpProjectCommand : public ::testing::Test {
 protected:
  // Short FSDP runs of mlp-small at 2 ranks, made once for every test here.
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ddpb_project_fsdp_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    for (const char* mode : {"fsdp", "fsdp-no-shard"}) {
      const auto r = run_cli(std::string("run --workload mlp-small --mode ") + mode +
                             " --world-size 2 --global-batch 16 --steps 3 --warmup 1 --quiet"
                             " --out " +
                             record(mode));
      ASSERT_EQ(r.code, 0) << r.output;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string record(const std::string& mode) { return (dir_ / (mode + ".json")).string(); }
  static nlohmann::json load(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
  // The projected points of `mode`'s record at 8 and 64 devices, with `flags`.
  static nlohmann::json project(const std::string& mode, const std::string& flags) {
    const std::string out = (dir_ / ("p-" + mode + ".json")).string();
    const auto r =
        run_cli("project " + record(mode) + " --devices 8,64 " + flags + " --json " + out);
    EXPECT_EQ(r.code, 0) << r.output;
    if (r.code != 0) return nlohmann::json::array();
    return load(out)["workloads"][0]["points"];
  }

  static inline fs::path dir_;
};

void expect_positive_steps(const nlohmann::json& points, const std::string& mode) {
  int seen = 0;
  for (const auto& p : points) {
    const int n = p["devices"].get<int>();
    if (n != 8 && n != 64) continue;
    ++seen;
    ASSERT_TRUE(p["designs"].contains(mode)) << n << ": " << p.dump();
    const auto& d = p["designs"][mode];
    EXPECT_GT(d["step_ms"].get<double>(), 0) << n;
    EXPECT_GT(d["comm_ms"].get<double>(), 0) << n;
    EXPECT_LE(d["efficiency"].get<double>(), 1.0) << n;
  }
  EXPECT_EQ(seen, 2) << points.dump();
}

TEST_F(FsdpProjectCommand, FullShardProjectsOnTheMeasuredTopology) {
  expect_positive_steps(project("fsdp", ""), "fsdp");
}

TEST_F(FsdpProjectCommand, FullShardProjectsOnAGpuTopologyWithItsGatheredUnitsInMemory) {
  const nlohmann::json points = project("fsdp", "--topology nvlink+ib-ndr --device-flops 400e12");
  expect_positive_steps(points, "fsdp");
  // mlp-small's largest units are 1049600 parameters: full_shard holds two gathered (the
  // running and the prefetched one), 8.4 MB of fp32, at any device count.
  for (const auto& p : points) {
    if (p["devices"] != 64) continue;
    EXPECT_GT(p["designs"]["fsdp"]["memory_bytes"].get<double>(), 2 * 1049600 * 4.0);
  }
}

// no_shard's record has no buckets: it takes the unit model with its all-reduces.
TEST_F(FsdpProjectCommand, NoShardWithoutBucketsTakesTheUnitModel) {
  expect_positive_steps(project("fsdp-no-shard", ""), "fsdp-no-shard");
}

}  // namespace
