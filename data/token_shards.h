// Token shards on disk for the GPT workloads, in the two formats users already have:
//  - nanoGPT's train.bin: raw little-endian uint16 token ids, nothing else;
//  - llm.c's shards (fineweb_train_000001.bin ...): a header of 256 int32 (magic 20240520,
//    version 1, token count), then that many uint16 token ids.
// The format is told from each file's first four bytes. A path is one file or a folder of
// *.bin shards (read in name order). Files are memory-mapped; nothing is read up front but
// the headers.
//
// Note [Token windows]
// ~~~~~~~~~~~~~~~~~~~~
// Sample i is the i-th window of seq_len + 1 consecutive tokens of the shards, windows laid end
// to end with one token shared (x = window[0 .. T-1], y = window[1 .. T]), as llm.c's loader
// advances by T tokens; a window never crosses a shard's end. The sampler picks which windows a
// rank reads, so its shuffle is the "sampled offset" of nanoGPT's get_batch, over offsets that
// are multiples of T. A token id >= the vocabulary fails the sample, naming the file and the
// byte offset of the token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/mapped_file.h"

namespace ddpb {

// llm.c's shard header.
inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;  // uint16 tokens
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

class TokenShardDataset final : public Dataset {
 public:
  // Throws UsageError naming the file: no .bin shard in a folder, a raw file of odd byte
  // length, an llm.c header with another version or a token count the file does not hold, or
  // no window of seq_len + 1 tokens in any shard.
  TokenShardDataset(const std::string& path, int seq_len, int vocab);

  int64_t size() const override { return windows_; }
  Shape x_shape() const override { return {seq_len_}; }
  DType x_dtype() const override { return DType::I32; }
  Shape y_shape() const override { return {seq_len_}; }
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override;
  std::string source() const override { return "tokens"; }
  int64_t sample_bytes(int64_t) const override { return 2 * (seq_len_ + 1); }

  struct Shard {
    MappedFile file;
    bool llmc = false;  // llm.c's format (else nanoGPT's raw)
    int64_t header_bytes = 0;
    int64_t tokens = 0;
    int64_t first_window = 0;  // the index of its first window in the dataset
    int64_t windows = 0;
  };
  const std::vector<Shard>& shards() const { return shards_; }
  int64_t tokens() const;

 private:
  int seq_len_;
  int vocab_;
  std::vector<Shard> shards_;
  int64_t windows_ = 0;
};

// The shard files of a path: the file itself, or the *.bin files of a folder in name order.
// Throws UsageError when there is none.
std::vector<std::string> token_shard_files(const std::string& path);

// Writes `tokens` to `path` in llm.c's format (llmc) or nanoGPT's raw one, atomically.
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens, bool llmc);

}  // namespace ddpb
