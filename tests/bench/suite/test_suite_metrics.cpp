// A run that computed the wrong thing says so in the suite record: derive_correctness
// (bench/suite/suite_metrics.h) on parameter files with known differences.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "bench/run/designs.h"
#include "bench/suite/suite_metrics.h"
#include "workloads/safetensors.h"

namespace ddpb::bench {
namespace {

void write_params(const std::string& path, std::vector<float> w, std::vector<float> b) {
  const auto n = static_cast<int64_t>(w.size());
  save_safetensors(
      path,
      {{"layer.weight", Tensor::from_floats(w, {n}, Device::cpu())},
       {"layer.bias", Tensor::from_floats(b, {static_cast<int64_t>(b.size())}, Device::cpu())}});
}

// derive_correctness over a suite given as JSON; returns the JSON it leaves.
nlohmann::json with_correctness(const nlohmann::json& suite, const std::string& dir) {
  reports::SuiteRecord record = reports::SuiteRecord::from_json(suite);
  for (const Design& d : designs()) record.designs.push_back(d.info);
  derive_correctness(record, dir);
  return record.to_json();
}

TEST(SuiteCorrectness, AWrongResultFailsAndARightOnePasses) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ddpb_correctness_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "params");
  write_params((dir / "params/ref.safetensors").string(), {3, 4, 0, 0}, {1, 1});
  write_params((dir / "params/same.safetensors").string(), {3, 4, 0, 0}, {1, 1});
  // The weight is off by (0.3, 0.4): ||d|| / ||ref|| = 0.5 / 5 = 0.1.
  write_params((dir / "params/wrong.safetensors").string(), {3.3f, 4.4f, 0, 0}, {1, 1});
  nlohmann::json suite = {
      {"suite", {{"correctness_threshold", 1e-2}, {"hook_correctness_threshold", 5e-2}}},
      {"runs",
       {{{"id", "m/single/w1/b8"},
         {"mode", "single"},
         {"status", "ok"},
         {"metrics", nlohmann::json::object()},
         {"workload", "m"},
         {"world_size", 1},
         {"global_batch", 8},
         {"variant", "b8"},
         {"params", "params/ref.safetensors"}},
        {{"id", "m/dp/w2"},
         {"mode", "dp"},
         {"status", "ok"},
         {"metrics", nlohmann::json::object()},
         {"workload", "m"},
         {"world_size", 2},
         {"global_batch", 8},
         {"variant", ""},
         {"params", "params/same.safetensors"}},
        {{"id", "m/ddp/w2"},
         {"mode", "ddp"},
         {"status", "ok"},
         {"metrics", nlohmann::json::object()},
         {"workload", "m"},
         {"world_size", 2},
         {"global_batch", 8},
         {"variant", ""},
         {"params", "params/wrong.safetensors"}}}}};
  suite = with_correctness(suite, dir.string());
  const auto& same = suite["runs"][1]["correctness"];
  const auto& wrong = suite["runs"][2]["correctness"];
  EXPECT_TRUE(same["passed"].get<bool>()) << same.dump();
  EXPECT_DOUBLE_EQ(same["rel_l2_diff"].get<double>(), 0.0);
  EXPECT_FALSE(wrong["passed"].get<bool>()) << wrong.dump();
  EXPECT_NEAR(wrong["rel_l2_diff"].get<double>(), 0.1, 1e-6);
  EXPECT_NEAR(wrong["max_rel_diff"].get<double>(), 0.1, 1e-6);  // 0.4 / 4
  EXPECT_EQ(wrong["worst_tensor"], "layer.weight");
  EXPECT_EQ(wrong["reference"], "m/single/w1/b8");
  std::filesystem::remove_all(dir);
}

// BatchNorm normalises per device: a DP or DDP ResNet run is not compared with one device
// (it differs by design), except DDP with --sync-bn.
TEST(SuiteCorrectness, PerDeviceBatchNormIsSkippedWithTheReason) {
  auto run = [](const std::string& mode, std::vector<std::string> args) {
    return nlohmann::json{
        {"id", "resnet-tiny/" + mode + "/w2"},
        {"mode", mode},
        {"status", "ok"},
        {"metrics", nlohmann::json::object()},
        {"workload", "resnet-tiny"},
        {"world_size", 2},
        {"global_batch", 64},
        {"variant", ""},
        {"args", args},
        {"config",
         {{"mode", mode},
          {"sync_bn", std::find(args.begin(), args.end(), "--sync-bn") != args.end()}}},
        {"params", "params/missing.safetensors"}};
  };
  nlohmann::json suite = {
      {"suite", nlohmann::json::object()},
      {"runs", {run("dp", {"run"}), run("ddp", {"run"}), run("ddp", {"run", "--sync-bn"})}}};
  suite = with_correctness(suite, ::testing::TempDir());
  EXPECT_NE(suite["runs"][0]["correctness"]["skipped"].get<std::string>().find("BatchNorm"),
            std::string::npos);
  EXPECT_TRUE(suite["runs"][1]["correctness"].contains("skipped"));
  // --sync-bn is compared with its reference (which this suite lacks: skipped for that reason).
  EXPECT_NE(suite["runs"][2]["correctness"]["skipped"].get<std::string>().find("no single-device"),
            std::string::npos);
}

// Only runs a correctness check compares save their final parameters (gpt2-small's are 0.5 GB):
// a parallel run with a reference, and that reference; not a single-device run nobody
// compares with, nor a run whose correctness is skipped by design, nor its reference.
TEST(SuiteCorrectness, OnlyComparedRunsSaveTheirParameters) {
  auto run = [](const std::string& id, const std::string& workload, const std::string& mode,
                int world, int batch, std::vector<std::string> args = {"run"}) {
    return nlohmann::json{{"id", id},
                          {"mode", mode},
                          {"status", "pending"},
                          {"workload", workload},
                          {"world_size", world},
                          {"global_batch", batch},
                          {"variant", ""},
                          {"args", args},
                          {"config", {{"mode", mode}}}};
  };
  nlohmann::json suite = {
      {"suite", nlohmann::json::object()},
      {"runs",
       {run("m/single/w1", "m", "single", 1, 8), run("m/single/w1/b16", "m", "single", 1, 16),
        run("m/ddp/w2", "m", "ddp", 2, 16), run("g/single/w1", "g", "single", 1, 8),
        run("resnet-tiny/single/w1/b64", "resnet-tiny", "single", 1, 64),
        run("resnet-tiny/dp/w2", "resnet-tiny", "dp", 2, 64)}}};
  reports::SuiteRecord record = reports::SuiteRecord::from_json(suite);
  for (const Design& d : designs()) record.designs.push_back(d.info);
  std::vector<std::string> saving;
  for (const auto& r : record.runs) {
    if (needs_parameters(record, r)) saving.push_back(r.id);
  }
  EXPECT_EQ(saving, (std::vector<std::string>{"m/single/w1/b16", "m/ddp/w2"}));
}

}  // namespace
}  // namespace ddpb::bench
