// TCPStoreServer: the key-value server behind TCPStore, run by rank 0 (see comm/tcp_store.h
// and the wire protocol in comm/tcp_protocol.h).
//
// One background thread serves every connection with poll(2): no thread per client, at most
// tcp::kMaxConnections connections (when all are taken, the oldest one that has not
// authenticated yet is dropped for a newcomer; otherwise it is told Busy). A get/wait on a
// missing key parks its connection until a set/add creates the key or the client's wait time
// passes (then Timeout), so blocked clients cost no polling. A connection that fails the
// handshake (wrong token, or none within kHandshakeTimeout) or sends a malformed frame is
// closed; the server keeps serving the others.
//
// Note [Wrong tokens]
// The store once answered about 10,000 wrong-token handshakes a second from one host, which
// lets a guesser try tokens as fast as the link allows (issue 48, P34). An address whose
// handshakes keep failing is shut out for a while: from its third failure in a row, each
// failure closes its next connections at once for 10 ms, doubling up to a second, so it gets
// at most about one try a second; connections it opened before are closed unanswered too. A
// right token from it ends that. A rank on the same host as a guesser is shut out with it: a
// brief guesser only delays it (its client retries within its timeout), one that keeps
// guessing can keep it out, as anything on that host could harm the job anyway. The refusals are
// said on stderr (rank 0's, so its launcher's output) at most once a second. Tokens shorter than
// kMinTokenBytes are refused where they are read (tcp_store.h).
//
// Thread-safety: the server state is owned by its thread; the object's public methods only
// read immutable fields. The destructor stops the thread and closes every connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm/socket.h"
#include "comm/store.h"
#include "comm/tcp_protocol.h"

namespace ddpb::comm {

class TCPStoreServer {
 public:
  // An idle connection that has not shown the token is dropped this soon (an authenticating
  // client sends its handshake at once), and gives up its slot earlier when all are taken.
  static constexpr std::chrono::seconds kHandshakeTimeout{2};

  // Binds host:port (port 0: a free one) and listens now, throwing Error on failure, then
  // serves on a background thread. Only clients that present `token` are served.
  TCPStoreServer(const std::string& host, uint16_t port, std::string token);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  // The port actually bound.
  uint16_t port() const { return port_; }

 private:
  struct Conn;

  void run();
  // One poll round: returns false once the destructor asked the thread to stop.
  bool serve_once();
  void accept_new();
  size_t open_connections() const;
  bool evict_oldest_unauthenticated();
  void read_from(Conn& c);
  // Handles every complete frame buffered on c, until c parks on a wait or closes.
  void process_input(Conn& c);
  // Each handles one frame at the front of c's input: true if it consumed one and c can go on.
  bool handle_handshake(Conn& c);
  bool handle_request(Conn& c);
  // Answers parked get/wait requests whose key now exists, or whose time is up.
  void wake_waiters();
  // Answers c's parked request if it can (true), else leaves it parked.
  bool answer_parked(Conn& c, net::Deadline now);
  void reply(Conn& c, uint8_t status, const void* payload, size_t n);
  void reply_handshake(Conn& c, tcp::Status status);
  void flush(Conn& c);

  // Note [Wrong tokens].
  struct Offender {
    int failures = 0;
    net::Deadline shut_until;
  };
  bool shut_out(const std::string& address, net::Deadline now);
  void note_wrong_token(const std::string& address, net::Deadline now);
  void log_refusals(net::Deadline now);

  std::string token_;
  std::unordered_map<std::string, Offender> offenders_;  // by address bytes
  int64_t refused_ = 0;                                  // since the last log line
  std::string last_refused_;
  net::Deadline next_log_;
  net::Fd listen_fd_;
  uint16_t port_ = 0;
  net::Fd wake_read_, wake_write_;  // a pipe: the destructor writes to stop the thread
  std::vector<std::unique_ptr<Conn>> conns_;
  std::unordered_map<std::string, Bytes> map_;
  bool store_changed_ = false;         // a set/add happened: parked requests may complete
  net::Deadline accept_paused_until_;  // after EMFILE, so that poll does not spin
  std::thread thread_;
};

}  // namespace ddpb::comm
