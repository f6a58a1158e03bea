#include "comm/tcp_store.h"

#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "comm/tcp_store_server.h"

namespace ddpb::comm {

using net::Clock;
using tcp::Op;
using tcp::Status;

namespace {

// The server answers a parked get/wait when its wait time is up; allow this much more before
// the client gives up on the reply (a loaded machine, a long GC pause in a Python peer).
constexpr auto kReplyGrace = std::chrono::seconds(5);
constexpr auto kFirstBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);

const char* op_name(Op op) {
  switch (op) {
    case Op::Set:
      return "set";
    case Op::Get:
      return "get";
    case Op::Wait:
      return "wait";
    case Op::Add:
      return "add";
    case Op::Check:
      return "check";
  }
  return "?";
}

Bytes encode_u64(uint64_t v) {
  Bytes out;
  tcp::put_u64(out, v);
  return out;
}

uint64_t wait_ms(Duration d) {
  return static_cast<uint64_t>(std::max<int64_t>(d.count(), 0));
}

}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, bool is_server, Duration timeout,
                   std::string token, const std::string& bind_host)
    : host_(std::move(host)), port_(port), token_(std::move(token)) {
  DDPB_CHECK(token_.size() <= tcp::kMaxTokenBytes)
      << "TCPStore token of " << token_.size() << " bytes (max " << tcp::kMaxTokenBytes << ")";
  timeout_ = timeout;
  if (is_server) {
    server_ = std::make_unique<TCPStoreServer>(bind_host.empty() ? host_ : bind_host, port, token_);
    port_ = server_->port();
  } else {
    DDPB_CHECK(port != 0) << "a TCPStore client needs the server's port (MASTER_PORT), not 0";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  connect(Clock::now() + timeout);
}

TCPStore::~TCPStore() = default;

std::string TCPStore::where() const {
  return host_ + ":" + std::to_string(port_);
}

void TCPStore::connect(net::Deadline deadline) {
  fd_.reset();
  Bytes hello;
  tcp::put_u32(hello, tcp::kMagic);
  hello.push_back(tcp::kVersion);
  tcp::put_u32(hello, static_cast<uint32_t>(token_.size()));
  tcp::put_bytes(hello, token_.data(), token_.size());

  auto backoff = std::chrono::duration_cast<Clock::duration>(kFirstBackoff);
  std::string why;
  for (;;) {
    net::Fd fd = net::try_connect(host_, port_, deadline, &why);
    if (fd) {
      uint8_t status = 0;
      net::Io io = net::send_all(fd.get(), hello.data(), hello.size(), deadline);
      if (io == net::Io::Ok) io = net::recv_all(fd.get(), &status, 1, deadline);
      if (io != net::Io::Ok) {
        why = io == net::Io::Timeout ? "no handshake reply" : "closed during the handshake";
      } else if (status == uint8_t(Status::Ok)) {
        fd_ = std::move(fd);
        return;
      } else if (status == uint8_t(Status::BadToken)) {
        DDPB_FAIL() << "TCPStore server " << where() << " rejected this client's token: every "
                    << "rank must use the token of rank 0 (DDPBENCH_STORE_TOKEN; without one, "
                    << "TORCHELASTIC_RUN_ID or the job identity: the same ddpbench "
                    << "configuration on the same MASTER_PORT), so this rank belongs to "
                    << "another job";
      } else if (status == uint8_t(Status::BadVersion)) {
        DDPB_FAIL() << "TCPStore server " << where() << " speaks another protocol version (this "
                    << "client: " << int(tcp::kVersion) << ")";
      } else if (status == uint8_t(Status::Busy)) {
        why = "server at its limit of " + std::to_string(tcp::kMaxConnections) + " connections";
      } else {
        why = "unexpected handshake reply " + std::to_string(status);
      }
    }
    const auto now = Clock::now();
    DDPB_CHECK(now < deadline) << "TCPStore could not connect to " << where() << " within "
                               << timeout().count() << " ms: " << why;
    std::this_thread::sleep_for(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::duration_cast<Clock::duration>(kMaxBackoff));
  }
}

TCPStore::Reply TCPStore::request(Op op, const std::string& key, const Bytes& value,
                                  Duration server_wait) {
  Bytes frame;
  frame.reserve(tcp::kRequestHeaderBytes + key.size() + 4 + value.size());
  frame.push_back(static_cast<uint8_t>(op));
  tcp::put_u32(frame, static_cast<uint32_t>(key.size()));
  tcp::put_bytes(frame, key.data(), key.size());
  tcp::put_u32(frame, static_cast<uint32_t>(value.size()));
  tcp::put_bytes(frame, value.data(), value.size());

  std::lock_guard<std::mutex> lock(mutex_);
  bool reconnected = false;
  for (;;) {
    if (!fd_ || net::unusable(fd_.get())) {
      fd_.reset();
      DDPB_CHECK(!reconnected) << "TCPStore connection to " << where() << " dropped again during "
                               << op_name(op) << "('" << key << "')";
      reconnected = true;
      try {
        connect(Clock::now() + timeout());
      } catch (const Error& e) {
        throw Error("TCPStore lost its connection to " + where() + " during " + op_name(op) + "('" +
                    key + "') and could not reconnect: " + e.what());
      }
      reconnects_.fetch_add(1);
      std::fprintf(stderr, "ddpbench: TCPStore connection to %s was lost; reconnected\n",
                   where().c_str());
    }
    const auto io_deadline =
        Clock::now() + std::max<Clock::duration>(timeout(), server_wait + kReplyGrace);
    // A failed send never reached the server as a whole frame, so resending is always safe.
    net::Io io = net::send_all(fd_.get(), frame.data(), frame.size(), io_deadline);
    if (io == net::Io::Closed) {
      fd_.reset();
      continue;
    }
    Reply reply{Status::Ok, {}};
    uint8_t header[tcp::kReplyHeaderBytes];
    if (io == net::Io::Ok) io = net::recv_all(fd_.get(), header, sizeof header, io_deadline);
    if (io == net::Io::Ok) {
      const uint32_t n = tcp::get_u32(header + 1);
      if (n > kMaxValueBytes) fd_.reset();
      DDPB_CHECK(n <= kMaxValueBytes) << "TCPStore server " << where() << " sent a reply of " << n
                                      << " bytes to " << op_name(op) << "('" << key << "')";
      reply.status = static_cast<Status>(header[0]);
      reply.payload.resize(n);
      io = net::recv_all(fd_.get(), reply.payload.data(), n, io_deadline);
    }
    if (io == net::Io::Ok) return reply;
    const int err = errno;
    fd_.reset();
    DDPB_CHECK(io != net::Io::Timeout) << "no reply from TCPStore server " << where() << " to "
                                       << op_name(op) << "('" << key << "')";
    DDPB_CHECK(op != Op::Add) << "TCPStore connection to " << where()
                              << " dropped before the reply to add('" << key << "') ("
                              << std::strerror(err) << "); not resent, because the server may "
                              << "have counted it already";
  }
}

void TCPStore::drop_connection() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

namespace {

void expect_ok(const char* op, const std::string& key, Status status, const Bytes& payload,
               size_t payload_bytes, const std::string& where) {
  if (status == Status::Error) {
    throw Error("TCPStore server " + where + ": " + std::string(payload.begin(), payload.end()));
  }
  DDPB_CHECK(status == Status::Ok && payload.size() == payload_bytes)
      << "TCPStore server " << where << " answered " << op << "('" << key << "') with status "
      << int(status) << " and " << payload.size() << " bytes";
}

}  // namespace

void TCPStore::set(const std::string& key, const Bytes& value) {
  detail::check_key_value("TCPStore", key, value.size());
  Reply r = request(Op::Set, key, value, Duration(0));
  expect_ok("set", key, r.status, r.payload, 0, where());
}

Bytes TCPStore::get(const std::string& key) {
  detail::check_key_value("TCPStore", key, 0);
  const Duration timeout = timeout_;
  Reply r = request(Op::Get, key, encode_u64(wait_ms(timeout)), timeout);
  if (r.status == Status::Timeout) detail::throw_timeout("TCPStore", "get", {key}, timeout);
  expect_ok("get", key, r.status, r.payload, r.payload.size(), where());
  return std::move(r.payload);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  detail::check_key_value("TCPStore", key, 0);
  Reply r = request(Op::Add, key, encode_u64(static_cast<uint64_t>(delta)), Duration(0));
  expect_ok("add", key, r.status, r.payload, 8, where());
  return static_cast<int64_t>(tcp::get_u64(r.payload.data()));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    detail::check_key_value("TCPStore", key, 0);
    Reply r = request(Op::Check, key, {}, Duration(0));
    expect_ok("check", key, r.status, r.payload, 1, where());
    if (r.payload[0] == 0) return false;
  }
  return true;
}

void TCPStore::wait(const std::vector<std::string>& keys) {
  const Duration timeout = timeout_;
  const auto deadline = Clock::now() + timeout;
  for (const auto& key : keys) {
    detail::check_key_value("TCPStore", key, 0);
    auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
    left = std::max(left, Duration(0));
    Reply r = request(Op::Wait, key, encode_u64(wait_ms(left)), left);
    if (r.status == Status::Timeout) detail::throw_timeout("TCPStore", "wait", keys, timeout);
    expect_ok("wait", key, r.status, r.payload, 0, where());
  }
}

void check_store_token(const std::string& token) {
  DDPB_USAGE_CHECK(token.size() >= kMinTokenBytes)
      << "DDPBENCH_STORE_TOKEN has " << token.size() << " characters; a store's token needs "
      << kMinTokenBytes << " at least, or guessing it is quick (Note [Wrong tokens])";
}

std::string store_token_from_env(const std::string& job_identity) {
  const char* token = std::getenv("DDPBENCH_STORE_TOKEN");
  if (token != nullptr && *token != '\0') {
    check_store_token(token);
    return token;
  }
  const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
  if (run_id != nullptr && *run_id != '\0') return "run:" + std::string(run_id);
  return job_identity.empty() ? "" : "job:" + job_identity;
}

std::shared_ptr<Store> make_store_from_env(int rank, Duration timeout,
                                           const std::string& job_identity) {
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port_text = std::getenv("MASTER_PORT");
  DDPB_USAGE_CHECK(addr != nullptr && *addr != '\0')
      << "MASTER_ADDR is not set: the env:// rendezvous needs rank 0's address (e.g. 127.0.0.1)";
  DDPB_USAGE_CHECK(port_text != nullptr && *port_text != '\0')
      << "MASTER_PORT is not set: the env:// rendezvous needs rank 0's store port";
  const char* end = port_text + std::strlen(port_text);
  int port = 0;
  auto [ptr, ec] = std::from_chars(port_text, end, port);
  DDPB_USAGE_CHECK(ec == std::errc() && ptr == end && port >= 1 && port <= 65535)
      << "MASTER_PORT='" << port_text << "' is not a port number (1..65535)";
  DDPB_USAGE_CHECK(rank >= 0) << "rank " << rank << " must be >= 0";
  const char* secret = std::getenv("DDPBENCH_STORE_TOKEN");
  if (rank == 0 && (secret == nullptr || *secret == '\0')) {
    std::fprintf(stderr,
                 "ddpbench: warning: the TCPStore on port %d runs without DDPBENCH_STORE_TOKEN: "
                 "ranks are matched by %s, not authenticated\n",
                 port,
                 std::getenv("TORCHELASTIC_RUN_ID") != nullptr ? "TORCHELASTIC_RUN_ID"
                                                               : "the job's configuration");
  }
  const std::string token = store_token_from_env(job_identity);
  DDPB_USAGE_CHECK(token.size() <= tcp::kMaxTokenBytes)
      << "the store token (DDPBENCH_STORE_TOKEN or TORCHELASTIC_RUN_ID) is longer than "
      << tcp::kMaxTokenBytes << " bytes";
  // Note [Store interface]: rank 0's store listens on MASTER_ADDR's interface only (loopback
  // stays private to the machine); every interface only when DDPBENCH_STORE_BIND_ALL=1 asks.
  const char* all = std::getenv("DDPBENCH_STORE_BIND_ALL");
  const bool bind_all = all != nullptr && std::string_view(all) == "1";
  return std::make_shared<TCPStore>(addr, static_cast<uint16_t>(port), /*is_server=*/rank == 0,
                                    timeout, token, bind_all ? "0.0.0.0" : "");
}

}  // namespace ddpb::comm
