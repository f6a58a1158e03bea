// The cost ledger of a design's flags: what each flag of the suite's group "flags" changes
// against its design's defaults on the same workload, world size, samples per step and steps,
// with the noise of that difference, so that a reader sees which flags matter on this hardware
// and which do not. Read from the suite record only (runs of group "flags", each with its
// flag's name and mechanism, Note [Design flags] in bench/suite/design_flags.h, and the
// record's design rows); never throws on its contents.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/design_info.h"
#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

// Note [Flag ledger]
// ~~~~~~~~~~~~~~~~~~
// Each flag run is paired with the default run of its own round (Note [Flag pairs] in
// bench/suite/suite_spec.cpp). For a flag with pairs i = 1..k:
//   d_i       = the flag run's median step - its round's default median step
//   delta_ms  = the median of the d_i
//   noise_ms  = the larger of (max d_i - min d_i) / 2, the spread between rounds, and twice the
//               median over pairs of sqrt(sd_a^2 / n_a + sd_b^2 / n_b), the standard error of
//               one difference from the two runs' own step-to-step spread
// A flag whose |delta_ms| <= noise_ms is inside the noise: the ledger says so, shows no sign
// and puts it after every flag outside the noise, which are ordered by |delta_ms|. Peak memory
// and bytes per step are deterministic for a configuration: their deltas are the medians of
// the paired differences, with no noise. A ledger of one round has only the within-run error.
struct FlagCost {
  std::string flag;  // its name in the record: runs[].flag.name
  int64_t pairs = 0;
  double delta_ms = 0, noise_ms = 0;
  double delta_fraction = 0;  // delta_ms over the default's median step
  bool inside_noise = true;
  std::optional<double> delta_peak_bytes, delta_comm_bytes;  // per step
  std::string why;  // one line, the record's runs[].flag.mechanism: what the flag changes
};

struct FlagLedger {
  DesignInfo design;  // the record's row of the runs' design (SuiteRecord::design_of)
  std::string workload;
  int64_t world_size = 0, rounds = 0;
  double default_ms = 0;  // the median of the default runs' median steps
  std::vector<FlagCost> rows;
};

// The ledgers of the record's group "flags": one per design, workload and world size with a
// measured default run, in the order of their first run; in each, the flags in the order of
// their first run before the ranking.
std::vector<FlagLedger> flag_ledgers(const SuiteRecord& suite);

// The ledgers as a report section: per ledger a note and a table, each headed by its design's
// label.
ReportSection build_flag_ledger_section(const SuiteRecord& suite);

}  // namespace ddpb::reports
