// libFuzzer target: the meta.pkl reader (data/nanogpt_meta.h, Note [A bounded pickle reader]) on
// arbitrary bytes. UsageError is the documented rejection (exit 2); a crash, a leak, undefined
// behaviour or memory past the note's bounds (libFuzzer's -rss_limit_mb) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "data/nanogpt_meta.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)ddpb::parse_meta_vocab_size(std::string_view(reinterpret_cast<const char*>(data), size),
                                      "fuzz-input");
  } catch (const ddpb::UsageError&) {
  }
  return 0;
}
