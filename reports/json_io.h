// Report files on disk. Writing is atomic: the JSON goes to a temporary file in the same
// directory, is flushed and fsync'ed, then renamed over the target, so a reader never sees a
// half-written report and a failed write (full disk) leaves the old file intact.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace ddpb::reports {

// Raised for unreadable or malformed report files; the message names the file.
class ReportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The schema version written into every report; bump it when a field changes meaning.
inline constexpr int kSchemaVersion = 1;

// The file that writing `path` replaces: `path` itself or, for a symbolic link, the file the
// link points to (followed to the end), so that the temporary file and the rename land next
// to the real target and the link survives. Throws ReportError, before anything is written,
// when that file exists and is not a regular file (a device, a FIFO, a directory, a socket):
// renaming over it would destroy it. Every writer of output files goes through this.
std::string resolve_output_path(const std::string& path);

// JSON text that never throws on a string that is not UTF-8 (a path with a stray byte):
// such bytes become U+FFFD. Every record, dump and printed configuration uses it.
std::string json_text(const nlohmann::json& value, int indent = -1);

// Writes through resolve_output_path: a link keeps pointing at the new file.
void write_text_atomic(const std::string& path, const std::string& text);
void write_json_atomic(const std::string& path, const nlohmann::json& value);
// Parses `path`, rejecting files over `max_bytes`; throws ReportError naming the file.
nlohmann::json read_json(const std::string& path, size_t max_bytes = size_t{1} << 30);
// Parses report text held in memory (read_json's parser); throws ReportError naming `name`.
nlohmann::json parse_report_text(const std::string& text, const std::string& name);

}  // namespace ddpb::reports
