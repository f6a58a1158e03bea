#include "base/printable.h"

#include <cstddef>

namespace ddpb {
namespace {

// The code point of a bidirectional control at text[i] (U+200E, U+200F, U+202A..U+202E,
// U+2066..U+2069, three bytes in UTF-8), else 0.
int bidi_control(std::string_view text, size_t i) {
  if (i + 2 >= text.size() || static_cast<unsigned char>(text[i]) != 0xe2) return 0;
  const auto b1 = static_cast<unsigned char>(text[i + 1]);
  const auto b2 = static_cast<unsigned char>(text[i + 2]);
  const int cp = 0x2000 | ((b1 & 0x3f) << 6) | (b2 & 0x3f);
  const bool bidi = cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
                    (cp >= 0x2066 && cp <= 0x2069);
  return (b1 & 0xc0) == 0x80 && (b2 & 0xc0) == 0x80 && bidi ? cp : 0;
}

}  // namespace

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      const auto c1 = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += kHex[c1 >> 4];
      out += kHex[c1 & 15];
    } else if (const int bidi = bidi_control(text, i); bidi != 0) {
      // Issue 48, P21: U+202E and its kin reorder what follows on the terminal.
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(bidi >> shift) & 15];
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace ddpb
