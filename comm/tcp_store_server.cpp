#include "comm/tcp_store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "comm/tcp_protocol.h"

namespace ddpb::comm {

using tcp::Op;
using tcp::Status;

namespace {
constexpr size_t kSocketReadChunk = 64 * 1024;
// Stop reading requests from a client that does not read its replies.
constexpr size_t kOutHighWater = kMaxValueBytes;
// A client cannot park a request for longer than this (keeps deadline arithmetic sane).
constexpr std::chrono::hours kMaxWait{24};
constexpr int kMaxAcceptsPerRound = 64;
}  // namespace

namespace {

// An accepted peer's address as bytes: 4 for IPv4, 16 for IPv6, "" for anything else.
std::string address_key(const sockaddr_storage& from) {
  if (from.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(from).sin_addr;
    return std::string(reinterpret_cast<const char*>(&a), sizeof(a));
  }
  if (from.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(from).sin6_addr;
    return std::string(reinterpret_cast<const char*>(&a), sizeof(a));
  }
  return "";
}

}  // namespace

struct TCPStoreServer::Conn {
  net::Fd fd;
  std::string peer;  // the address's bytes (IPv4 or IPv6), for Note [Wrong tokens]
  bool authed = false;
  bool closed = false;  // removed at the end of this round
  net::Deadline handshake_deadline;
  Bytes in;  // received bytes; [in_pos, end) not yet handled
  size_t in_pos = 0;
  Bytes out;  // reply bytes; [out_sent, end) not yet sent
  size_t out_sent = 0;
  // A get/wait parked until its key exists or its deadline passes.
  bool parked = false;
  Op park_op = Op::Get;
  std::string park_key;
  net::Deadline park_deadline;

  size_t out_backlog() const { return out.size() - out_sent; }
};

TCPStoreServer::TCPStoreServer(const std::string& host, uint16_t port, std::string token)
    : token_(std::move(token)) {
  DDPB_CHECK(token_.size() <= tcp::kMaxTokenBytes)
      << "TCPStore token of " << token_.size() << " bytes (max " << tcp::kMaxTokenBytes << ")";
  listen_fd_ = net::listen_tcp(host, port, SOMAXCONN);
  port_ = net::local_port(listen_fd_.get());
  int pipe_fds[2];
  DDPB_CHECK(::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) == 0) << "pipe2: " << std::strerror(errno);
  wake_read_ = net::Fd(pipe_fds[0]);
  wake_write_ = net::Fd(pipe_fds[1]);
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  uint8_t stop = 1;
  (void)!::write(wake_write_.get(), &stop, 1);
  if (thread_.joinable()) thread_.join();
}

void TCPStoreServer::run() {
  try {
    while (serve_once()) {
    }
  } catch (const std::exception& e) {
    // Nothing can catch an exception on this thread; say why the clients will time out.
    std::fprintf(stderr, "ddpbench TCPStore server on port %u stopped: %s\n", port_, e.what());
  }
}

bool TCPStoreServer::serve_once() {
  auto now = net::Clock::now();
  auto next = now + std::chrono::seconds(60);
  std::vector<pollfd> fds;
  fds.push_back({wake_read_.get(), POLLIN, 0});
  fds.push_back({listen_fd_.get(), short(now >= accept_paused_until_ ? POLLIN : 0), 0});
  if (now < accept_paused_until_) next = std::min(next, accept_paused_until_);
  if (refused_ > 0) next = std::min(next, next_log_);  // say the refusals within a second
  for (const auto& c : conns_) {
    short events = 0;
    // A parked client sends nothing until answered, so only watch for it hanging up.
    if (c->parked)
      events |= POLLRDHUP;
    else if (c->out_backlog() < kOutHighWater)
      events |= POLLIN;
    if (c->out_backlog() > 0) events |= POLLOUT;
    fds.push_back({c->fd.get(), events, 0});
    if (!c->authed) next = std::min(next, c->handshake_deadline);
    if (c->parked) next = std::min(next, c->park_deadline);
  }
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
  int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0)));
  DDPB_CHECK(rc >= 0 || errno == EINTR) << "TCPStore server poll: " << std::strerror(errno);
  if (rc > 0 && fds[0].revents != 0) return false;
  if (rc > 0 && (fds[1].revents & POLLIN)) accept_new();

  for (size_t i = 0; rc > 0 && i + 2 < fds.size(); ++i) {  // accept_new only appends
    Conn& c = *conns_[i];
    short rev = fds[i + 2].revents;
    if (rev & POLLOUT) {
      flush(c);
      if (!c.parked) process_input(c);  // requests held back by the backlog
    }
    if (rev & POLLIN) {
      read_from(c);
    } else if (rev & (POLLERR | POLLHUP | POLLNVAL | POLLRDHUP)) {
      c.closed = true;
    }
  }
  now = net::Clock::now();
  for (auto& c : conns_) {
    if (!c->authed && now >= c->handshake_deadline) c->closed = true;
  }
  wake_waiters();
  log_refusals(now);
  std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->closed; });
  return true;
}

size_t TCPStoreServer::open_connections() const {
  return static_cast<size_t>(
      std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return !c->closed; }));
}

// Connections that have not shown the token yet cannot hold every slot: the oldest of them
// gives its slot to the newcomer (it is erased at the end of this round), so a flood of idle
// connections cannot lock out a rank that authenticates at once.
bool TCPStoreServer::evict_oldest_unauthenticated() {
  Conn* oldest = nullptr;
  for (auto& c : conns_) {
    if (c->authed || c->closed) continue;
    if (oldest == nullptr || c->handshake_deadline < oldest->handshake_deadline) oldest = c.get();
  }
  if (oldest != nullptr) oldest->closed = true;
  return oldest != nullptr;
}

void TCPStoreServer::accept_new() {
  for (int i = 0; i < kMaxAcceptsPerRound; ++i) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof(from);
    int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&from), &from_len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until_ = net::Clock::now() + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN: no more pending connections
    }
    net::Fd conn_fd(fd);
    const std::string peer = address_key(from);
    if (shut_out(peer, net::Clock::now())) continue;  // Note [Wrong tokens]
    if (open_connections() >= tcp::kMaxConnections && !evict_oldest_unauthenticated()) {
      uint8_t busy = static_cast<uint8_t>(Status::Busy);
      (void)!::send(fd, &busy, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;  // closed by conn_fd; the client retries
    }
    net::set_nodelay(fd);
    auto c = std::make_unique<Conn>();
    c->fd = std::move(conn_fd);
    c->peer = peer;
    c->handshake_deadline = net::Clock::now() + kHandshakeTimeout;
    conns_.push_back(std::move(c));
  }
}

void TCPStoreServer::read_from(Conn& c) {
  // A bounded number of chunks per round, so that one busy client cannot starve the rest.
  for (int round = 0; round < 16 && !c.closed && !c.parked; ++round) {
    if (c.out_backlog() >= kOutHighWater) return;
    size_t old = c.in.size();
    c.in.resize(old + kSocketReadChunk);
    ssize_t r = ::recv(c.fd.get(), c.in.data() + old, kSocketReadChunk, 0);
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(r, 0)));
    if (r > 0) {
      process_input(c);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c.closed = true;
      return;
    }
  }
}

void TCPStoreServer::process_input(Conn& c) {
  try {
    while (!c.closed && !c.parked && c.out_backlog() < kOutHighWater) {
      if (!(c.authed ? handle_request(c) : handle_handshake(c))) break;
    }
  } catch (const std::exception& e) {
    // E.g. bad_alloc for a large value: lose this client, not the server.
    std::fprintf(stderr, "ddpbench TCPStore server: dropping a client: %s\n", e.what());
    c.closed = true;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(c.in_pos));
  c.in_pos = 0;
}

bool TCPStoreServer::handle_handshake(Conn& c) {
  tcp::Handshake hs;
  switch (tcp::parse_handshake(c.in.data() + c.in_pos, c.in.size() - c.in_pos, &hs)) {
    case tcp::ParseResult::NeedMore:
      return false;
    case tcp::ParseResult::Malformed:
      c.closed = true;  // not a TCPStore client
      return false;
    case tcp::ParseResult::Ok:
      break;
  }
  if (hs.version != tcp::kVersion) {
    reply_handshake(c, Status::BadVersion);
    c.closed = true;
    return false;
  }
  c.in_pos += hs.frame_bytes;
  // Connections opened before the address was shut out get no answer either.
  if (shut_out(c.peer, net::Clock::now())) {
    c.closed = true;
    return false;
  }
  if (!tcp::token_matches(token_, hs.token)) {
    reply_handshake(c, Status::BadToken);
    c.closed = true;
    note_wrong_token(c.peer, net::Clock::now());
    return false;
  }
  offenders_.erase(c.peer);
  c.authed = true;
  reply_handshake(c, Status::Ok);
  return true;
}

bool TCPStoreServer::shut_out(const std::string& address, net::Deadline now) {
  if (address.empty()) return false;
  const auto it = offenders_.find(address);
  if (it == offenders_.end() || now >= it->second.shut_until) return false;
  ++refused_;
  last_refused_ = address;
  return true;
}

void TCPStoreServer::note_wrong_token(const std::string& address, net::Deadline now) {
  if (address.empty()) return;
  if (offenders_.size() >= 4096) {  // bounded: forget those no longer shut out
    std::erase_if(offenders_, [&](const auto& o) { return now >= o.second.shut_until; });
    if (offenders_.size() >= 4096) offenders_.clear();
  }
  Offender& o = offenders_[address];
  o.failures = std::min(o.failures + 1, 64);
  if (o.failures >= 3) {
    const auto wait = std::chrono::milliseconds(int64_t{10} << std::min(o.failures - 3, 7));
    o.shut_until = now + std::min<std::chrono::milliseconds>(wait, std::chrono::seconds(1));
  }
  ++refused_;
  last_refused_ = address;
}

void TCPStoreServer::log_refusals(net::Deadline now) {
  if (refused_ == 0 || now < next_log_) return;
  char from[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(last_refused_.size() == 4 ? AF_INET : AF_INET6, last_refused_.data(), from,
              sizeof(from));
  std::fprintf(stderr,
               "ddpbench TCPStore server: refused %lld connection(s) with a wrong token, or from "
               "an address shut out for one, the last from %s (Note [Wrong tokens])\n",
               static_cast<long long>(refused_), from);
  refused_ = 0;
  next_log_ = now + std::chrono::seconds(1);
}

bool TCPStoreServer::handle_request(Conn& c) {
  tcp::Request req;
  switch (tcp::parse_request(c.in.data() + c.in_pos, c.in.size() - c.in_pos, &req)) {
    case tcp::ParseResult::NeedMore:
      return false;
    case tcp::ParseResult::Malformed:
      c.closed = true;
      return false;
    case tcp::ParseResult::Ok:
      break;
  }
  const Op op = req.op;
  std::string key = std::move(req.key);
  const uint8_t* value = req.value;
  const uint32_t value_bytes = req.value_bytes;
  c.in_pos += req.frame_bytes;

  switch (op) {
    case Op::Set:
      map_[key] = Bytes(value, value + value_bytes);
      store_changed_ = true;
      reply(c, uint8_t(Status::Ok), nullptr, 0);
      break;
    case Op::Get:
    case Op::Wait: {
      auto wait = std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(std::min<uint64_t>(tcp::get_u64(value), INT64_MAX)), kMaxWait);
      c.parked = true;
      c.park_op = op;
      c.park_key = std::move(key);
      c.park_deadline = net::Clock::now() + wait;
      answer_parked(c, net::Clock::now());  // at once if the key exists
      break;
    }
    case Op::Add: {
      auto it = map_.find(key);
      try {
        int64_t delta = static_cast<int64_t>(tcp::get_u64(value));
        int64_t sum = detail::add_to_counter(key, it == map_.end() ? nullptr : &it->second, delta);
        map_[key] = detail::format_counter(sum);
        store_changed_ = true;
        Bytes out;
        tcp::put_u64(out, static_cast<uint64_t>(sum));
        reply(c, uint8_t(Status::Ok), out.data(), out.size());
      } catch (const Error& e) {
        size_t n = std::min(std::strlen(e.what()), tcp::kMaxErrorBytes);
        reply(c, uint8_t(Status::Error), e.what(), n);
      }
      break;
    }
    case Op::Check: {
      uint8_t found = map_.contains(key) ? 1 : 0;
      reply(c, uint8_t(Status::Ok), &found, 1);
      break;
    }
  }
  return true;
}

void TCPStoreServer::wake_waiters() {
  // An answered client may send a set that completes other parked requests: repeat until
  // nothing changes (each pass consumes input, so this ends).
  do {
    store_changed_ = false;
    const auto now = net::Clock::now();
    for (auto& c : conns_) {
      if (!c->closed && c->parked && answer_parked(*c, now)) process_input(*c);
    }
  } while (store_changed_);
}

bool TCPStoreServer::answer_parked(Conn& c, net::Deadline now) {
  auto it = map_.find(c.park_key);
  if (it != map_.end()) {
    bool send_value = c.park_op == Op::Get;
    reply(c, uint8_t(Status::Ok), it->second.data(), send_value ? it->second.size() : 0);
  } else if (now >= c.park_deadline) {
    reply(c, uint8_t(Status::Timeout), nullptr, 0);
  } else {
    return false;
  }
  c.parked = false;
  c.park_key.clear();
  return true;
}

void TCPStoreServer::reply_handshake(Conn& c, Status status) {
  c.out.push_back(static_cast<uint8_t>(status));
  flush(c);
}

void TCPStoreServer::reply(Conn& c, uint8_t status, const void* payload, size_t n) {
  c.out.push_back(status);
  tcp::put_u32(c.out, static_cast<uint32_t>(n));
  tcp::put_bytes(c.out, payload, n);
  flush(c);
}

void TCPStoreServer::flush(Conn& c) {
  while (c.out_sent < c.out.size()) {
    ssize_t w = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.out_sent += static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      if (w == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c.closed = true;
      break;
    }
  }
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  }
}

}  // namespace ddpb::comm
