#include "comm/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace ddpb::comm {
namespace {

constexpr char kHeader[8] = {'D', 'D', 'P', 'B', 'F', 'S', '0', '1'};
// Counts the FileStores destroyed, for removing the file once all world_size are gone.
const std::string kFinishedKey = "__ddpb_filestore__/finished";
constexpr size_t kFileReadChunk = 64 * 1024;

std::string errno_text() {
  return std::strerror(errno);
}

// flock(2) held for a scope.
class FileLock {
 public:
  FileLock(int fd, int op, const std::string& path) : fd_(fd) {
    int rc;
    do rc = ::flock(fd_, op);
    while (rc != 0 && errno == EINTR);
    DDPB_CHECK(rc == 0) << "FileStore " << path << ": flock: " << errno_text();
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

// Reads [begin, end) of the file in chunks; every read is bounds-checked against `end`, so a
// corrupt length can only produce an Error, never a large allocation or a read past the end.
class LogReader {
 public:
  LogReader(int fd, const std::string& path, uint64_t begin, uint64_t end)
      : fd_(fd), path_(path), pos_(begin), end_(end) {}

  uint64_t position() const { return pos_ - (buffer_.size() - next_); }
  uint64_t remaining() const { return end_ - position(); }

  void read(void* dst, size_t n) {
    DDPB_CHECK(n <= remaining()) << "FileStore " << path_ << ": record at offset " << position()
                                 << " needs " << n << " bytes but the file ends after "
                                 << remaining() << " (truncated or corrupt)";
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (next_ == buffer_.size()) fill(n);
      size_t take = std::min(n, buffer_.size() - next_);
      std::memcpy(out, buffer_.data() + next_, take);
      next_ += take;
      out += take;
      n -= take;
    }
  }

  uint32_t read_u32() {
    uint8_t b[4];
    read(b, 4);
    return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  }

 private:
  void fill(size_t wanted) {
    size_t n =
        static_cast<size_t>(std::min<uint64_t>(std::max(wanted, kFileReadChunk), end_ - pos_));
    buffer_.resize(n);
    next_ = 0;
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, buffer_.data() + got, n - got, static_cast<off_t>(pos_ + got));
      if (r < 0 && errno == EINTR) continue;
      DDPB_CHECK(r > 0) << "FileStore " << path_ << ": read at offset " << pos_ + got << ": "
                        << (r == 0 ? "unexpected end of file" : errno_text());
      got += static_cast<size_t>(r);
    }
    pos_ += n;
  }

  int fd_;
  const std::string& path_;
  uint64_t pos_;  // file offset just past buffer_
  uint64_t end_;
  std::vector<uint8_t> buffer_;
  size_t next_ = 0;
};

void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void write_all(int fd, const uint8_t* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    DDPB_CHECK(w > 0) << "FileStore " << path << ": write: " << errno_text();
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

FileStore::FileStore(std::string path, int world_size)
    : path_(std::move(path)), world_size_(world_size) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  DDPB_CHECK(fd_ >= 0) << "FileStore: cannot open '" << path_ << "': " << errno_text();
  try {
    std::lock_guard<std::mutex> guard(mutex_);
    FileLock lock(fd_, LOCK_EX, path_);
    if (file_size() == 0) write_all(fd_, reinterpret_cast<const uint8_t*>(kHeader), 8, path_);
    replay_locked();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

FileStore::~FileStore() {
  if (world_size_ > 0) {
    try {
      std::lock_guard<std::mutex> guard(mutex_);
      FileLock lock(fd_, LOCK_EX, path_);
      if (add_locked(kFinishedKey, 1) >= world_size_) ::unlink(path_.c_str());
    } catch (...) {
      // A destructor cannot report; the file is merely left behind.
    }
  }
  ::close(fd_);
}

void FileStore::set(const std::string& key, const Bytes& value) {
  detail::check_key_value("FileStore", key, value.size());
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, LOCK_EX, path_);
  replay_locked();
  append_locked(key, value);
}

Bytes FileStore::get(const std::string& key) {
  std::unique_lock<std::mutex> guard(mutex_);
  wait_for_keys(guard, {key}, "get");
  return map_.at(key);
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  detail::check_key_value("FileStore", key, 0);
  std::lock_guard<std::mutex> guard(mutex_);
  FileLock lock(fd_, LOCK_EX, path_);
  return add_locked(key, delta);
}

bool FileStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> guard(mutex_);
  refresh_locked();
  return has_all_locked(keys);
}

void FileStore::wait(const std::vector<std::string>& keys) {
  std::unique_lock<std::mutex> guard(mutex_);
  wait_for_keys(guard, keys, "wait");
}

void FileStore::wait_for_keys(std::unique_lock<std::mutex>& lock,
                              const std::vector<std::string>& keys, const char* op) {
  using Clock = std::chrono::steady_clock;
  const Duration timeout = timeout_;
  const auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::microseconds(1000);
  for (;;) {
    refresh_locked();
    if (has_all_locked(keys)) return;
    auto now = Clock::now();
    if (now >= deadline) detail::throw_timeout("FileStore", op, keys, timeout);
    // Sleep without the mutex, so that this object's other threads can make progress.
    lock.unlock();
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    lock.lock();
    backoff = std::min(backoff * 2, std::chrono::microseconds(10000));
  }
}

void FileStore::refresh_locked() {
  if (file_size() == offset_) return;  // nothing appended since the last replay
  FileLock lock(fd_, LOCK_SH, path_);
  replay_locked();
}

void FileStore::replay_locked() {
  const uint64_t end = file_size();
  DDPB_CHECK(end >= offset_) << "FileStore " << path_ << ": the file shrank from " << offset_
                             << " to " << end << " bytes (truncated or replaced?)";
  LogReader reader(fd_, path_, offset_, end);
  if (offset_ == 0) {
    char header[8];
    reader.read(header, 8);
    DDPB_CHECK(std::memcmp(header, kHeader, 8) == 0)
        << "FileStore " << path_ << ": not a ddpbench FileStore (bad header)";
  }
  while (reader.remaining() > 0) {
    const uint64_t at = reader.position();
    uint32_t key_bytes = reader.read_u32();
    DDPB_CHECK(key_bytes >= 1 && key_bytes <= kMaxKeyBytes)
        << "FileStore " << path_ << ": corrupt record at offset " << at << ": key of " << key_bytes
        << " bytes (allowed 1.." << kMaxKeyBytes << ")";
    std::string key(key_bytes, '\0');
    reader.read(key.data(), key_bytes);
    uint32_t value_bytes = reader.read_u32();
    DDPB_CHECK(value_bytes <= kMaxValueBytes)
        << "FileStore " << path_ << ": corrupt record at offset " << at << ": value of "
        << value_bytes << " bytes (max " << kMaxValueBytes << ")";
    Bytes value(value_bytes);
    reader.read(value.data(), value_bytes);
    map_[std::move(key)] = std::move(value);
  }
  offset_ = end;
}

void FileStore::append_locked(const std::string& key, const Bytes& value) {
  Bytes record;
  record.reserve(8 + key.size() + value.size());
  put_u32(record, static_cast<uint32_t>(key.size()));
  record.insert(record.end(), key.begin(), key.end());
  put_u32(record, static_cast<uint32_t>(value.size()));
  record.insert(record.end(), value.begin(), value.end());
  try {
    write_all(fd_, record.data(), record.size(), path_);
  } catch (...) {
    // Drop a partial record (a full disk), so that the log stays readable.
    (void)::ftruncate(fd_, static_cast<off_t>(offset_));
    throw;
  }
  offset_ += record.size();
  map_[key] = value;
}

int64_t FileStore::add_locked(const std::string& key, int64_t delta) {
  replay_locked();
  auto it = map_.find(key);
  int64_t value = detail::add_to_counter(key, it == map_.end() ? nullptr : &it->second, delta);
  append_locked(key, detail::format_counter(value));
  return value;
}

bool FileStore::has_all_locked(const std::vector<std::string>& keys) const {
  for (const auto& k : keys) {
    if (!map_.contains(k)) return false;
  }
  return true;
}

uint64_t FileStore::file_size() const {
  struct stat st {};
  DDPB_CHECK(::fstat(fd_, &st) == 0) << "FileStore " << path_ << ": fstat: " << errno_text();
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace ddpb::comm
