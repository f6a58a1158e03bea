#include "bench/cli/validate_command.h"

#include <fmt/core.h>

#include <iostream>
#include <string>
#include <vector>

#include "reports/json_io.h"
#include "reports/report_util.h"
#include "reports/schema_validator.h"

namespace ddpb::bench {

int validate_command(const std::vector<std::string>& files) {
  int invalid = 0;
  for (const auto& file : files) {
    nlohmann::json doc;
    try {
      doc = reports::read_json(file);
    } catch (const reports::ReportError& e) {
      std::cerr << reports::printable(e.what()) << "\n";  // already names the file
      ++invalid;
      continue;
    }
    // The record's kind first, then its own schema (issue 25, M9: a projection record was
    // checked against the run schema); a kind ddpbench does not write is one line.
    const std::string kind = doc.is_object() && doc.contains("kind") && doc["kind"].is_string()
                                 ? doc["kind"].get<std::string>()
                                 : "";
    try {
      reports::check_schema_version(doc, file);  // docs/records.md "Versions": one line
    } catch (const reports::ReportError& e) {
      std::cerr << reports::printable(e.what()) << "\n";
      ++invalid;
      continue;
    }
    std::vector<reports::SchemaError> errors;
    if (kind == "suite") {
      errors = reports::validate_suite_record(doc);
    } else if (kind == "projection") {
      errors = reports::validate_projection_record(doc);
    } else if (kind == "run") {
      errors = reports::validate_run_record(doc);
    } else if (kind == "collectives") {
      errors = reports::validate_collectives_record(doc);
    } else {
      // Streamed piece by piece: GCC 12 warns (-Wrestrict) on "'" + string + "'".
      std::cerr << reports::printable(file) << ": not a ddpbench record: its \"kind\" is ";
      if (kind.empty()) {
        std::cerr << "missing";
      } else {
        std::cerr << '\'' << reports::printable(kind) << '\'';
      }
      std::cerr << " (expected run, suite, projection or collectives)\n";
      ++invalid;
      continue;
    }
    if (errors.empty()) {
      fmt::print("{}: valid\n", reports::printable(file));
      continue;
    }
    ++invalid;
    // A record's values reach the terminal: control and bidirectional characters escaped.
    for (const auto& e : errors) {
      std::cerr << reports::printable(file) << ": " << reports::printable(e.str()) << "\n";
    }
  }
  std::cout.flush();
  return invalid == 0 ? 0 : 1;
}

}  // namespace ddpb::bench
