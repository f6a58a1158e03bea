// libFuzzer target: the TCPStore server's frame parsers on an arbitrary byte stream, consumed
// as the server consumes a connection's input: a handshake, then requests until the bytes run
// out or a frame is malformed. Set/add/check run against a small map with the server's counter
// helpers, so values that a client stored are parsed by add() too. The parsers must never read
// past the buffer and must consume exactly the frame they report.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "comm/store.h"
#include "comm/tcp_protocol.h"

namespace tcp = ddpb::comm::tcp;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void apply_request(const tcp::Request& req, std::map<std::string, ddpb::comm::Bytes>& map) {
  switch (req.op) {
    case tcp::Op::Set:
      map[req.key] = ddpb::comm::Bytes(req.value, req.value + req.value_bytes);
      break;
    case tcp::Op::Add: {
      check(req.value_bytes == 8);
      auto it = map.find(req.key);
      try {
        int64_t delta = static_cast<int64_t>(tcp::get_u64(req.value));
        int64_t sum = ddpb::comm::detail::add_to_counter(
            req.key, it == map.end() ? nullptr : &it->second, delta);
        map[req.key] = ddpb::comm::detail::format_counter(sum);
      } catch (const ddpb::Error&) {
        // Not a counter, or overflow: the server answers Error.
      }
      break;
    }
    case tcp::Op::Get:
    case tcp::Op::Wait:
      check(req.value_bytes == 8);
      (void)tcp::get_u64(req.value);
      break;
    case tcp::Op::Check:
      check(req.value_bytes == 0);
      (void)map.contains(req.key);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tcp::Handshake hs;
  tcp::ParseResult r = tcp::parse_handshake(data, size, &hs);
  if (r != tcp::ParseResult::Ok) return 0;
  check(hs.frame_bytes >= tcp::kHandshakeBytes && hs.frame_bytes <= size);
  if (hs.version != tcp::kVersion) return 0;
  (void)tcp::token_matches("fuzz-token", hs.token);

  std::map<std::string, ddpb::comm::Bytes> map;
  size_t pos = hs.frame_bytes;
  while (pos < size) {
    tcp::Request req;
    r = tcp::parse_request(data + pos, size - pos, &req);
    if (r != tcp::ParseResult::Ok) break;
    check(req.frame_bytes > 0 && req.frame_bytes <= size - pos);
    check(!req.key.empty() && req.key.size() <= ddpb::comm::kMaxKeyBytes);
    check(req.value >= data + pos && req.value + req.value_bytes == data + pos + req.frame_bytes);
    apply_request(req, map);
    pos += req.frame_bytes;
  }
  return 0;
}
