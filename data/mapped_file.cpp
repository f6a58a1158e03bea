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
    if (p == MAP_FAILED) ::close(fd);
    DDPB_USAGE_CHECK(p != MAP_FAILED) << "cannot map " << path << ": " << std::strerror(err);
    data_ = static_cast<const uint8_t*>(p);
  }
  fd_ = fd;  // kept for read_at
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

size_t MappedFile::read_at(size_t offset, size_t n, void* dst) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t got =
        ::pread(fd_, static_cast<char*>(dst) + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

}  // namespace ddpb
