#include "data/token_shards.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>

#include "base/atomic_file.h"
#include "core/check.h"
#include "data/nanogpt_meta.h"

namespace ddpb {
namespace {

namespace fs = std::filesystem;

int32_t header_word(const MappedFile& f, int i) {
  int32_t v = 0;
  std::memcpy(&v, f.data() + 4 * i, 4);
  return v;
}

// Reads one shard's layout from its header (llm.c) or its length (raw).
TokenShardDataset::Shard open_shard(const std::string& path) {
  TokenShardDataset::Shard s{MappedFile(path)};
  const MappedFile& f = s.file;
  s.llmc = f.size() >= 4 && header_word(f, 0) == kLlmcMagic;
  if (s.llmc) {
    DDPB_USAGE_CHECK(static_cast<int64_t>(f.size()) >= kLlmcHeaderBytes)
        << path << ": an llm.c shard (magic " << kLlmcMagic << ") shorter than its "
        << kLlmcHeaderBytes << "-byte header";
    const int32_t version = header_word(f, 1), count = header_word(f, 2);
    DDPB_USAGE_CHECK(version == kLlmcVersion)
        << path << ": bad llm.c header: version " << version << " (only " << kLlmcVersion
        << ", uint16 tokens, is known)";
    const int64_t held = (static_cast<int64_t>(f.size()) - kLlmcHeaderBytes) / 2;
    // As llm.c's loader, any mismatch is refused: fewer claimed would leave the rest unread
    // without a word (issue 48, P26), more would read past the file.
    DDPB_USAGE_CHECK(count == held && (f.size() - kLlmcHeaderBytes) % 2 == 0)
        << path << ": bad llm.c header: it claims " << count << " tokens, the file holds " << held
        << (((f.size() - kLlmcHeaderBytes) % 2) ? " and an odd byte" : "");
    s.header_bytes = kLlmcHeaderBytes;
    s.tokens = count;
  } else {
    DDPB_USAGE_CHECK(f.size() % 2 == 0)
        << path << ": a raw token file (nanoGPT's uint16 train.bin) of odd byte length "
        << f.size();
    s.tokens = static_cast<int64_t>(f.size() / 2);
  }
  return s;
}

}  // namespace

std::optional<DataSplit> shard_split(const std::string& filename) {
  const std::string stem = fs::path(filename).stem().string();
  for (const DataSplit split : {DataSplit::Train, DataSplit::Val}) {
    const std::string word(enum_name(split));
    for (size_t at = stem.find(word); at != std::string::npos; at = stem.find(word, at + 1)) {
      const size_t end = at + word.size();
      const auto separator = [&](size_t i) { return std::strchr("_-.", stem[i]) != nullptr; };
      // The word alone, or at the start followed by a shard number (train0.bin): "values" and
      // "trainer" are other words.
      const bool numbered =
          at == 0 && end < stem.size() && std::isdigit(static_cast<unsigned char>(stem[end]));
      if ((at == 0 || separator(at - 1)) && (end == stem.size() || separator(end) || numbered))
        return split;
    }
  }
  return std::nullopt;
}

namespace {

std::vector<std::string> bin_files(const std::string& folder) {
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (e.path().extension() == ".bin") files.push_back(e.path().string());
  }
  DDPB_USAGE_CHECK(!ec) << "cannot list " << folder << ": " << ec.message();
  DDPB_USAGE_CHECK(!files.empty()) << folder << ": no token shard (*.bin) in the folder";
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TokenShardSelection select_token_shards(const std::string& path, std::optional<DataSplit> split) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    DDPB_USAGE_CHECK(!split) << "--data-split " << enum_name(*split) << " chooses among the "
                             << "shards of a folder, but --data " << path << " is one file";
    return {{path}, std::nullopt, {}};
  }
  const std::vector<std::string> all = bin_files(path);
  std::map<DataSplit, std::vector<std::string>> by_split;
  for (const std::string& f : all) {
    if (const auto s = shard_split(f)) by_split[*s].push_back(f);
  }
  if (!split && by_split.size() < 2) return {all, std::nullopt, {}};  // one split, or none
  const DataSplit chosen = split.value_or(DataSplit::Train);
  const std::vector<std::string>& files = by_split[chosen];
  DDPB_USAGE_CHECK(!files.empty())
      << "--data-split " << enum_name(chosen) << ": " << path << " has no " << enum_name(chosen)
      << " shard (" << enum_name(chosen) << "*.bin or NAME_" << enum_name(chosen)
      << "_*.bin) among its " << all.size() << " *.bin file(s), the first "
      << fs::path(all.front()).filename().string();
  TokenShardSelection out{files, chosen, {}};
  std::set_difference(all.begin(), all.end(), files.begin(), files.end(),
                      std::back_inserter(out.left_out));
  return out;
}

std::optional<int64_t> check_token_meta(const std::string& path, int64_t vocab,
                                        const std::string& model) {
  std::error_code ec;
  const fs::path folder =
      fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path meta = (folder.empty() ? fs::path(".") : folder) / "meta.pkl";
  if (!fs::exists(meta, ec)) return std::nullopt;
  const int64_t size = read_meta_vocab_size(meta.string());
  DDPB_USAGE_CHECK(size <= vocab) << meta.string() << ": vocab_size " << size
                                  << " is above the vocabulary of " << vocab << " of " << model
                                  << ": ids up to " << size - 1
                                  << " would not fit its embedding (use a "
                                  << "workload with a vocabulary of at least " << size << ")";
  return size;
}

TokenShardDataset::TokenShardDataset(const std::string& path, int seq_len, int vocab,
                                     std::optional<DataSplit> split)
    : seq_len_(seq_len), vocab_(vocab) {
  DDPB_USAGE_CHECK(seq_len >= 1 && vocab >= 2 && vocab <= 65536)
      << "token shards: need seq_len >= 1 and a vocabulary of 2 to 65536 (uint16 ids), got "
      << seq_len << " and " << vocab;
  TokenShardSelection selection = select_token_shards(path, split);
  split_ = selection.split;
  left_out_ = std::move(selection.left_out);
  meta_vocab_size_ = check_token_meta(path, vocab, "the model");
  for (const std::string& file : selection.files) {
    Shard s = open_shard(file);
    s.first_window = windows_;
    s.windows = s.tokens > seq_len ? (s.tokens - 1) / seq_len : 0;
    windows_ += s.windows;
    shards_.push_back(std::move(s));
  }
  DDPB_USAGE_CHECK(windows_ > 0) << path << ": no shard holds a window of " << seq_len + 1
                                 << " tokens (seq_len + 1)";
}

DataFiles TokenShardDataset::data_files() const {
  DataFiles d;
  d.unit = "tokens";
  for (const Shard& s : shards_) d.files.push_back({s.file.path(), s.tokens, s.windows});
  if (split_) d.split = std::string(enum_name(*split_));
  d.left_out = left_out_;
  d.meta_vocab_size = meta_vocab_size_;
  return d;
}

int64_t TokenShardDataset::tokens() const {
  int64_t n = 0;
  for (const Shard& s : shards_) n += s.tokens;
  return n;
}

void TokenShardDataset::fill(int64_t index, int64_t /*epoch*/, void* x, int32_t* y) const {
  DDPB_CHECK(index >= 0 && index < windows_)
      << "TokenShardDataset: sample " << index << " is outside [0, " << windows_ << ")";
  const auto it = std::upper_bound(shards_.begin(), shards_.end(), index,
                                   [](int64_t i, const Shard& s) { return i < s.first_window; });
  const Shard& s = *(it - 1);
  const int64_t first = (index - s.first_window) * seq_len_;  // token position in the shard
  // Note [Reading a file that can change]: the window is read, not touched through the
  // mapping, so a shard truncated while the run reads it is an error naming it (issue 48,
  // P11: it was a SIGBUS naming nothing).
  thread_local std::vector<uint16_t> window;
  window.resize(static_cast<size_t>(seq_len_ + 1));
  const size_t offset = static_cast<size_t>(s.header_bytes + 2 * first);
  const size_t want = 2 * window.size();
  const size_t got = s.file.read_at(offset, want, window.data());
  if (got < want) {
    throw BadSampleError(s.file.path() + ": sample " + std::to_string(index) +
                         "'s tokens at bytes " + std::to_string(offset) + ".." +
                         std::to_string(offset + want) + " are past the file's end now (it held " +
                         std::to_string(s.file.size()) +
                         " bytes when the run opened it): it changed while the run read it");
  }
  auto* out = static_cast<int32_t*>(x);
  for (int64_t t = 0; t <= seq_len_; ++t) {
    const uint16_t id = window[static_cast<size_t>(t)];
    if (id >= vocab_) {
      throw BadSampleError(s.file.path() + ": token id " + std::to_string(id) + " at byte offset " +
                           std::to_string(s.header_bytes + 2 * (first + t)) +
                           " is not below the vocabulary of " + std::to_string(vocab_));
    }
    if (t < seq_len_) out[t] = id;
    if (t > 0) y[t - 1] = id;
  }
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens, bool llmc) {
  std::string bytes;
  if (llmc) {
    std::vector<int32_t> header(256, 0);
    header[0] = kLlmcMagic;
    header[1] = kLlmcVersion;
    header[2] = static_cast<int32_t>(tokens.size());
    bytes.append(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  }
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  try {
    write_file_atomic(path, bytes, "token shard");
  } catch (const WriteFileError& e) {
    throw Error(e.what());
  }
}

}  // namespace ddpb
