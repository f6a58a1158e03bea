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
//
// Note [Token splits]
// ~~~~~~~~~~~~~~~~~~~
// A folder holding train and val shards is two datasets, not one: nanoGPT's prepare.py writes
// train.bin, val.bin and meta.pkl into one folder, llm.c's scripts NAME_train_*.bin and
// NAME_val_*.bin. Reading every *.bin of it would train on the validation tokens too, and
// silently: nothing in the window count shows it. So a folder with shards of both
// splits is read as its train split, or its val split with `--data-split val`; its other *.bin
// files are left out, and the start-up lines and the record (summary.loader: split, files,
// left_out) say which were read. A shard's split is told from its name: the word "train" or
// "val" alone, between '_', '-' or '.', or at the start before a shard number (nanoGPT's
// train.bin and val.bin, llm.c's NAME_train_000001.bin, train0.bin); "values.bin" or
// "trainer.bin" are neither. A folder of one split, or of none, is read whole.
//
// nanoGPT's meta.pkl beside the shards (data/nanogpt_meta.h) gives the vocabulary the ids were
// made with: a workload whose vocabulary is smaller is refused before training, naming both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/data_format.h"
#include "data/dataset.h"
#include "data/mapped_file.h"

namespace ddpb {

// llm.c's shard header.
inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;  // uint16 tokens
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

class TokenShardDataset final : public Dataset {
 public:
  // Reads the shards select_token_shards(path, split) gives. Throws UsageError naming the
  // file: no .bin shard in a folder, no shard of `split`, a raw file of odd byte length, an
  // llm.c header with another version or a token count the file does not hold, no window of
  // seq_len + 1 tokens in any shard, or a meta.pkl that cannot be read or whose vocab_size is
  // above `vocab`.
  TokenShardDataset(const std::string& path, int seq_len, int vocab,
                    std::optional<DataSplit> split = std::nullopt);

  int64_t size() const override { return windows_; }
  Shape x_shape() const override { return {seq_len_}; }
  DType x_dtype() const override { return DType::I32; }
  Shape y_shape() const override { return {seq_len_}; }
  void fill(int64_t index, int64_t epoch, void* x, int32_t* y) const override;
  std::string source() const override { return "tokens"; }
  int64_t sample_bytes(int64_t) const override { return 2 * (seq_len_ + 1); }
  DataFiles data_files() const override;

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
  std::optional<DataSplit> split() const { return split_; }
  std::optional<int64_t> meta_vocab_size() const { return meta_vocab_size_; }

 private:
  int seq_len_;
  int vocab_;
  std::vector<Shard> shards_;
  int64_t windows_ = 0;
  std::optional<DataSplit> split_;
  std::vector<std::string> left_out_;
  std::optional<int64_t> meta_vocab_size_;
};

// The split a shard's file name says (Note [Token splits]), if any.
std::optional<DataSplit> shard_split(const std::string& filename);

// Which shards of a path are read (Note [Token splits]).
struct TokenShardSelection {
  std::vector<std::string> files;     // read, in name order
  std::optional<DataSplit> split;     // chosen among a folder's shards
  std::vector<std::string> left_out;  // the folder's other *.bin files, in name order
};
// The file itself, or the *.bin files of a folder in name order, of `split` when it is given
// or when the folder holds both splits (then the train split). Throws UsageError naming the
// path: a folder without *.bin, no shard of the asked split, or `split` with a single file.
TokenShardSelection select_token_shards(const std::string& path, std::optional<DataSplit> split);

// nanoGPT's meta.pkl beside the shards of `path` (in the folder, or beside the file): its
// vocab_size, checked against the vocabulary `vocab` of `model` (named in the message);
// nullopt when there is no meta.pkl. Throws UsageError when it cannot be read or its
// vocab_size is above `vocab`.
std::optional<int64_t> check_token_meta(const std::string& path, int64_t vocab,
                                        const std::string& model);

// Writes `tokens` to `path` in llm.c's format (llmc) or nanoGPT's raw one, atomically.
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens, bool llmc);

}  // namespace ddpb
