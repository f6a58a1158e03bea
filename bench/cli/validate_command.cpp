#include "bench/cli/validate_command.h"

#include <fmt/core.h>

#include <iostream>

#include "reports/json_io.h"
#include "reports/schema_validator.h"

namespace ddpb::bench {

int validate_command(const std::vector<std::string>& files) {
  int invalid = 0;
  for (const auto& file : files) {
    nlohmann::json doc;
    try {
      doc = reports::read_json(file);
    } catch (const reports::ReportError& e) {
      std::cerr << e.what() << "\n";  // already names the file
      ++invalid;
      continue;
    }
    const bool suite = doc.is_object() && doc.value("kind", "") == "suite";
    const auto errors =
        suite ? reports::validate_suite_record(doc) : reports::validate_run_record(doc);
    if (errors.empty()) {
      fmt::print("{}: valid\n", file);
      continue;
    }
    ++invalid;
    for (const auto& e : errors) std::cerr << file << ": " << e.str() << "\n";
  }
  std::cout.flush();
  return invalid == 0 ? 0 : 1;
}

}  // namespace ddpb::bench
