// Opening a file the user named as an input (a suite file, --init-from, a flight dump, a
// record), so that no such read can hang or grow without bound.
//
// Note [User-named inputs]
// open() of a FIFO blocks until a writer appears, and /dev/zero never ends: checking "regular
// file" after an ordinary open, or bounding only the size that stat reports, hangs on both.
// So every user-named input is opened with O_NONBLOCK (a FIFO then opens at once), fstat'ed
// on the open descriptor (no race with a rename), refused unless it is a regular file, and
// read up to a bound checked against the bytes actually read. O_NONBLOCK is cleared before
// reading: on a regular file it means nothing, and the reads stay ordinary.
//
// Header-only and free of the runtime (POSIX and the standard library, as all of base/), so
// that reports/, which depends on no runtime, reads records through it too.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ddpb {

// The one-line reason names the file; callers turn it into their own error kind.
class InputFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// A read-only descriptor of the regular file `path` (the caller closes it).
inline int open_input_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    throw InputFileError("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputFileError("cannot stat " + path + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputFileError(path + ": not a regular file (it is " +
                         std::string(file_kind(st.st_mode)) + ")");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// The whole of the regular file `path`, refused past `max_bytes` (counted as read, so a file
// that grows while it is read is bounded too).
inline std::string read_input_file(const std::string& path, size_t max_bytes) {
  const int fd = open_input_file(path);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw InputFileError("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      throw InputFileError(path + " is over the limit of " + std::to_string(max_bytes) + " bytes");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace ddpb
