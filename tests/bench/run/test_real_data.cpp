// Training on files, end to end through the binary (issue 26): token shards for gpt, an image
// folder for resnet, what the record says about the loader, the errors of bad data (usage
// before the run, run time for a corrupt sample found while training), and uneven inputs under
// DDP (fail naming the rank, or Join). The data comes from `ddpbench data make`, which writes
// the formats users have (llm.c / nanoGPT shards, ImageFolder JPEGs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "../../util/run_cli.h"
#include "data/token_shards.h"

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

// Issue 48, P27: a `data make` that failed half-way left a partial dataset, which --data then
// accepted. Here the shard's write fails (ulimit -f): nothing is left at --out, nor beside it,
// and an --out that was an empty folder stays one.
TEST(RealData, ADataMakeThatFailsLeavesNoDataset) {
  TempDir dir("make_fails");
  for (const std::string& out : {dir / "tokens", dir / "empty"}) {
    if (out == dir / "empty") fs::create_directory(out);
    const auto r = run_cli("data make tokens --tokens 2000000 --out " + out + " 2>&1; echo rc=$?",
                           "ulimit -f 64;");
    EXPECT_NE(r.output.find("rc=1"), std::string::npos) << r.output;
    EXPECT_EQ(fs::exists(out), out == dir / "empty") << r.output;
    if (out == dir / "empty") EXPECT_TRUE(fs::is_empty(out));
  }
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path())) left.push_back(e.path().string());
  EXPECT_EQ(left, (std::vector<std::string>{dir / "empty"}));
  make_data("tokens --tokens 4096 --out " + (dir / "empty"));  // an empty folder is filled
  EXPECT_FALSE(fs::is_empty(dir / "empty"));
}

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

// A nanoGPT folder as prepare.py leaves it (gpt-tiny's seq_len is 64): train.bin of 40
// windows, val.bin of 5 and meta.pkl of `vocab` (pickle.dumps({'vocab_size': V}, protocol=4),
// as Python 3.11 writes it for V < 256 and for 256 <= V < 65536; prepare.py's own dict, with
// itos and stoi, is read in tests/data/test_nanogpt_meta.cpp).
void write_nanogpt_folder(const std::string& folder, int vocab) {
  fs::create_directories(folder);
  const auto ids = [](int n) {
    std::vector<uint16_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<uint16_t>(i % 65);
    return t;
  };
  write_token_shard(folder + "/train.bin", ids(64 * 40 + 1), false);
  write_token_shard(folder + "/val.bin", ids(64 * 5 + 1), false);
  std::string meta = "\x80\x04\x95";
  meta += std::string(vocab < 256 ? "\x13" : "\x14") + std::string(7, '\0');
  meta += "}\x94\x8c\x0avocab_size\x94";
  meta += vocab < 256
              ? std::string{'K', static_cast<char>(vocab)}
              : std::string{'M', static_cast<char>(vocab & 0xff), static_cast<char>(vocab >> 8)};
  meta += "s.";
  std::ofstream(folder + "/meta.pkl", std::ios::binary) << meta;
}

// Issue 43: a nanoGPT folder trained on val.bin too, and nothing said so. Its train split is
// read unless --data-split val; run, data bench and the record list the files read with their
// tokens, and what was left out; meta.pkl's vocab_size is read, and one above the workload's
// vocabulary is a usage error naming both.
TEST(RealData, ANanoGptFolderTrainsOnItsTrainSplitAndSaysSo) {
  TempDir dir("real_split");
  const std::string data = dir / "shakespeare_char";
  write_nanogpt_folder(data, 65);
  const std::string run = "run --workload gpt-tiny --global-batch 4 --steps 1" + kQuiet;
  for (const std::string split : {"", "train", "val"}) {
    SCOPED_TRACE("split '" + split + "'");
    const std::string out = dir / "r.json", flag = split.empty() ? "" : " --data-split " + split;
    const std::string read = split == "val" ? "val.bin" : "train.bin";
    const std::string other = split == "val" ? "train.bin" : "val.bin";
    const int tokens = split == "val" ? 64 * 5 + 1 : 64 * 40 + 1, windows = split == "val" ? 5 : 40;
    const auto r = run_cli(run + " --data " + data + " --out " + out + flag);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(fmt::format("data: {} (tokens): 1 file(s), {} tokens, {} samples, "
                                        "split {}, meta.pkl vocab_size 65\n  {}/{}: ",
                                        data, tokens, windows, split.empty() ? "train" : split,
                                        data, read)),
              std::string::npos)
        << r.output;
    EXPECT_NE(
        r.output.find("left out (not the split read; --data-split chooses): " + data + "/" + other),
        std::string::npos)
        << r.output;
    const auto loader = read_json(out)["summary"]["loader"];
    ASSERT_EQ(loader["files"].size(), 1u) << loader.dump();
    EXPECT_EQ(loader["files"][0]["path"], data + "/" + read);
    EXPECT_EQ(loader["files"][0]["tokens"], tokens);
    EXPECT_EQ(loader["files"][0]["samples"], windows) << "the windows of one split, not both";
    EXPECT_EQ(loader["split"], split.empty() ? "train" : split);
    EXPECT_EQ(loader["left_out"], nlohmann::json::array({data + "/" + other}));
    EXPECT_EQ(loader["meta_vocab_size"], 65);
    EXPECT_EQ(read_json(out)["config"]["data_split"], split);
    const auto valid = run_cli("validate " + out);
    EXPECT_EQ(valid.code, 0) << valid.output;
  }
  const auto bench = run_cli("data bench --workload gpt-tiny --global-batch 2 --batches 1 --data " +
                             data + " --data-split val");
  ASSERT_EQ(bench.code, 0) << bench.output;
  EXPECT_NE(bench.output.find("(tokens, 5 samples)"), std::string::npos) << bench.output;
  EXPECT_NE(bench.output.find("data: 1 file(s), 321 tokens, 5 samples, split val"),
            std::string::npos)
      << bench.output;

  expect_exit(run_cli(run + " --data " + data + " --data-split test"), 2,
              "--data-split must be train or val, got 'test'", "a wrong split name");
  expect_exit(run_cli(run + " --data-split val"), 2, "give --data DIR", "a split without --data");
  expect_exit(run_cli(run + " --data " + data + "/train.bin --data-split train"), 2, "is one file",
              "a split of one file");
  const std::string big = dir / "big_vocab";
  write_nanogpt_folder(big, 600);
  for (const std::string& command :
       {run + " --data " + big, "data bench --workload gpt-tiny --data " + big}) {
    expect_exit(run_cli(command), 2,
                big + "/meta.pkl: vocab_size 600 is above the vocabulary of 512 of gpt-tiny",
                "meta.pkl above the workload's vocabulary");
  }
  std::ofstream(big + "/meta.pkl") << "not a pickle";
  expect_exit(run_cli(run + " --data " + big), 2, big + "/meta.pkl: cannot read vocab_size",
              "an unreadable meta.pkl");
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
