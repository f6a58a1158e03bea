// Regression check between two records of the same kind: two suites (runs matched by their
// configuration, Note [Runs matched by configuration] in compare.cpp) or two single run records
// (`ddpbench run --out`, compared as one run with id "run"). The rules are documented in
// docs/suite-format.md ("How the report and compare use the fields") and docs/cli.md.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddpb::reports {

struct CompareResult {
  // One row per base run (in its order; "base id -> new id" when the run of the same
  // configuration has another id), then one per run only in `now`: throughput, median step time,
  // the step-time noise band (Note [Step-time noise]), overlap ratio and peak memory as
  // "base -> now (change)", and a verdict: REGRESSED, improved, within noise, ok, REMOVED,
  // NOT COMPARED, fixed, not ok in both, added.
  std::string table;
  bool regressed = false;
  // One line per regression: "<id>: <metric> <base> -> <now> (<change>, threshold <t>[, beyond
  // the noise ±<band> ms])".
  std::vector<std::string> regressions;
  // One line per metric that moved the wrong way past the threshold but inside the noise:
  // "<id>: <metric> <base> -> <now> (<change>, threshold <t>): <+ms> ms a step, inside the noise
  // ±<band> ms", where <+ms> is the step time the move costs (for the overlap: the exposed
  // communication it adds).
  std::vector<std::string> within_noise;
  // One line per id that names another configuration in each record (not compared, or the
  // base run compared with the run of its configuration), and one for the runs matched by id
  // alone for want of a typed configuration.
  std::vector<std::string> warnings;
};

// A run regressed when, against `base`, one of its metrics moved the wrong way past both the
// threshold and the noise of the two runs (Note [Step-time noise], band_ms below):
//   samples/s fell by more than threshold_pct percent, and the longer step it implies
//     (base median x (base samples/s / new samples/s - 1)) exceeds band_ms;
//   the median step time rose by more than threshold_pct percent and by more than band_ms;
//   the overlap ratio fell by more than threshold_pct percentage points, and the exposed
//     communication per step rose by more than band_ms (threshold alone when a side lacks it);
//   the peak memory rose by more than threshold_pct percent (deterministic: no noise);
//   or it was ok in base and is not ok (failed, pending, interrupted) or missing in `now`.
// A move past the threshold inside the noise makes the row "within noise" and never a
// regression; one past both the right way makes it "improved". band_ms = step_noise_ms of the
// two runs' step_time_ms (0 when neither records a spread: the threshold alone judges).
// A metric missing on either side is shown as "-" and not compared. Runs only in `now` are
// listed as added. A base run is compared with the run of `now` that has the same typed
// configuration ("config"), whatever its id, less the fields that say where a run writes or how
// it is supervised (output paths, --timeout, --rendezvous, --flight-dir, --inject-fault); a run
// whose id names another configuration in `now` is NOT COMPARED and a warning names the fields
// that differ. Runs of a record without "config" are matched by id, and compared only when
// they ran the same workload, mode, world size and batch (global batch, variant; for run
// records also the device, precision and comm hook).
// Throws ReportError when a record is neither a suite nor a run record, when the two kinds
// differ, when no run of one matches a run of the other, or when threshold_pct is negative or
// not finite.
CompareResult compare_reports(const nlohmann::json& base, const nlohmann::json& now,
                              double threshold_pct);

}  // namespace ddpb::reports
