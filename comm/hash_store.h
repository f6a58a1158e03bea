// HashStore: an in-process Store for ranks that are threads of one process (tests, and the
// single-process multi-rank runs). Every rank holds the same shared_ptr<HashStore>.
//
// A map under one mutex; waiters sleep on a condition variable that set/add notify, so there
// is no polling. Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/store.h"

namespace ddpb::comm {

class HashStore final : public Store {
 public:
  HashStore() = default;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys) override;

 private:
  // Waits (holding `lock`) until every key exists; throws StoreTimeout after timeout_.
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   const char* op);
  bool has_all_locked(const std::vector<std::string>& keys) const;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Bytes> map_;
};

}  // namespace ddpb::comm
