#include "comm/gloo_store_adapter.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace ddpb::comm {

GlooStoreAdapter::GlooStoreAdapter(std::shared_ptr<comm::Store> store,
                                   std::chrono::milliseconds timeout)
    : store_(std::move(store)), timeout_(timeout) {
  DDPB_CHECK(store_ != nullptr) << "GlooStoreAdapter needs a store";
}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_->set(key, Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  wait({key}, timeout_);
  Bytes value = store_->get(key);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store_->check(keys)) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string names;
      for (const auto& k : keys) names += (names.empty() ? "'" : ", '") + k + "'";
      throw StoreTimeout("gloo rendezvous: store wait(" + names + ") timed out after " +
                         std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace ddpb::comm
