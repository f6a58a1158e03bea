#include "reports/json_io.h"

#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/atomic_file.h"
#include "base/input_file.h"

namespace ddpb::reports {

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

void write_text_atomic(const std::string& path, const std::string& text) {
  try {
    write_file_atomic(path, text, "report");  // Note [Atomic file writes]
  } catch (const WriteFileError& e) {
    throw ReportError(e.what());
  }
}

void write_json_atomic(const std::string& path, const nlohmann::json& value) {
  write_text_atomic(path, json_text(value, 2) + "\n");
}

nlohmann::json read_json(const std::string& path, size_t max_bytes) {
  std::string text;
  try {
    text = read_input_file(path, max_bytes);  // Note [User-named inputs]
  } catch (const InputFileError& e) {
    throw ReportError(e.what());
  }
  return parse_report_text(text, path);
}

size_t json_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) break;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_report_text(const std::string& text, const std::string& name) {
  if (json_depth(text) > kMaxJsonDepth)  // Note [JSON depth]
    throw ReportError(name + " nests arrays and objects more than " +
                      std::to_string(kMaxJsonDepth) +
                      " levels deep; a ddpbench record is a few levels deep");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // A file cut short (a copy of a suite still being written, a full disk) fails at its last
    // byte; say so, since "unexpected end of input" alone reads like a syntax mistake.
    const bool cut_short = !text.empty() && e.byte >= text.size();
    throw ReportError(name + " is not valid JSON" +
                      (cut_short ? " (it ends early: truncated?)" : "") + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number beyond double's range (1e400) throws out_of_range.406.
    throw ReportError(name + " is not valid JSON: " + e.what());
  }
}

}  // namespace ddpb::reports
