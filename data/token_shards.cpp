#include "data/token_shards.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "base/atomic_file.h"
#include "core/check.h"

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
    DDPB_USAGE_CHECK(count >= 0 && count <= held && (f.size() - kLlmcHeaderBytes) % 2 == 0)
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

std::vector<std::string> token_shard_files(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    if (e.path().extension() == ".bin") files.push_back(e.path().string());
  }
  DDPB_USAGE_CHECK(!ec) << "cannot list " << path << ": " << ec.message();
  DDPB_USAGE_CHECK(!files.empty()) << path << ": no token shard (*.bin) in the folder";
  std::sort(files.begin(), files.end());
  return files;
}

TokenShardDataset::TokenShardDataset(const std::string& path, int seq_len, int vocab)
    : seq_len_(seq_len), vocab_(vocab) {
  DDPB_USAGE_CHECK(seq_len >= 1 && vocab >= 2 && vocab <= 65536)
      << "token shards: need seq_len >= 1 and a vocabulary of 2 to 65536 (uint16 ids), got "
      << seq_len << " and " << vocab;
  for (const std::string& file : token_shard_files(path)) {
    Shard s = open_shard(file);
    s.first_window = windows_;
    s.windows = s.tokens > seq_len ? (s.tokens - 1) / seq_len : 0;
    windows_ += s.windows;
    shards_.push_back(std::move(s));
  }
  DDPB_USAGE_CHECK(windows_ > 0) << path << ": no shard holds a window of " << seq_len + 1
                                 << " tokens (seq_len + 1)";
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
  const uint8_t* base = s.file.data() + s.header_bytes;
  auto* out = static_cast<int32_t*>(x);
  for (int64_t t = 0; t <= seq_len_; ++t) {
    uint16_t id = 0;
    std::memcpy(&id, base + 2 * (first + t), 2);
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
