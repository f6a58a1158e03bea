// Training on files, end to end through the binary (issue 26): token shards for gpt, an image
// folder for resnet, what the record says about the loader, the errors of bad data (usage
// before the run, run time for a corrupt sample found while training), and uneven inputs under
// DDP (fail naming the rank, or Join). The data comes from `ddpbench data make`, which writes
// the formats users have (llm.c / nanoGPT shards, ImageFolder JPEGs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../../util/run_cli.h"

namespace ddpb {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;
using testing::TempDir;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void expect_exit(const testing::CliResult& r, int code, const std::string& needle,
                 const std::string& what) {
  EXPECT_EQ(r.code, code) << what << "\n" << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << what << ": missing '" << needle << "' in\n"
                                                      << r.output;
}

// Makes a dataset with `ddpbench data make`; fails the test when it cannot.
void make_data(const std::string& args) {
  const auto r = run_cli("data make " + args);
  ASSERT_EQ(r.code, 0) << "data make " << args << "\n" << r.output;
}

const std::string kQuiet = " --warmup 0 --quiet";

TEST(RealData, GptTrainsOnLlmcAndNanoGptShardsAndTheRecordSaysSo) {
  TempDir dir("real_tokens");
  for (const std::string format : {"llmc", "nanogpt"}) {
    SCOPED_TRACE(format);
    const std::string data = dir / format, out = dir / (format + ".json");
    // nanoGPT reads one train.bin; llm.c several shards.
    const std::string shards = format == "llmc" ? " --shards 3" : " --shards 1";
    ASSERT_NO_FATAL_FAILURE(
        make_data("tokens --tokens 20000 --format " + format + shards + " --out " + data));
    const auto r =
        run_cli("run --workload gpt-tiny --steps 2 --data " + data + " --out " + out + kQuiet);
    ASSERT_EQ(r.code, 0) << r.output;
    const auto record = read_json(out);
    EXPECT_EQ(record["config"]["data"], data);
    const auto& loader = record["summary"]["loader"];
    EXPECT_EQ(loader["source"], "tokens");
    EXPECT_EQ(loader["workers"], 1);
    EXPECT_GE(loader["samples"].get<int>(), 2 * 8);
    EXPECT_EQ(loader["skipped_samples"], 0);
    ASSERT_EQ(record["steps"].size(), 2u);
    EXPECT_TRUE(record["steps"][0]["loader"].contains("data_wait_ms"));
    const auto valid = run_cli("validate " + out);
    EXPECT_EQ(valid.code, 0) << valid.output;
  }
}

TEST(RealData, ResnetTrainsOnAnImageFolderWithWorkersAndOnDeviceNormalization) {
  TempDir dir("real_images");
  const std::string data = dir / "images";
  ASSERT_NO_FATAL_FAILURE(
      make_data("imagefolder --classes 3 --images-per-class 8 --min-side 40 "
                "--max-side 72 --out " +
                data));
  for (const std::string extra : {" --num-workers 2", " --num-workers 0 --normalize-on-device"}) {
    SCOPED_TRACE(extra);
    const std::string out = dir / "r.json";
    const auto r = run_cli("run --workload resnet-tiny --global-batch 8 --steps 2 --data " + data +
                           " --out " + out + kQuiet + extra);
    ASSERT_EQ(r.code, 0) << r.output;
    const auto loader = read_json(out)["summary"]["loader"];
    EXPECT_EQ(loader["source"], "imagefolder");
    EXPECT_EQ(loader["normalize_on_device"], extra.find("normalize") != std::string::npos);
    EXPECT_GT(loader["fill_ms_total"].get<double>(), 0.0) << "decoding JPEGs takes time";
    const auto valid = run_cli("validate " + out);
    EXPECT_EQ(valid.code, 0) << valid.output;
  }
  const auto bench = run_cli(
      "data bench --workload resnet-tiny --global-batch 8 --batches 3 "
      "--data " +
      data);
  expect_exit(bench, 0, "samples/s", "data bench");
}

// Refused before any training, exit 2, one line naming the problem.
TEST(RealData, DataThatCannotFeedTheWorkloadIsAUsageError) {
  TempDir dir("real_usage");
  const std::string tokens = dir / "tokens", images = dir / "images", many = dir / "many";
  ASSERT_NO_FATAL_FAILURE(make_data("tokens --tokens 5000 --out " + tokens));
  ASSERT_NO_FATAL_FAILURE(
      make_data("imagefolder --classes 2 --images-per-class 4 --min-side 40 "
                "--max-side 48 --out " +
                images));
  ASSERT_NO_FATAL_FAILURE(
      make_data("imagefolder --classes 11 --images-per-class 1 --min-side 40 "
                "--max-side 48 --out " +
                many));
  const std::string run = "run --steps 1" + kQuiet + " --workload ";
  expect_exit(run_cli(run + "gpt-tiny --data " + (dir / "nowhere")), 2, "no such file or folder",
              "a missing path");
  expect_exit(run_cli(run + "resnet-tiny --data " + tokens), 2,
              "holds tokens data, but resnet-tiny trains on imagefolder", "tokens for resnet");
  expect_exit(run_cli(run + "gpt-tiny --data " + images), 2,
              "holds imagefolder data, but gpt-tiny trains on tokens", "images for gpt");
  expect_exit(run_cli(run + "mlp-small --data " + tokens), 2, "trains on synthetic data only",
              "files for mlp");
  expect_exit(run_cli(run + "resnet-tiny --data " + images), 2, "smaller than one global batch",
              "8 images, batch 32");
  expect_exit(run_cli(run + "resnet-tiny --global-batch 4 --data " + many), 2, "11 classes",
              "more classes than the model's 10");
  fs::create_directories(dir / "empty");
  expect_exit(run_cli(run + "resnet-tiny --data " + (dir / "empty") + " --data-format imagefolder"),
              2, "empty", "an empty folder");
}

// A corrupt JPEG found while training: exit 1 naming the file and where the loader was
// (default), or skipped and counted in the record (--on-bad-sample skip).
TEST(RealData, ACorruptImageFailsTheRunOrIsSkippedAndCounted) {
  TempDir dir("real_corrupt");
  const std::string data = dir / "images";
  ASSERT_NO_FATAL_FAILURE(
      make_data("imagefolder --classes 2 --images-per-class 6 --min-side 40 "
                "--max-side 48 --out " +
                data));
  const std::string bad = data + "/class_001/img_00002.jpg";
  const std::string bytes = testing::read_file_bytes(bad);
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << bytes.substr(0, 200);
  const std::string run =
      "run --workload resnet-tiny --global-batch 12 --steps 2 --data " + data + kQuiet;
  const auto failed = run_cli(run);
  expect_exit(failed, 1, bad + ": not a readable JPEG", "a truncated JPEG");
  EXPECT_NE(failed.output.find("assembling batch 0 of epoch 0"), std::string::npos)
      << failed.output;
  const std::string out = dir / "skip.json";
  const auto skipped = run_cli(run + " --on-bad-sample skip --out " + out);
  ASSERT_EQ(skipped.code, 0) << skipped.output;
  const auto loader = read_json(out)["summary"]["loader"];
  EXPECT_GE(loader["skipped_samples"].get<int>(), 2) << "one per epoch, two epochs";
  EXPECT_NE(loader["first_skip"].get<std::string>().find(bad), std::string::npos) << loader;
}

// Each rank its own share of 37 windows (--sampler unpadded): rank 1 has one batch fewer.
TEST(RealData, UnevenInputsFailNamingTheRankOrJoin) {
  TempDir dir("real_uneven");
  const std::string data = dir / "tokens";
  ASSERT_NO_FATAL_FAILURE(make_data("tokens --tokens 2500 --shards 1 --out " + data));
  const std::string run =
      "run --mode ddp --world-size 2 --workload gpt-tiny --global-batch 4 "
      "--steps 100 --epochs 1 --data " +
      data + kQuiet;
  expect_exit(run_cli(run + " --sampler unpadded"), 1,
              "rank(s) 1 ran out of input at step 10 while rank(s) 0 have more",
              "uneven inputs without join");
  const std::string out = dir / "join.json";
  const auto joined = run_cli(run + " --sampler unpadded --uneven-inputs join --out " + out);
  ASSERT_EQ(joined.code, 0) << joined.output;
  EXPECT_NE(joined.output.find("rank 1: joined after 9 steps of input, then shadowed 1"),
            std::string::npos)
      << joined.output;
  EXPECT_EQ(read_json(out)["steps"].size(), 10u);
  // PyTorch's DistributedSampler pads to an even split: no rank runs out.
  const std::string padded = dir / "padded.json";
  const auto even = run_cli(run + " --out " + padded);
  ASSERT_EQ(even.code, 0) << even.output;
  EXPECT_EQ(read_json(padded)["summary"]["loader"]["padded_samples"], 1);
}

}  // namespace
}  // namespace ddpb
