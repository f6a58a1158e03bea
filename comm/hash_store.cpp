#include "comm/hash_store.h"

#include <chrono>

namespace ddpb::comm {

void HashStore::set(const std::string& key, const Bytes& value) {
  detail::check_key_value("HashStore", key, value.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    map_[key] = value;
  }
  changed_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(lock, {key}, "get");
  return map_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  detail::check_key_value("HashStore", key, 0);
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    value = detail::add_to_counter(key, it == map_.end() ? nullptr : &it->second, delta);
    map_[key] = detail::format_counter(value);
  }
  changed_.notify_all();
  return value;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return has_all_locked(keys);
}

void HashStore::wait(const std::vector<std::string>& keys) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(lock, keys, "wait");
}

void HashStore::wait_locked(std::unique_lock<std::mutex>& lock,
                            const std::vector<std::string>& keys, const char* op) {
  const Duration timeout = timeout_;
  if (!changed_.wait_for(lock, timeout, [&] { return has_all_locked(keys); })) {
    detail::throw_timeout("HashStore", op, keys, timeout);
  }
}

bool HashStore::has_all_locked(const std::vector<std::string>& keys) const {
  for (const auto& k : keys) {
    if (!map_.contains(k)) return false;
  }
  return true;
}

}  // namespace ddpb::comm
