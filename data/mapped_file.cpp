#include "data/mapped_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/input_file.h"
#include "core/check.h"

namespace ddpb {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = -1;
  try {
    fd = open_input_file(path);
  } catch (const InputFileError& e) {
    throw UsageError(e.what());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    DDPB_USAGE_FAIL() << "cannot stat " << path << ": " << std::strerror(err);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    DDPB_USAGE_CHECK(p != MAP_FAILED) << "cannot map " << path << ": " << std::strerror(err);
    data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ddpb
