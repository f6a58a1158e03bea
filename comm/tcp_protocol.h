// The TCPStore wire protocol (client <-> server), little-endian.
//
// Handshake, once per connection, before anything else:
//   client: u32 kMagic | u8 kVersion | u32 token_bytes | token      (token <= kMaxTokenBytes)
//   server: u8 Status   Ok, or BadToken / BadVersion / Busy and then it closes
// Request:  u8 Op | u32 key_bytes | key | u32 value_bytes | value
//   Set   value = the bytes to store (<= kMaxValueBytes)
//   Get   value = u64 wait_ms: the server answers once the key exists, or Timeout
//   Wait  value = u64 wait_ms: as Get, without sending the value back
//   Add   value = i64 delta
//   Check value = empty
// Reply:    u8 Status | u32 payload_bytes | payload
//   Ok: the value (Get), the new count as i64 (Add), u8 0/1 (Check), empty otherwise;
//   Timeout: empty; Error: a message (e.g. add() on a value that is not a counter).
// A frame that breaks these rules (unknown op, key or value over the limits, a payload of the
// wrong size) makes the server close that connection; the server itself carries on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "comm/store.h"

namespace ddpb::comm::tcp {

inline constexpr uint32_t kMagic = 0x53504444;  // "DDPS"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kMaxTokenBytes = 1024;
inline constexpr size_t kMaxConnections = 1024;
inline constexpr size_t kHandshakeBytes = 4 + 1 + 4;
inline constexpr size_t kRequestHeaderBytes = 1 + 4;  // op, key_bytes
inline constexpr size_t kReplyHeaderBytes = 1 + 4;    // status, payload_bytes
inline constexpr size_t kMaxErrorBytes = 4096;

enum class Op : uint8_t { Set = 1, Get = 2, Wait = 3, Add = 4, Check = 5 };
enum class Status : uint8_t {
  Ok = 0,
  Timeout = 1,
  Error = 2,
  BadToken = 3,
  BadVersion = 4,
  Busy = 5,
};

inline void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_u64(Bytes& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint64_t get_u64(const uint8_t* p) {
  return uint64_t(get_u32(p)) | uint64_t(get_u32(p + 4)) << 32;
}
inline void put_bytes(Bytes& out, const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}

// ---- Frame parsing (pure: no I/O, no state), shared by the server and the fuzzer ----------

enum class ParseResult {
  NeedMore,   // a prefix of a valid frame: wait for more bytes
  Ok,         // one frame parsed; *out describes it
  Malformed,  // breaks the protocol: close the connection
};

struct Handshake {
  uint8_t version = 0;
  std::string token;
  size_t frame_bytes = 0;  // bytes consumed
};

// Parses the handshake at the front of [data, data + size). A wrong magic or a token over
// kMaxTokenBytes is Malformed. A version other than kVersion is Ok as soon as the fixed
// header is in (token left unread, frame_bytes = kHandshakeBytes): the server answers
// BadVersion without waiting for a token it cannot check.
ParseResult parse_handshake(const uint8_t* data, size_t size, Handshake* out);

struct Request {
  Op op = Op::Check;
  std::string key;
  const uint8_t* value = nullptr;  // points into the parsed buffer
  uint32_t value_bytes = 0;
  size_t frame_bytes = 0;  // bytes consumed
};

// Parses one request at the front of [data, data + size). Malformed: unknown op, key not
// 1..kMaxKeyBytes, or a value of the wrong size for the op (Set: <= kMaxValueBytes; Check:
// 0; Get, Wait, Add: 8). Never reads past data + size.
ParseResult parse_request(const uint8_t* data, size_t size, Request* out);

// Compares in time that depends on the expected token's length only, not on where the
// tokens first differ, so a client cannot guess the token byte by byte.
inline bool token_matches(const std::string& expected, const std::string& got) {
  size_t diff = expected.size() ^ got.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    uint8_t g = i < got.size() ? static_cast<uint8_t>(got[i]) : 0;
    diff |= static_cast<uint8_t>(expected[i]) ^ g;
  }
  return diff == 0;
}

}  // namespace ddpb::comm::tcp
