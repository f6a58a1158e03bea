// Token shards on disk (data/token_shards.h): nanoGPT's raw train.bin and llm.c's shards, the
// windows they give (Note [Token windows]), and every bad input named with its file (and the
// byte offset of a bad token); a folder's train and val splits (Note [Token splits]) and
// nanoGPT's meta.pkl.
#include "data/token_shards.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../util/error_of.h"
#include "../util/temp_dir.h"
#include "core/check.h"
#include "data/nanogpt_meta.h"

namespace ddpb {
namespace {

using testing::error_of;

using testing::TempDir;

std::vector<uint16_t> ramp(int n, int vocab) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<uint16_t>(i % vocab);
  return t;
}

// pickle.dumps({'vocab_size': 600}, protocol=4), from Python 3.11: a meta.pkl of vocabulary 600
// (what prepare.py writes holds itos and stoi too: tests/data/test_nanogpt_meta.cpp).
const char kMeta600[] = "\x80\x04\x95\x14\0\0\0\0\0\0\0}\x94\x8c\x0avocab_size\x94M\x58\x02s.";

// A folder as nanoGPT's prepare.py leaves it: train.bin (41 tokens: 10 windows of 4 + 1),
// val.bin (13 tokens: 3 windows) and meta.pkl.
void write_nanogpt_folder(const TempDir& dir) {
  write_token_shard(dir / "train.bin", ramp(41, 50), false);
  write_token_shard(dir / "val.bin", ramp(13, 50), false);
  std::ofstream(dir / "meta.pkl", std::ios::binary).write(kMeta600, sizeof(kMeta600) - 1);
}

TEST(TokenShards, BothFormatsGiveWindowsOfSeqPlusOneTokens) {
  TempDir dir("tokens");
  for (const bool llmc : {false, true}) {
    const std::string path = dir / (llmc ? "shard.bin" : "train.bin");
    write_token_shard(path, ramp(21, 100), llmc);
    TokenShardDataset d(path, 4, 100);
    EXPECT_EQ(d.size(), 5) << "(21 - 1) / 4 windows";
    EXPECT_EQ(d.shards().front().llmc, llmc);
    std::vector<int32_t> x(4), y(4);
    d.fill(2, 0, x.data(), y.data());
    EXPECT_EQ(x, (std::vector<int32_t>{8, 9, 10, 11}));
    EXPECT_EQ(y, (std::vector<int32_t>{9, 10, 11, 12}));
    EXPECT_EQ(d.sample_bytes(0), 10);
    EXPECT_EQ(d.source(), "tokens");
  }
}

TEST(TokenShards, AFolderIsItsShardsInNameOrderAndNoWindowCrossesOne) {
  TempDir dir("token_folder");
  write_token_shard(dir / "b_000001.bin", ramp(9, 50), true);   // 2 windows of 4+1
  write_token_shard(dir / "a_000000.bin", ramp(13, 50), true);  // 3 windows
  std::ofstream(dir / "README.txt") << "not a shard";
  TokenShardDataset d(dir.str(), 4, 50);
  ASSERT_EQ(d.shards().size(), 2u);
  EXPECT_EQ(d.shards()[0].file.path(), dir / "a_000000.bin");
  EXPECT_EQ(d.size(), 5);
  std::vector<int32_t> x(4), y(4);
  d.fill(3, 0, x.data(), y.data());  // the second file's first window
  EXPECT_EQ(x, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(d.tokens(), 22);
}

// Issue 26: bad token files are named, with the offset for a bad token.
TEST(TokenShards, BadFilesAreNamedWithTheReason) {
  TempDir dir("token_bad");
  std::ofstream(dir / "odd.bin") << "abc";
  EXPECT_NE(error_of<UsageError>([&] { TokenShardDataset(dir / "odd.bin", 4, 100); })
                .find(dir / "odd.bin" + ": a raw token file (nanoGPT's uint16 train.bin) of odd "
                                        "byte length 3"),
            std::string::npos);
  // An llm.c header with another version, and one that claims more tokens than it holds.
  std::vector<int32_t> header(256, 0);
  header[0] = kLlmcMagic, header[1] = 7, header[2] = 4;
  std::ofstream(dir / "v7.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), 1024);
  EXPECT_NE(
      error_of<UsageError>([&] { TokenShardDataset(dir / "v7.bin", 4, 100); }).find("version 7"),
      std::string::npos);
  header[1] = kLlmcVersion, header[2] = 1000;
  std::ofstream(dir / "short.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), 1024);
  EXPECT_NE(error_of<UsageError>([&] {
              TokenShardDataset(dir / "short.bin", 4, 100);
            }).find("it claims 1000 tokens, the file holds 0"),
            std::string::npos);
  // Issue 48, P26: one that claims fewer than it holds (llm.c refuses any mismatch).
  header[2] = 2;
  {
    std::ofstream f(dir / "long.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    const std::vector<uint16_t> tokens = ramp(6, 50);
    f.write(reinterpret_cast<const char*>(tokens.data()), 12);
  }
  EXPECT_NE(error_of<UsageError>([&] {
              TokenShardDataset(dir / "long.bin", 4, 100);
            }).find("it claims 2 tokens, the file holds 6"),
            std::string::npos);
  // Too short for one window, and an empty folder.
  write_token_shard(dir / "tiny.bin", ramp(4, 100), false);
  EXPECT_NE(error_of<UsageError>([&] {
              TokenShardDataset(dir / "tiny.bin", 4, 100);
            }).find("no shard holds a window of 5 tokens"),
            std::string::npos);
  TempDir empty("token_empty");
  EXPECT_NE(
      error_of<UsageError>([&] { TokenShardDataset(empty.str(), 4, 100); }).find("no token shard"),
      std::string::npos);
  // A token id at or above the vocabulary: the file and the byte offset of that token.
  std::vector<uint16_t> t = ramp(9, 50);
  t[6] = 50;
  write_token_shard(dir / "vocab.bin", t, true);
  TokenShardDataset d(dir / "vocab.bin", 4, 50);
  std::vector<int32_t> x(4), y(4);
  EXPECT_NO_THROW(d.fill(0, 0, x.data(), y.data()));
  try {
    d.fill(1, 0, x.data(), y.data());
    ADD_FAILURE() << "a token of the vocabulary's size was read";
  } catch (const BadSampleError& e) {
    EXPECT_NE(std::string(e.what()).find(dir / "vocab.bin" + ": token id 50 at byte offset " +
                                         std::to_string(1024 + 2 * 6)),
              std::string::npos)
        << e.what();
  }
}

// Issue 43: a nanoGPT folder trained on val.bin too (4734 windows = 4261 train + 473 val). Its
// train split is read unless val is asked for, and what was read and left out is said.
// Issue 48, P11: a shard truncated while a run reads it killed the run with SIGBUS, naming no
// file. The window is read, not touched through the mapping: the error names the file.
TEST(TokenShards, AShardTruncatedWhileReadIsNamed) {
  TempDir dir("token_truncated");
  write_token_shard(dir / "train.bin", ramp(4096 * 8 + 1, 50), true);
  TokenShardDataset d(dir / "train.bin", 8, 100);
  std::vector<int32_t> x(8), y(8);
  d.fill(4000, 0, x.data(), y.data());
  std::filesystem::resize_file(dir / "train.bin", 1024 + 2 * 4096);  // the first pages remain
  d.fill(1, 0, x.data(), y.data());
  EXPECT_EQ(x[0], 8);
  const std::string said = error_of<BadSampleError>([&] { d.fill(4000, 0, x.data(), y.data()); });
  EXPECT_NE(said.find(dir / "train.bin" +
                      ": sample 4000's tokens at bytes 65024..65042 are past the file's end now"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("it changed while the run read it"), std::string::npos) << said;
}

TEST(TokenShards, ANanoGptFolderReadsItsTrainSplitOrTheValOneOnAsk) {
  TempDir dir("token_split");
  write_nanogpt_folder(dir);
  const TokenShardDataset train(dir.str(), 4, 1000);
  EXPECT_EQ(train.size(), 10) << "train.bin's windows only, not 10 + 3";
  EXPECT_EQ(train.split(), DataSplit::Train);
  EXPECT_EQ(train.meta_vocab_size(), 600);
  const DataFiles files = train.data_files();
  EXPECT_EQ(files.unit, "tokens");
  ASSERT_EQ(files.files.size(), 1u);
  EXPECT_EQ(files.files[0].path, dir / "train.bin");
  EXPECT_EQ(files.files[0].count, 41);
  EXPECT_EQ(files.files[0].samples, 10);
  EXPECT_EQ(files.split, "train");
  EXPECT_EQ(files.left_out, (std::vector<std::string>{dir / "val.bin"}));
  const std::string text = describe_data_files(files);
  EXPECT_NE(text.find("1 file(s), 41 tokens, 10 samples, split train, meta.pkl vocab_size "
                      "600\n  " +
                      dir / "train.bin" + ": 41 tokens, 10 samples\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("left out (not the split read; --data-split chooses): " + dir / "val.bin"),
            std::string::npos)
      << text;

  const TokenShardDataset val(dir.str(), 4, 1000, DataSplit::Val);
  EXPECT_EQ(val.size(), 3);
  EXPECT_EQ(val.data_files().left_out, (std::vector<std::string>{dir / "train.bin"}));
  // The negative control: the same shards without a split in their names are read whole.
  TempDir plain("token_nosplit");
  write_token_shard(plain / "a.bin", ramp(41, 50), false);
  write_token_shard(plain / "b.bin", ramp(13, 50), false);
  const TokenShardDataset both(plain.str(), 4, 1000);
  EXPECT_EQ(both.size(), 13);
  EXPECT_FALSE(both.split());
  EXPECT_TRUE(both.data_files().left_out.empty());
}

// A long list is cut after kMaxListedFiles files, its rest counted.
TEST(TokenShards, TheDescriptionOfManyShardsCountsTheRest) {
  DataFiles d;
  d.unit = "tokens";
  for (int i = 0; i < 10; ++i) d.files.push_back({"s" + std::to_string(i) + ".bin", 100 + i, 9});
  for (int i = 0; i < 9; ++i) d.left_out.push_back("v" + std::to_string(i) + ".bin");
  const std::string text = describe_data_files(d);
  EXPECT_NE(text.find("10 file(s), 1045 tokens, 90 samples\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  s7.bin: 107 tokens, 9 samples\n  ... and 2 more file(s), 217 tokens\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("s8.bin"), std::string::npos) << text;
  EXPECT_NE(text.find(" v7.bin and 1 more\n"), std::string::npos) << text;
}

// llm.c names its splits as words (fineweb_train_000001.bin); nanoGPT starts with them.
TEST(TokenShards, ASplitIsTheNamesWordOrItsStart) {
  for (const char* name : {"train.bin", "train_0.bin", "train0.bin", "fineweb_train_000001.bin",
                           "/d/val_x/tinyshakespeare-train.bin"})
    EXPECT_EQ(shard_split(name), DataSplit::Train) << name;
  for (const char* name : {"val.bin", "fineweb_val_000000.bin", "tinystories.val.bin"})
    EXPECT_EQ(shard_split(name), DataSplit::Val) << name;
  for (const char* name : {"shard_000000.bin", "constrained.bin", "interval_1.bin", "x.bin",
                           "values.bin", "trainer.bin"})
    EXPECT_FALSE(shard_split(name)) << name;
  TempDir dir("token_llmc_split");
  for (const char* name :
       {"fineweb_train_000001.bin", "fineweb_train_000002.bin", "fineweb_val_000000.bin"})
    write_token_shard(dir / name, ramp(9, 50), true);
  const TokenShardSelection s = select_token_shards(dir.str(), std::nullopt);
  EXPECT_EQ(s.files, (std::vector<std::string>{dir / "fineweb_train_000001.bin",
                                               dir / "fineweb_train_000002.bin"}));
  EXPECT_EQ(s.left_out, (std::vector<std::string>{dir / "fineweb_val_000000.bin"}));
}

// A split the folder does not have, or a split of one file, is a usage error naming the path;
// a folder of one split is read whole unless another is asked for.
TEST(TokenShards, AMissingSplitIsAUsageError) {
  TempDir dir("token_split_bad");
  write_token_shard(dir / "train.bin", ramp(41, 50), false);
  EXPECT_EQ(TokenShardDataset(dir.str(), 4, 100).size(), 10);
  EXPECT_FALSE(TokenShardDataset(dir.str(), 4, 100).split());
  EXPECT_EQ(TokenShardDataset(dir.str(), 4, 100, DataSplit::Train).split(), DataSplit::Train);
  EXPECT_NE(error_of<UsageError>([&] {
              TokenShardDataset(dir.str(), 4, 100, DataSplit::Val);
            }).find("--data-split val: " + dir.str() + " has no val shard"),
            std::string::npos);
  EXPECT_NE(error_of<UsageError>([&] {
              TokenShardDataset(dir / "train.bin", 4, 100, DataSplit::Train);
            }).find("is one file"),
            std::string::npos);
}

// meta.pkl's vocab_size must fit the model's vocabulary: both numbers are named.
TEST(TokenShards, MetaVocabSizeIsCheckedAgainstTheModel) {
  TempDir dir("token_meta");
  write_nanogpt_folder(dir);
  EXPECT_EQ(check_token_meta(dir.str(), 600, "gpt-x"), 600);
  EXPECT_EQ(check_token_meta(dir / "train.bin", 50257, "gpt2-small"), 600) << "beside the file";
  const std::string m = error_of<UsageError>([&] { check_token_meta(dir.str(), 512, "gpt-tiny"); });
  EXPECT_NE(
      m.find(dir / "meta.pkl" + ": vocab_size 600 is above the vocabulary of 512 of gpt-tiny"),
      std::string::npos)
      << m;
  EXPECT_NE(
      error_of<UsageError>([&] { TokenShardDataset(dir.str(), 4, 599); }).find("vocab_size 600"),
      std::string::npos);
  std::ofstream(dir / "meta.pkl") << "not a pickle";
  EXPECT_NE(error_of<UsageError>([&] {
              TokenShardDataset(dir.str(), 4, 1000);
            }).find(dir / "meta.pkl" + ": cannot read vocab_size"),
            std::string::npos);
  TempDir none("token_nometa");
  write_token_shard(none / "train.bin", ramp(41, 50), false);
  EXPECT_FALSE(check_token_meta(none.str(), 2, "gpt-tiny"));
}

}  // namespace
}  // namespace ddpb
