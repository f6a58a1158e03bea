#include "bench/cli/report_commands.h"

#include <fmt/core.h>

#include <filesystem>

#include "core/check.h"
#include "reports/compare.h"
#include "reports/html_report.h"
#include "reports/json_io.h"
#include "reports/schema_validator.h"

namespace fs = std::filesystem;

namespace ddpb::bench {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A results folder stands for its suite.json (the folder `ddpbench suite` printed).
std::string record_file(const std::string& path) {
  if (!fs::is_directory(path)) return path;
  const fs::path suite = fs::path(path) / "suite.json";
  DDPB_USAGE_CHECK(fs::exists(suite))
      << path
      << " is a folder without a suite.json (ddpbench suite --out DIR writes DIR/suite.json)";
  return suite.string();
}

// Bad input files are usage errors (exit 2), with the reader's message naming the file.
nlohmann::json read_record(const std::string& path) {
  try {
    return reports::read_record_file(record_file(path));
  } catch (const reports::ReportError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace

int report_command(const std::string& results, const std::string& out) {
  DDPB_USAGE_CHECK(ends_with(out, ".html") || ends_with(out, ".htm") || ends_with(out, ".md"))
      << "-o " << out << ": the report is .html or .md";
  const nlohmann::json suite = read_record(results);
  DDPB_USAGE_CHECK(suite.value("kind", "") == "suite")
      << results
      << " is a run record; `ddpbench report` renders a suite (ddpbench suite --out DIR: "
         "DIR/suite.json)";
  reports::write_suite_report(suite, out);
  fmt::print("wrote {} ({} bytes)\n", out, fs::file_size(out));
  return 0;
}

int compare_command(const std::string& base, const std::string& now, double threshold_pct) {
  DDPB_USAGE_CHECK(threshold_pct >= 0) << "--threshold must be >= 0, got " << threshold_pct;
  const nlohmann::json a = read_record(base), b = read_record(now);
  reports::CompareResult r;
  try {
    r = reports::compare_reports(a, b, threshold_pct);
  } catch (const reports::ReportError& e) {
    throw UsageError(e.what());
  }
  fmt::print("{}", r.table);
  for (const auto& w : r.warnings) fmt::print(stderr, "ddpbench compare: warning: {}\n", w);
  // Moves past the threshold that the noise explains are listed, so a reader sees why they
  // did not fail the comparison (Note [Step-time noise]).
  if (!r.within_noise.empty()) {
    fmt::print("\nwithin noise ({} past the {}% threshold, inside the runs' step-time noise):\n",
               r.within_noise.size(), threshold_pct);
    for (const auto& line : r.within_noise) fmt::print("  {}\n", line);
  }
  if (r.regressed) {
    fmt::print("\nREGRESSED ({} past the {}% threshold and the noise):\n", r.regressions.size(),
               threshold_pct);
    for (const auto& line : r.regressions) fmt::print("  {}\n", line);
    return 1;
  }
  fmt::print("\nno regression past the {}% threshold and the noise\n", threshold_pct);
  return 0;
}

}  // namespace ddpb::bench
