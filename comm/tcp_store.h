// TCPStore: a Store served over TCP by rank 0 (as torch's TCPStore); every rank, rank 0
// included, is a client. Wire protocol: comm/tcp_protocol.h; server: comm/tcp_store_server.h.
//
//  - The server binds exactly `host` (MASTER_ADDR, e.g. 127.0.0.1), never the wildcard
//    address unless asked for it; port 0 picks a free port, which port() then reports.
//  - Every client presents the run's token (DDPBENCH_STORE_TOKEN); the server drops a client
//    with another token, and the client throws Error saying so.
//  - The constructor connects, retrying with backoff (10 ms doubling to 1 s) until `timeout`,
//    so clients may start before the server ("late joiner").
//  - get/wait block on the server until the key exists, or StoreTimeout after timeout().
//  - A dropped connection is reconnected once per call, and the call is sent again unless it
//    was an add() whose reply was lost (the server may have counted it); then Error.
//
// Thread-safety: any method from any thread. Calls on one TCPStore share one connection and
// run one at a time (a blocked get() delays the object's other callers); a thread that must
// not wait behind another should use its own TCPStore.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/socket.h"
#include "comm/store.h"
#include "comm/tcp_protocol.h"

namespace ddpb::comm {

class TCPStoreServer;

class TCPStore final : public Store {
 public:
  // is_server: also run the server (rank 0), bound to host:port (or bind_host:port when
  // given, e.g. "0.0.0.0" for every interface), before connecting to it at host:port.
  TCPStore(std::string host, uint16_t port, bool is_server, Duration timeout, std::string token,
           const std::string& bind_host = "");
  ~TCPStore() override;
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys) override;

  // Closes this client's connection as a network failure would (fault injection:
  // --inject-fault store-drop). The next request reconnects once.
  void drop_connection();
  // How many times a dropped connection was re-established.
  int reconnects() const { return reconnects_.load(); }

  const std::string& host() const { return host_; }
  // The server's port (the actual one when the server was asked for port 0).
  uint16_t port() const { return port_; }

 private:
  struct Reply {
    tcp::Status status;
    Bytes payload;
  };
  // Sends one request and reads its reply, reconnecting once if the connection dropped.
  // `server_wait`: how long the server may park a get/wait before it answers Timeout.
  Reply request(tcp::Op op, const std::string& key, const Bytes& value, Duration server_wait);
  // Connects and handshakes, retrying until `deadline`; throws Error on failure.
  void connect(net::Deadline deadline);
  std::string where() const;

  std::unique_ptr<TCPStoreServer> server_;  // declared first: destroyed after the client
  std::string host_;
  uint16_t port_;
  std::string token_;
  std::mutex mutex_;  // serializes requests on fd_
  std::atomic<int> reconnects_{0};
  net::Fd fd_;
};

// The store for a run started by torchrun or our launcher (env:// rendezvous): a TCPStore at
// MASTER_ADDR:MASTER_PORT with the token in DDPBENCH_STORE_TOKEN (empty if unset), served by
// rank 0. Throws UsageError if MASTER_ADDR or MASTER_PORT is missing or malformed.
// Note [Store job identity]
// A store without DDPBENCH_STORE_TOKEN (ranks started by torchrun, mpirun or srun, not by
// ddpbench's launcher) would let two jobs that share MASTER_PORT join each other: a rank of
// one trains with the other's rank 0 and both report success. The handshake token is then
// an identity the ranks of one job agree on: TORCHELASTIC_RUN_ID where torchrun sets it,
// else `job_identity` (the caller's hash of its resolved configuration and MASTER_PORT).
// A rank of another job is refused at the handshake. Rank 0 warns that the store is not
// authenticated.
std::string store_token_from_env(const std::string& job_identity);
// A token a user gives (DDPBENCH_STORE_TOKEN) has at least kMinTokenBytes characters: a short
// one is a UsageError (issue 48, P34; Note [Wrong tokens] in comm/tcp_store_server.h).
inline constexpr size_t kMinTokenBytes = 16;
void check_store_token(const std::string& token);
std::shared_ptr<Store> make_store_from_env(int rank, Duration timeout,
                                           const std::string& job_identity = "");

}  // namespace ddpb::comm
