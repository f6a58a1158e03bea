#include "comm/socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/check.h"

namespace ddpb::comm::net {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* p) const { ::freeaddrinfo(p); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// getaddrinfo for a stream socket; returns null with the reason in *why.
AddrInfoPtr resolve(const std::string& host, uint16_t port, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* out = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &out);
  if (rc != 0) {
    *why = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
    return nullptr;
  }
  return AddrInfoPtr(out);
}

int poll_ms(Deadline deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 60'000));
}

// Waits until fd is ready for `events`, or the deadline passes (false).
bool wait_ready(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int timeout = poll_ms(deadline);
    int rc = ::poll(&p, 1, timeout);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the I/O call report the error
    if (rc == 0 && Clock::now() >= deadline) return false;
  }
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // latency only: not fatal
}

Fd listen_tcp(const std::string& host, uint16_t port, int backlog) {
  DDPB_CHECK(!host.empty()) << "TCPStore server needs a host address to bind to (MASTER_ADDR)";
  std::string why;
  AddrInfoPtr addrs = resolve(host, port, &why);
  DDPB_CHECK(addrs != nullptr) << "TCPStore server: " << why;
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      why = std::string("bind: ") + std::strerror(errno);
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) {
      why = std::string("listen: ") + std::strerror(errno);
      continue;
    }
    return fd;
  }
  DDPB_FAIL() << "TCPStore server cannot listen on " << host << ":" << port << ": " << why;
  return Fd();  // unreachable
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  DDPB_CHECK(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      << "getsockname: " << std::strerror(errno);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

Fd try_connect(const std::string& host, uint16_t port, Deadline deadline, std::string* why) {
  AddrInfoPtr addrs = resolve(host, port, why);
  if (addrs == nullptr) return Fd();
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      *why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!wait_ready(fd.get(), POLLOUT, deadline)) {
        *why = "connect timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      *why = std::string("connect: ") + std::strerror(errno);
      continue;
    }
    set_nodelay(fd.get());
    return fd;
  }
  return Fd();
}

Io send_all(int fd, const void* data, size_t n, Deadline deadline) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLOUT, deadline)) return Io::Timeout;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      return Io::Closed;
    }
  }
  return Io::Ok;
}

Io recv_all(int fd, void* data, size_t n, Deadline deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLIN, deadline)) return Io::Timeout;
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      if (r == 0) errno = ECONNRESET;
      return Io::Closed;
    }
  }
  return Io::Ok;
}

bool unusable(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace ddpb::comm::net
