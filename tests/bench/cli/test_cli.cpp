// Bad input to `ddpbench run`: a one-line reason, exit code 2, and no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../util/run_cli.h"
#include "../../util/temp_dir.h"
#include "workloads/model.h"
#include "workloads/safetensors.h"

namespace {

using Result = ddpb::testing::CliResult;

Result run(const std::string& args) {
  return ddpb::testing::run_cli(args);
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ddpb_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs with --out into the temp dir and checks exit 2, the message, and no leftovers.
  void expect_usage_error(const std::string& args, const std::string& needle) {
    std::string out = (dir_ / "out.json").string();
    Result r = run("run " + args + " --steps 1 --warmup 0 --out " + out);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << "missing '" << needle << "' in:\n"
                                                        << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << "a failed run must not write a report";
    for (auto& e : std::filesystem::directory_iterator(dir_)) {
      EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "leftover " << e.path();
    }
  }
  std::filesystem::path dir_;
};

TEST_F(BadInput, UnknownWorkload) {
  expect_usage_error("--workload resnet", "unknown workload 'resnet'");
}

TEST_F(BadInput, UnknownDevice) {
  expect_usage_error("--workload mlp-small --device tpu", "unknown device 'tpu'");
}

TEST_F(BadInput, NonPositiveSizes) {
  expect_usage_error("--workload mlp-small --global-batch 0",
                     "--global-batch must be an integer from 1");
  expect_usage_error("--workload mlp-small --global-batch -3",
                     "--global-batch must be an integer from 1");
  Result r = run("run --workload mlp-small --steps 0");
  EXPECT_EQ(r.code, 2) << r.output;
}

TEST_F(BadInput, CudaWithoutGpu) {
  Result probe = run("workloads");
  ASSERT_EQ(probe.code, 0);
  expect_usage_error("--workload mlp-small --device cuda:0", "cuda:0 requested");
}

TEST_F(BadInput, UnreadableInitFrom) {
  expect_usage_error("--workload mlp-small --init-from /nonexistent/x.safetensors",
                     "/nonexistent/x.safetensors");
}

TEST_F(BadInput, MismatchedInitFrom) {
  // Parameters of gpt-tiny cannot start mlp-small.
  std::string dump = (dir_ / "dump").string();
  Result r =
      run("run --workload gpt-tiny --steps 1 --warmup 0 --global-batch 2 --quiet --dump " + dump);
  ASSERT_EQ(r.code, 0) << r.output;
  expect_usage_error("--workload mlp-small --init-from " + dump + "/init.safetensors",
                     "has no tensor 'layers.0.weight'");
}

// A ResNet checkpoint whose class count (fc) or channels do not match the preset: one line,
// naming the tensor and both shapes.
TEST_F(BadInput, ResNetCheckpointOfAnotherShape) {
  std::string dump = (dir_ / "dump").string();
  Result r =
      run("run --workload resnet-tiny --steps 1 --warmup 0 --global-batch 2 --quiet "
          "--dump " +
          dump);
  ASSERT_EQ(r.code, 0) << r.output;
  auto tensors = ddpb::load_safetensors(dump + "/init.safetensors", ddpb::Device::cpu());
  for (auto& t : tensors) {
    if (t.name == "fc.weight")
      t.tensor = ddpb::Tensor::zeros({5, 512}, ddpb::DType::F32, ddpb::Device::cpu());
    if (t.name == "fc.bias")
      t.tensor = ddpb::Tensor::zeros({5}, ddpb::DType::F32, ddpb::Device::cpu());
  }
  const std::string edited = (dir_ / "five_classes.safetensors").string();
  ddpb::save_safetensors(edited, tensors);
  expect_usage_error("--workload resnet-tiny --init-from " + edited,
                     "'fc.weight' is f32[5, 512] on cpu:0, the model needs f32[10, 512]");
}

// Rank options and bucket options each ask their own trait of the design's row.
TEST_F(BadInput, RankOptionsNeedRanksThatAreProcesses) {
  expect_usage_error("--workload mlp-small --backend gloo",
                     "--backend, --inject-fault and --rendezvous are for ranks that are processes: "
                     "use --mode ddp");
  expect_usage_error("--mode dp --world-size 2 --workload mlp-small --rendezvous file:///tmp/x",
                     "are for ranks that are processes");
  expect_usage_error("--mode dp --world-size 2 --workload mlp-small --accumulate 2",
                     "need --mode ddp");
  expect_usage_error("--mode fsdp2 --workload mlp-small",
                     "--mode must be single, dp, ddp, zero1, zero2, zero1-pytorch, fsdp, "
                     "fsdp-grad-op, fsdp-no-shard or fsdp-hybrid");
}

TEST_F(BadInput, SyncBatchNormNeedsDdpAndBatchNorm) {
  expect_usage_error("--workload resnet-tiny --sync-bn",
                     "--sync-bn needs ranks that are processes (SyncBatchNorm over their process "
                     "group): use --mode ddp");
  expect_usage_error("--mode ddp --world-size 2 --workload mlp-small --sync-bn",
                     "--sync-bn needs a model with BatchNorm layers");
  expect_usage_error("--mode fsdp --world-size 2 --workload mlp-small --sync-bn",
                     "--sync-bn needs a model with BatchNorm layers");
}

TEST_F(BadInput, ChannelsLastIsForImageWorkloads) {
  expect_usage_error("--workload mlp-small --channels-last",
                     "--channels-last applies to image workloads");
}

TEST_F(BadInput, UnknownFlagAndBadValues) {
  Result r = run("run --workload mlp-small --bogus 3");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run("run --workload mlp-small --steps many");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run("run --workload mlp-small --optimizer lion --steps 1 --warmup 0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown optimizer 'lion'"), std::string::npos) << r.output;
  r = run("run --workload mlp-small --precision fp16 --steps 1 --warmup 0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--precision must be fp32, tf32 or bf16, got 'fp16'"), std::string::npos)
      << r.output;
  r = run("frobnicate");
  EXPECT_EQ(r.code, 2) << r.output;
}

// P28: CLI11's conversion errors reached the user as "Could not convert: --devices =
// 2147483648". A count is parsed as every integer flag is (its range said), and a value given
// to a switch is named as such; one line, exit code 2.
TEST_F(BadInput, ValuesCLI11CannotConvertAreNamedWithWhatTheFlagTakes) {
  for (const auto& [args, said] : std::vector<std::pair<std::string, std::string>>{
           {"project x --devices 2147483648",
            "--devices: '2147483648' is not in 1..1048576 (device counts such as 8,64,512)"},
           {"project x --devices 8,abc",
            "--devices: 'abc' is not in 1..1048576 (device counts such as 8,64,512)"},
           {"project x --devices 0",
            "--devices: '0' is not in 1..1048576 (device counts such as 8,64,512)"},
           {"run --workload mlp-small --quiet=maybe",
            "--quiet is a switch: give it without a value (got --quiet=maybe)"},
           {"run --workload mlp-small --no-overlap=xyz",
            "--no-overlap is a switch: give it without a value (got --no-overlap=xyz)"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_EQ(r.output, "ddpbench: error: " + said + "\n") << args;
  }
}

TEST_F(BadInput, ErrorIsOneLine) {
  Result r = run("run --workload nope");
  EXPECT_EQ(r.code, 2);
  // Only the config line is allowed before the error; the error itself is a single line.
  size_t err = r.output.find("error:");
  ASSERT_NE(err, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n', err), r.output.size() - 1) << r.output;
}

TEST(Cli, SuccessfulRunWritesAValidRecord) {
  auto out =
      std::filesystem::temp_directory_path() / ("ddpb_ok_" + std::to_string(::getpid()) + ".json");
  Result r = run("run --workload mlp-small --steps 2 --warmup 1 --global-batch 8 --quiet --out " +
                 out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(std::filesystem::exists(out));
  EXPECT_GT(std::filesystem::file_size(out), 100u);
  std::filesystem::remove(out);
}

// Note [Workload families]: the table the PyTorch peers read instead of copies of the presets.
TEST(WorkloadsCommand, JsonListsEveryPresetWithWhatThePeersNeed) {
  Result r = run("workloads --json");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto table = nlohmann::json::parse(r.output);
  ASSERT_EQ(table.size(), ddpb::workload_presets().size());
  for (const auto& p : table) {
    const ddpb::WorkloadSpec& spec = ddpb::find_workload(p.at("name"));
    EXPECT_EQ(p.at("family"), spec.family);
    EXPECT_EQ(p.at("parameters"), ddpb::estimated_parameter_count(spec)) << spec.name;
    EXPECT_EQ(p.at("default_batch"), ddpb::default_global_batch(spec.name)) << spec.name;
  }
  const auto gpt = std::find_if(table.begin(), table.end(),
                                [](const auto& p) { return p.at("name") == "gpt-tiny"; });
  ASSERT_NE(gpt, table.end());
  EXPECT_EQ(gpt->at("n_head"), 4);
  EXPECT_EQ(gpt->at("batch").at("input"), nlohmann::json::array({8, 64}));
  EXPECT_EQ(gpt->at("batch").at("input_dtype"), "i32");
}

}  // namespace

namespace {

// docs/metrics.md "Bytes on the wire": every design's gradient collectives put on the wire
// what it promises, from the record's parameter count alone: DP's reduce_add (n - 1) copies
// of the gradients over device 0's link, DDP's AllReduce 2(n - 1)/n of them (the ZeRO
// paper's 2Ψ); the record's expected value says the same. Every collective counts by op.
TEST(BytesOnTheWire, EachDesignMovesWhatItPromises) {
  ddpb::testing::TempDir dir("wire");
  struct Case {
    std::string args;
    int world;
    double factor;  // gradient bytes on the wire per gradient byte
    std::vector<std::string> ops;
  } cases[] = {
      {"--mode dp --world-size 3 --global-batch 24",
       3,
       2.0,
       {"scatter", "broadcast", "gather", "reduce"}},
      {"--mode ddp --world-size 3 --global-batch 24 --bucket-cap-mb 4", 3, 4.0 / 3, {"allreduce"}},
      {"--mode ddp --world-size 2 --global-batch 16", 2, 1.0, {"allreduce"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const std::string out = dir / "run.json";
    const Result r =
        run("run --workload mlp-small --steps 2 --warmup 1 --quiet " + c.args + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    const nlohmann::json record = nlohmann::json::parse(std::ifstream(out));
    const double gradient_bytes = 4.0 * record["workload"]["parameters"].get<double>();
    const nlohmann::json& comm = record["summary"]["comm"];
    EXPECT_DOUBLE_EQ(comm["gradient_bus_bytes_per_step"].get<double>(), gradient_bytes * c.factor);
    EXPECT_DOUBLE_EQ(comm["expected_gradient_bus_bytes"].get<double>(), gradient_bytes * c.factor);
    std::vector<std::string> ops;
    double bus = 0;
    for (const nlohmann::json& op : comm["by_op"]) {
      ops.push_back(op["op"]);
      EXPECT_GE(op["calls"].get<int>(), 1);
      bus += op["bus_bytes"].get<double>();
    }
    EXPECT_EQ(ops, c.ops);
    EXPECT_DOUBLE_EQ(comm["bus_bytes_per_step"].get<double>(), bus);
  }
}

}  // namespace
