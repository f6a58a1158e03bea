// Writing a file so that a reader sees the old file or the new one, never a part of either:
// run and suite records, reports, checkpoints, flight-recorder dumps.
//
// Note [Atomic file writes]
// The bytes go to a temporary file in the target's own folder (rename is atomic only within
// one file system), which is fsync'ed, closed (close can be the call that reports a failed
// write-back: NFS, quotas) and renamed over the target; the folder is then fsync'ed, best
// effort, so that the rename itself survives a crash. Every failure before the rename
// removes the temporary and leaves the target as it was, and the message says so.
// The temporary's name is short and of fixed length (".ddpb.tmp." and 8 random characters),
// so that a target whose own name is as long as NAME_MAX allows still gets one, and it is
// created with O_EXCL under a fresh name per try: a leftover of a killed process never blocks
// a later write, and two writers of one target never share a temporary.
// A symbolic link as the target is followed to its end (the link survives, the file it names
// is replaced); a target that exists and is not a regular file (a directory, a FIFO,
// /dev/null) is refused before anything is written, since the rename would destroy it.
//
// Free of the runtime (POSIX and the standard library), like all of base/.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddpb {

// The one-line reason names the target; callers turn it into their own error kind.
class WriteFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why a write failed, in words a user can act on ("the disk is full"), then the system's text.
std::string write_error_text(int err);

// The file that writing `path` replaces: `path` itself or, for a symbolic link, the file the
// link names, followed to the end. Throws WriteFileError when that file exists and is not a
// regular file.
std::string resolve_output_path(const std::string& path);

// resolve_output_path, then what an AtomicFile will need of the target's folder, checked
// before any work (issue 25, E4): that the folder exists, is a folder and is writable, and
// that the target's name fits NAME_MAX. Throws WriteFileError naming the path.
std::string check_output_path(const std::string& path);

// One atomic write (Note [Atomic file writes]). `what` opens every message ("report",
// "safetensors file"). Not thread-safe; one writer per object.
class AtomicFile {
 public:
  AtomicFile(const std::string& path, std::string what);
  ~AtomicFile();  // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync, close, rename over the target, fsync of the folder. Once only.
  void commit();

  const std::string& temp_path() const { return temp_; }
  size_t bytes_written() const { return written_; }

 private:
  [[noreturn]] void fail(const std::string& step, int err) const;

  std::string path_, target_, temp_, what_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// The whole of `text` as `path`, atomically.
void write_file_atomic(const std::string& path, std::string_view text, const std::string& what);

}  // namespace ddpb
