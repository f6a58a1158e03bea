#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/input_file.h"

namespace ddpb {
namespace {

// Eight characters from [a-z0-9], fresh per call: from getrandom, or where that fails (an
// old kernel, a seccomp filter) from a counter, the pid and the clock, mixed.
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  uint64_t bits = 0;
  if (::getrandom(&bits, sizeof(bits), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(bits))) {
    bits = counter.fetch_add(1) ^ (uint64_t(::getpid()) << 40) ^
           uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    bits ^= bits >> 31;  // splitmix64's finaliser
    bits *= 0xbf58476d1ce4e5b9ull;
    bits ^= bits >> 27;
  }
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(8, 'a');
  for (char& c : s) {
    c = kAlphabet[bits % 36];
    bits /= 36;
  }
  return s;
}

std::string parent_folder(const std::string& target) {
  const std::filesystem::path parent = std::filesystem::path(target).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

std::string write_error_text(int err) {
  std::string why = std::strerror(err);
  switch (err) {
    case ENOSPC:
      return "the disk is full (" + why + ")";
    case EDQUOT:
      return "the disk quota is exhausted (" + why + ")";
    case EFBIG:
      return "the file size limit was reached (" + why + "; see ulimit -f)";
    default:
      return why;
  }
}

std::string resolve_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops == 40)
      throw WriteFileError("cannot write " + path + ": too many levels of symbolic links");
    const fs::path target = fs::read_symlink(p, ec);
    if (ec)
      throw WriteFileError("cannot write " + path + ": cannot read the link: " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw WriteFileError("refusing to write " + path +
                         (p.string() != path ? " (a link to " + p.string() + ")" : "") +
                         ": it is " + file_kind(st.st_mode) +
                         ", and writing would replace it with a plain file");
  }
  return p.string();
}

std::string check_output_path(const std::string& path) {
  const std::string target = resolve_output_path(path);
  const std::string name = std::filesystem::path(target).filename().string();
  const std::string folder = parent_folder(target);
  const long name_max = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && name.size() > static_cast<size_t>(name_max)) {
    throw WriteFileError("cannot write " + path + ": its name is " + std::to_string(name.size()) +
                         " bytes long, over the " + std::to_string(name_max) +
                         " that the file system allows");
  }
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    throw WriteFileError("cannot write " + path + ": its folder " + folder + ": " +
                         std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw WriteFileError("cannot write " + path + ": " + folder + " is not a folder");
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw WriteFileError("cannot write " + path + ": its folder " + folder + ": " +
                         std::strerror(errno));
  }
  return target;
}

AtomicFile::AtomicFile(const std::string& path, std::string what)
    : path_(path), target_(resolve_output_path(path)), what_(std::move(what)) {
  const std::string folder = parent_folder(target_);
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_ = folder + "/.ddpb.tmp." + random_suffix();
    // 0666 less the umask, as any file the user creates; O_EXCL: never someone else's file.
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd_ < 0 && errno != EEXIST) fail("cannot create the temporary file " + temp_, errno);
  }
  if (fd_ < 0) fail("cannot create a temporary file in " + folder, EEXIST);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::fail(const std::string& step, int err) const {
  throw WriteFileError("cannot write " + what_ + " " + path_ + ": " + step + ": " +
                       write_error_text(err) + "; the existing " + path_ +
                       ", if any, is unchanged");
}

void AtomicFile::write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    // A regular file accepts at least one byte unless it is out of space.
    if (n <= 0) {
      fail("writing " + temp_ + " after " + std::to_string(written_) + " bytes",
           n < 0 ? errno : ENOSPC);
    }
    p += n;
    size -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("flushing " + temp_, errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("closing " + temp_, errno);
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
    fail("cannot rename " + temp_ + " over it", errno);
  }
  committed_ = true;
  // Best effort: the new file is complete and in place either way, and some file systems
  // refuse fsync on a directory.
  const int dir_fd = ::open(parent_folder(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomic(const std::string& path, std::string_view text, const std::string& what) {
  AtomicFile file(path, what);
  file.write(text);
  file.commit();
}

}  // namespace ddpb
