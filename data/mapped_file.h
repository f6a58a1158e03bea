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

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ddpb
