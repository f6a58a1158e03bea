// Store: the key-value rendezvous that ranks meet through (as torch.distributed's Store).
//
//  - HashStore (comm/hash_store.h): in one process, for ranks that are threads.
//  - FileStore (comm/file_store.h): one file on a filesystem all ranks see (one node, or a
//    shared FS).
//  - TCPStore (comm/tcp_store.h): served by rank 0 at MASTER_ADDR:MASTER_PORT, clients on
//    every rank; compatible with torchrun's env:// variables.
//
// Semantics shared by every implementation (and checked by one test suite,
// tests/comm/test_store.cpp):
//  - set(key, value) overwrites; get(key) waits until the key exists or the timeout passes
//    (then throws StoreTimeout naming the key and the timeout);
//  - add(key, delta) atomically adds to an integer counter (created at 0) and returns the
//    new value;
//  - wait(keys) waits for all keys to exist, with the timeout;
//  - check(keys) returns whether all keys exist, without waiting.
// Keys (1..kMaxKeyBytes) and values (up to kMaxValueBytes) are byte strings; a counter is
// stored as its decimal text, so get() of a counter reads "42".
// Thread-safety: every method may be called from any thread; a Store object is shared by the
// rank's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"

namespace ddpb::comm {

using Bytes = std::vector<uint8_t>;
using Duration = std::chrono::milliseconds;

class StoreTimeout : public Error {
 public:
  using Error::Error;
};

// Limits every store enforces on set/add, so that what one store accepts all accept, and so
// that a corrupt file or a hostile peer can never make a reader allocate more than this.
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = size_t{64} << 20;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes get(const std::string& key) = 0;
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  // How long get/wait wait (and a TCPStore connects). Virtual so that views (PrefixStore)
  // act on the store they wrap.
  virtual void set_timeout(Duration timeout) { timeout_.store(timeout); }
  virtual Duration timeout() const { return timeout_.load(); }

  // Convenience for strings.
  void set_string(const std::string& key, const std::string& value) {
    set(key, Bytes(value.begin(), value.end()));
  }
  std::string get_string(const std::string& key) {
    Bytes b = get(key);
    return std::string(b.begin(), b.end());
  }

 protected:
  // Atomic: set_timeout may race with a call that reads it (each call reads it once).
  std::atomic<Duration> timeout_{std::chrono::seconds(300)};
};

// A view of a store that prefixes every key ("pg0/"), so that several users share one.
// The timeout is the base store's: set_timeout() here sets the base's.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
  void set_timeout(Duration timeout) override { base_->set_timeout(timeout); }
  Duration timeout() const override { return base_->timeout(); }
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys) override;

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

namespace detail {

// Counters written by add() are ASCII decimal (as torch's stores), so get() of one reads "42".
// Returns current + delta (current == nullptr: the key is new, counts from 0). Throws Error
// naming the key if the current value is not an integer or the sum overflows.
int64_t add_to_counter(const std::string& key, const Bytes* current, int64_t delta);
Bytes format_counter(int64_t value);
// Throws Error if the key is empty or longer than kMaxKeyBytes, or the value is too large.
void check_key_value(const char* store, const std::string& key, size_t value_bytes);
// Throws StoreTimeout: "<store> <op>(<keys>) timed out after <timeout> ms".
[[noreturn]] void throw_timeout(const char* store, const char* op,
                                const std::vector<std::string>& keys, Duration timeout);

}  // namespace detail
}  // namespace ddpb::comm
