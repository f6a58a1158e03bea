// FileStore: a Store in one file that every rank opens (the ranks of one node, or a shared
// filesystem whose flock works), like torch's FileStore; `ddpbench run --rendezvous
// file://PATH` meets through one (Note [File rendezvous] in comm/rendezvous.h).
//
// The file is an append-only log: an 8-byte header, then one record per set or add,
//     u32 key_bytes | key | u32 value_bytes | value        (little-endian)
// where a later record for a key overrides an earlier one. Appends happen under an exclusive
// flock(2); add() replays, computes and appends under that one lock, so it is atomic across
// processes. Each FileStore keeps a map of the log and replays only the records appended since
// its last read (under a shared flock). get/wait poll the file with a short backoff (1 ms,
// doubling to 10 ms) until the keys appear or the timeout passes (StoreTimeout).
//
// The file is untrusted when read: a record longer than the store limits (kMaxKeyBytes,
// kMaxValueBytes), cut short, or a file without the header raises Error; nothing larger than
// the limits is ever allocated.
//
// Lifetime: with world_size > 0, the last of world_size FileStores to be destroyed removes the
// file (as torch's does); otherwise the caller removes it. Reusing a file left by an earlier run
// keeps its keys: give every run its own path.
//
// Thread-safety: any method from any thread. Calls on one object are serialized by a mutex,
// because flock locks belong to the open file and cannot order the threads of one process.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/store.h"

namespace ddpb::comm {

class FileStore final : public Store {
 public:
  explicit FileStore(std::string path, int world_size = -1);
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys) override;

  const std::string& path() const { return path_; }

 private:
  // Polls until every key is in map_ (then returns with mutex_ held by `lock`).
  void wait_for_keys(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                     const char* op);
  // Replays records appended since offset_. The caller holds mutex_ and a flock.
  void replay_locked();
  // Replays only if the file grew; takes a shared flock when it has to read.
  void refresh_locked();
  // Appends one record; the caller holds mutex_ and an exclusive flock and has replayed.
  void append_locked(const std::string& key, const Bytes& value);
  int64_t add_locked(const std::string& key, int64_t delta);
  bool has_all_locked(const std::vector<std::string>& keys) const;
  uint64_t file_size() const;

  std::string path_;
  int world_size_;
  int fd_ = -1;
  std::mutex mutex_;
  uint64_t offset_ = 0;  // end of the last record replayed into map_
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace ddpb::comm
