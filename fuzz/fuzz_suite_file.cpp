// libFuzzer target: the suite-file parser (bench/suite/suite_spec.h) on arbitrary text, applied
// over the default CPU matrix and then validated and expanded as `ddpbench suite` would. UsageError
// is the documented rejection (exit 2); anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/suite/suite_spec.h"
#include "core/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ddpb::bench::SuiteSpec spec = ddpb::bench::default_suite(ddpb::DeviceType::CPU, 0, false);
    ddpb::bench::apply_suite_text(spec, text, "fuzz-input");
    ddpb::bench::validate_suite(spec, 0);
    // A valid spec must expand and round-trip (the --resume path).
    const auto runs = ddpb::bench::expand_suite(spec);
    (void)runs;
    (void)ddpb::bench::SuiteSpec::from_json(spec.to_json());
  } catch (const ddpb::UsageError&) {
  }
  return 0;
}
