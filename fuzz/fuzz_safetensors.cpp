// libFuzzer target: ddpb::parse_safetensors() on arbitrary bytes. Rejecting the input with
// UsageError is the documented outcome; any other exception, a crash, a leak or an
// out-of-bounds read is a bug. Accepted tensors are read back in full, so ASan sees every
// byte the parser claims is there.
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "workloads/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto tensors = ddpb::parse_safetensors(data, size, "fuzz-input");
    volatile uint8_t sink = 0;
    for (const auto& nt : tensors) {
      const auto* bytes = static_cast<const uint8_t*>(nt.tensor.raw_data());
      for (size_t i = 0; i < nt.tensor.nbytes(); ++i) sink = sink ^ bytes[i];
    }
  } catch (const ddpb::UsageError&) {
    // Malformed input, rejected with a message: the expected outcome.
  }
  return 0;
}
