#include "comm/tcp_protocol.h"

namespace ddpb::comm::tcp {

ParseResult parse_handshake(const uint8_t* data, size_t size, Handshake* out) {
  if (size < kHandshakeBytes) return ParseResult::NeedMore;
  const uint32_t token_bytes = get_u32(data + 5);
  if (get_u32(data) != kMagic || token_bytes > kMaxTokenBytes) return ParseResult::Malformed;
  out->version = data[4];
  out->token.clear();
  if (out->version != kVersion) {
    out->frame_bytes = kHandshakeBytes;
    return ParseResult::Ok;
  }
  if (size - kHandshakeBytes < token_bytes) return ParseResult::NeedMore;
  out->token.assign(reinterpret_cast<const char*>(data + kHandshakeBytes), token_bytes);
  out->frame_bytes = kHandshakeBytes + token_bytes;
  return ParseResult::Ok;
}

ParseResult parse_request(const uint8_t* data, size_t size, Request* out) {
  if (size < kRequestHeaderBytes) return ParseResult::NeedMore;
  const uint8_t op_byte = data[0];
  const uint32_t key_bytes = get_u32(data + 1);
  if (op_byte < uint8_t(Op::Set) || op_byte > uint8_t(Op::Check) || key_bytes == 0 ||
      key_bytes > kMaxKeyBytes) {
    return ParseResult::Malformed;
  }
  const Op op = static_cast<Op>(op_byte);
  const size_t value_at = kRequestHeaderBytes + key_bytes + 4;
  if (size < value_at) return ParseResult::NeedMore;
  const uint32_t value_bytes = get_u32(data + value_at - 4);
  const bool size_ok = op == Op::Set     ? value_bytes <= kMaxValueBytes
                       : op == Op::Check ? value_bytes == 0
                                         : value_bytes == 8;
  if (!size_ok) return ParseResult::Malformed;
  if (size - value_at < value_bytes) return ParseResult::NeedMore;
  out->op = op;
  out->key.assign(reinterpret_cast<const char*>(data + kRequestHeaderBytes), key_bytes);
  out->value = data + value_at;
  out->value_bytes = value_bytes;
  out->frame_bytes = value_at + value_bytes;
  return ParseResult::Ok;
}

}  // namespace ddpb::comm::tcp
