#include "bench/suite/results_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/check.h"

namespace ddpb::bench {
namespace {

// The PID the holder wrote, or "?" while it has not yet (or wrote nothing readable).
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "?" : pid;
}

}  // namespace

ResultsLock::ResultsLock(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  DDPB_USAGE_CHECK(fd_ >= 0) << "cannot lock the results folder " << dir << ": " << path << ": "
                             << std::strerror(errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string pid = holder_pid(fd_);
    ::close(fd_);
    fd_ = -1;
    DDPB_USAGE_CHECK(err != EWOULDBLOCK)
        << "the results folder " << dir << " is in use by another ddpbench suite (PID " << pid
        << "): wait for it to finish or stop it";
    DDPB_USAGE_FAIL() << "cannot lock the results folder " << dir << ": " << std::strerror(err);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

ResultsLock::~ResultsLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (Note [Results folder lock])
}

}  // namespace ddpb::bench
