// Regression check between two records of the same kind: two suites (runs matched by id) or
// two single run records (`ddpbench run --out`, compared as one run with id "run"). The rules
// are documented in docs/suite-format.md ("How the report and compare use the fields").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::reports {

struct CompareResult {
  // One row per run id (base order, then runs only in `now`): throughput, median step time,
  // overlap ratio and peak memory as "base -> now (change)", and a verdict.
  std::string table;
  bool regressed = false;
  // One line per regression: "<id>: <metric> <base> -> <now> (<change>, threshold <t>)".
  std::vector<std::string> regressions;
  // One line per run present in both whose configurations differ: not compared.
  std::vector<std::string> warnings;
};

// A run regressed when, against `base`:
//   samples/s fell by more than threshold_pct percent,
//   the median step time or the peak memory rose by more than threshold_pct percent,
//   the overlap ratio fell by more than threshold_pct percentage points,
//   or it was ok in base and is not ok (failed, pending, interrupted) or missing in `now`.
// A metric missing on either side is shown as "-" and not compared. Runs only in `now` are
// listed as added. Two runs of one id are compared only when they ran the same workload, mode,
// world size and configuration (global batch, variant; for run records also the device,
// precision and comm hook); otherwise the row says NOT COMPARED and a warning names both.
// Throws ReportError when a record is neither a suite nor a run record, when the two kinds
// differ, when no run of one matches a run of the other, or when threshold_pct is negative or
// not finite.
CompareResult compare_reports(const nlohmann::json& base, const nlohmann::json& now,
                              double threshold_pct);

}  // namespace ddpb::reports
