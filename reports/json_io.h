// Report files on disk, written atomically (Note [Atomic file writes]): a reader never sees a
// half-written report, and a failed write (a full disk) leaves the old file intact.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ddpb::reports {

// Raised for unreadable or malformed report files; the message names the file.
class ReportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The schema version written into every report; bump it when a field changes meaning.
inline constexpr int kSchemaVersion = 2;

// JSON text that never throws on a string that is not UTF-8 (a path with a stray byte):
// such bytes become U+FFFD. Every record, dump and printed configuration uses it.
std::string json_text(const nlohmann::json& value, int indent = -1);

// Note [Atomic file writes] (base/atomic_file.h): a link keeps pointing at the new file, and a
// failure throws ReportError naming the file and leaves the old one as it was.
void write_text_atomic(const std::string& path, const std::string& text);
void write_json_atomic(const std::string& path, const nlohmann::json& value);
// Parses `path`, rejecting files over `max_bytes`; throws ReportError naming the file.
nlohmann::json read_json(const std::string& path, size_t max_bytes = size_t{1} << 30);
// Note [JSON depth]
// ~~~~~~~~~~~~~~~~~
// A ddpbench record or suite file nests arrays and objects a few levels deep; the renderers,
// compare and --resume walk them recursively, so a file nested thousands deep would exhaust
// the stack (a SIGSEGV, not an error). Every user-named JSON is therefore measured before it
// is parsed, and one deeper than kMaxJsonDepth is refused in one line.
inline constexpr size_t kMaxJsonDepth = 100;
// The deepest nesting of arrays and objects in `text` (strings skipped; JSON's syntax is the
// parser's to judge), counting no further than kMaxJsonDepth + 1.
size_t json_depth(std::string_view text);

// Parses report text held in memory (read_json's parser); throws ReportError naming `name`.
nlohmann::json parse_report_text(const std::string& text, const std::string& name);

}  // namespace ddpb::reports
