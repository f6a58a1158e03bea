// GlooStoreAdapter: presents our Store to Gloo's rendezvous (gloo::rendezvous::Store), which
// exchanges the ranks' transport addresses through it.
//
// Timeouts: Gloo waits with its own timeout (the group's), which must not change the
// timeout of the shared Store (other threads use it). So wait(keys, timeout) polls
// Store::check with a backoff (1 ms growing to 50 ms) until the keys exist or the deadline
// passes, and get() first waits with the adapter's timeout. Rendezvous is done once per
// group, so polling costs nothing that matters. A timeout throws StoreTimeout naming the
// keys (still under the caller's prefix) and the timeout.
//
// Thread-safety: as the underlying Store.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "comm/store.h"

namespace ddpb::comm {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<comm::Store> store, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits up to the adapter's timeout for the key, then returns its value.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;  // the adapter's timeout
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<comm::Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ddpb::comm
