// `ddpbench project` from one run record onto another device class (Note [Compute rate] in
// bench/project/compute_rate.h): refused in one line without a rate, projected at
// --device-flops with it, the efficiency 100% at one device and never above, no exponent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "../../util/run_cli.h"

namespace {

namespace fs = std::filesystem;
using ddpb::testing::run_cli;

class ProjectCommand : public ::testing::Test {
 protected:
  // One short DDP run record, made once for every test here.
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ddpb_project_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    record_ = (dir_ / "ddp.json").string();
    const auto r = run_cli(
        "run --workload mlp-small --mode ddp --world-size 2 --global-batch 16 "
        "--steps 3 --warmup 1 --quiet --out " +
        record_);
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static nlohmann::json load(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }

  static inline fs::path dir_;
  static inline std::string record_;
};

TEST_F(ProjectCommand, AGpuTopologyWithoutARateIsRefusedInOneLine) {
  const auto r = run_cli("project " + record_ + " --devices 8,64 --topology nvlink+ib-ndr");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(r.output.rfind("ddpbench: error: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("--device-flops"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("H100 SXM"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(" ms"), std::string::npos) << "no CPU time on a GPU topology";
}

TEST_F(ProjectCommand, DeviceFlopsFromARunRecordPutsComputeAtThatRate) {
  const std::string out = (dir_ / "p.json").string();
  const auto r =
      run_cli("project " + record_ +
              " --devices 8,64 --topology nvlink+ib-ndr --device-flops 400e12 --json " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mlp-small: compute at 400.0 TFLOP/s per device (--device-flops)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::regex_search(r.output, std::regex("[0-9][eE][-+]?[0-9]"))) << r.output;
  const auto p = load(out);
  const auto& w = p["workloads"][0];
  EXPECT_EQ(w["compute_rate"]["ddp"]["flops_per_s"].get<double>(), 4e14);
  ASSERT_EQ(w["points"][0]["devices"], 1);
  EXPECT_EQ(w["points"][0]["designs"]["ddp"]["efficiency"].get<double>(), 1.0);
  for (const auto& pt : w["points"])
    EXPECT_LE(pt["designs"]["ddp"]["efficiency"].get<double>(), 1.0);
  // mlp-small's 3.1M parameters a step at 400 TFLOP/s: compute is microseconds, not the CPU's
  // milliseconds.
  const auto record = load(record_);
  EXPECT_LT(w["points"][0]["designs"]["ddp"]["step_ms"].get<double>(),
            record["summary"]["step_time_ms"]["median"].get<double>());
  // Twice the rate: less compute, so a shorter one-device step.
  const auto fast =
      run_cli("project " + record_ +
              " --devices 8 --topology nvlink+ib-ndr --device-flops 800e12 --json " + out);
  ASSERT_EQ(fast.code, 0) << fast.output;
  EXPECT_LT(load(out)["workloads"][0]["points"][0]["designs"]["ddp"]["step_ms"].get<double>(),
            w["points"][0]["designs"]["ddp"]["step_ms"].get<double>());
}

TEST_F(ProjectCommand, ATopologyFileWithoutADeviceKeepsTheMeasuredTimes) {
  const std::string topo = (dir_ / "topo.json").string(), out = (dir_ / "m.json").string();
  std::ofstream(topo) << R"({"name": "lan", "node_size": 8,
                             "intra": {"alpha_us": 5, "bandwidth_GBps": 10}})";
  const auto r =
      run_cli("project " + record_ + " --devices 4 --topology " + topo + " --json " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("mlp-small: compute at "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("per device (as measured)"), std::string::npos) << r.output;
  EXPECT_EQ(load(out)["workloads"][0]["compute_rate"]["ddp"]["source"], "as measured");
}

}  // namespace
