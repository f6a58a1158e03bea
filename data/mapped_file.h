// A user-named input file mapped read-only into memory (Note [User-named inputs]: opened
// without blocking, a regular file only), for datasets that read samples in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddpb {

class MappedFile {
 public:
  // Throws UsageError naming the file when it cannot be opened or mapped, or is not a regular
  // file. An empty file maps to no bytes.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Copies up to `n` bytes at `offset` from the file itself (opened again, pread); returns
  // how many came, fewer where the file now ends sooner; throws Error naming the file when it
  // can no longer be opened or read. Note [Reading a file that can change]: a mapped page
  // past a truncated file's end raises SIGBUS, and kills the process naming no file.
  size_t read_at(size_t offset, size_t n, void* dst) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ddpb
