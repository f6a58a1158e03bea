// Token shards on disk (data/token_shards.h): nanoGPT's raw train.bin and llm.c's shards, the
// windows they give (Note [Token windows]), and every bad input named with its file (and the
// byte offset of a bad token).
#include "data/token_shards.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../util/temp_dir.h"
#include "core/check.h"

namespace ddpb {
namespace {

using testing::TempDir;

std::vector<uint16_t> ramp(int n, int vocab) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<uint16_t>(i % vocab);
  return t;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no usage error)";
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
  EXPECT_NE(message_of([&] { TokenShardDataset(dir / "odd.bin", 4, 100); })
                .find(dir / "odd.bin" + ": a raw token file (nanoGPT's uint16 train.bin) of odd "
                                        "byte length 3"),
            std::string::npos);
  // An llm.c header with another version, and one that claims more tokens than it holds.
  std::vector<int32_t> header(256, 0);
  header[0] = kLlmcMagic, header[1] = 7, header[2] = 4;
  std::ofstream(dir / "v7.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), 1024);
  EXPECT_NE(message_of([&] { TokenShardDataset(dir / "v7.bin", 4, 100); }).find("version 7"),
            std::string::npos);
  header[1] = kLlmcVersion, header[2] = 1000;
  std::ofstream(dir / "short.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), 1024);
  EXPECT_NE(message_of([&] {
              TokenShardDataset(dir / "short.bin", 4, 100);
            }).find("it claims 1000 tokens, the file holds 0"),
            std::string::npos);
  // Too short for one window, and an empty folder.
  write_token_shard(dir / "tiny.bin", ramp(4, 100), false);
  EXPECT_NE(message_of([&] {
              TokenShardDataset(dir / "tiny.bin", 4, 100);
            }).find("no shard holds a window of 5 tokens"),
            std::string::npos);
  TempDir empty("token_empty");
  EXPECT_NE(message_of([&] { TokenShardDataset(empty.str(), 4, 100); }).find("no token shard"),
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

}  // namespace
}  // namespace ddpb
