#include "data/mapped_file.h"

#include <fcntl.h>
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

size_t MappedFile::read_at(size_t offset, size_t n, void* dst) const {
  // Opened for each read: a dataset of a thousand shards (llm.c's fineweb) would otherwise
  // hold a descriptor per shard in every rank, past the usual `ulimit -n` of 1024.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(path_ + ": cannot open it again to read: " + std::strerror(errno));
  size_t done = 0;
  int err = 0;
  while (done < n) {
    const ssize_t got =
        ::pread(fd, static_cast<char*>(dst) + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) err = errno;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  if (err != 0) throw Error(path_ + ": cannot read it: " + std::strerror(err));
  return done;
}

}  // namespace ddpb
