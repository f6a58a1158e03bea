// Small POSIX TCP helpers for the TCPStore: an owning fd, listen/connect by host name, and
// blocking-with-deadline I/O on non-blocking sockets (poll(2) waits, so no call can hang
// past its deadline). Every socket is close-on-exec and never raises SIGPIPE.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddpb::comm::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Owns a file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// A non-blocking listening socket bound to host:port (port 0: the kernel picks a free one),
// with SO_REUSEADDR so that a restarted server can take the port back. Throws Error.
Fd listen_tcp(const std::string& host, uint16_t port, int backlog);

// The port a socket is bound to (the actual one after binding port 0).
uint16_t local_port(int fd);

// One connection attempt to every address of host:port, each until `deadline`. Returns a
// non-blocking, TCP_NODELAY socket, or an empty Fd with the reason in *why (refused,
// unreachable, timed out, unresolvable): the caller decides whether to retry.
Fd try_connect(const std::string& host, uint16_t port, Deadline deadline, std::string* why);

enum class Io { Ok, Closed, Timeout };

// Sends or receives exactly n bytes, waiting with poll until `deadline`. Closed: the peer
// closed or reset the connection (or another socket error; errno is kept).
Io send_all(int fd, const void* data, size_t n, Deadline deadline);
Io recv_all(int fd, void* data, size_t n, Deadline deadline);

// True if the peer has closed or reset an idle connection, or sent bytes nobody asked for
// (a desynchronized stream): a connection in either state must not be reused.
bool unusable(int fd);

void set_nodelay(int fd);

}  // namespace ddpb::comm::net
