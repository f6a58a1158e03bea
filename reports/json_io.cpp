#include "reports/json_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/input_file.h"

namespace ddpb::reports {

namespace {

// Why a write failed, in words a user can act on, then the system's own text.
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

// The temporary file next to the target: unlinked on scope exit unless committed (renamed),
// and its descriptor closed, so no failure path leaves a stray file or holds its space.
class TempFile {
 public:
  explicit TempFile(const std::string& target) {
    static std::atomic<uint64_t> counter{0};
    path_ = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    // O_TRUNC, not O_EXCL: a leftover of a crashed process that had the same pid (pid 1 in
    // a container) must not block every later write.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // close() can be the call that reports a failed write-back (NFS, quota), so it is checked.
  int close_checked() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void commit() { committed_ = true; }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

namespace {

const char* file_kind(std::filesystem::file_type type) {
  using std::filesystem::file_type;
  switch (type) {
    case file_type::directory:
      return "a directory";
    case file_type::character:
      return "a character device";
    case file_type::block:
      return "a block device";
    case file_type::fifo:
      return "a FIFO";
    case file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

}  // namespace

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string resolve_output_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops == 40)
      throw ReportError("cannot write " + path + ": too many levels of symbolic links");
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw ReportError("cannot write " + path + ": cannot read the link: " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    throw ReportError("refusing to write " + path +
                      (p.string() != path ? " (a link to " + p.string() + ")" : "") + ": it is " +
                      file_kind(st.type()) + ", and writing would replace it with a plain file");
  }
  return p.string();
}

void write_text_atomic(const std::string& path, const std::string& text) {
  // Every failure before the rename leaves `path` as it was; the message says so.
  const auto fail = [&](const std::string& what, int err) {
    throw ReportError("cannot write report " + path + ": " + what + ": " + write_error_text(err) +
                      "; the existing " + path + ", if any, is unchanged");
  };
  const std::string target = resolve_output_path(path);
  TempFile tmp(target);
  if (tmp.fd() < 0) fail("cannot create the temporary file " + tmp.path(), errno);
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(tmp.fd(), p, left);
    if (n < 0 && errno == EINTR) continue;
    // A regular file accepts at least one byte unless it is out of space.
    if (n <= 0) fail("writing " + tmp.path(), n < 0 ? errno : ENOSPC);
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(tmp.fd()) != 0) fail("flushing " + tmp.path(), errno);
  if (tmp.close_checked() != 0) fail("closing " + tmp.path(), errno);
  if (std::rename(tmp.path().c_str(), target.c_str()) != 0) {
    fail("cannot rename " + tmp.path() + " over it", errno);
  }
  tmp.commit();
  // Persist the rename itself. Best effort: the new file is complete and in place either
  // way, and some file systems refuse fsync on a directory.
  const std::filesystem::path parent = std::filesystem::path(target).parent_path();
  int dir_fd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_json_atomic(const std::string& path, const nlohmann::json& value) {
  write_text_atomic(path, json_text(value, 2) + "\n");
}

nlohmann::json read_json(const std::string& path, size_t max_bytes) {
  std::string text;
  try {
    text = read_input_file(path, max_bytes);  // Note [User-named inputs]
  } catch (const InputFileError& e) {
    throw ReportError(e.what());
  }
  return parse_report_text(text, path);
}

nlohmann::json parse_report_text(const std::string& text, const std::string& name) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // A file cut short (a copy of a suite still being written, a full disk) fails at its last
    // byte; say so, since "unexpected end of input" alone reads like a syntax mistake.
    const bool cut_short = !text.empty() && e.byte >= text.size();
    throw ReportError(name + " is not valid JSON" +
                      (cut_short ? " (it ends early: truncated?)" : "") + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number beyond double's range (1e400) throws out_of_range.406.
    throw ReportError(name + " is not valid JSON: " + e.what());
  }
}

}  // namespace ddpb::reports
