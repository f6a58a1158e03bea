// libFuzzer target: the run-record reader (reports::parse_report_text + the schema validator)
// on arbitrary text. ReportError is the documented rejection; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "reports/json_io.h"
#include "reports/schema_validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    nlohmann::json doc = ddpb::reports::parse_report_text(text, "fuzz-input");
    // Validate whatever parsed, and render the errors as the CLI would.
    const auto errors = ddpb::reports::validate_run_record(doc);
    if (!errors.empty()) (void)ddpb::reports::format_errors(errors);
  } catch (const ddpb::reports::ReportError&) {
    // Not JSON: rejected with a message naming the input.
  }
  return 0;
}
