// The cost ledger of DDP's flags: what each flag of the suite's group "flags" changes against
// DDP's defaults on the same workload, world size, samples per step and steps, with the noise
// of that difference, so that a reader sees which flags matter on this hardware and which do
// not. Read from the suite record only (runs of group "flags"); never throws on its contents.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
  DdpFlag flag = DdpFlag::Default;
  int64_t pairs = 0;
  double delta_ms = 0, noise_ms = 0;
  double delta_fraction = 0;  // delta_ms over the default's median step
  bool inside_noise = true;
  std::optional<double> delta_peak_bytes, delta_comm_bytes;  // per step
  std::string why;                                           // one line: what the flag changes
};

struct FlagLedger {
  std::string workload;
  int64_t world_size = 0, rounds = 0;
  double default_ms = 0;  // the median of the default runs' median steps
  std::vector<FlagCost> rows;
};

// The ledgers of the record's group "flags": one per workload and world size with a measured
// default run, in the order of their first run.
std::vector<FlagLedger> flag_ledgers(const SuiteRecord& suite);

// One line: what the flag changes in DDP's step, and so where its cost or gain comes from.
std::string flag_mechanism(DdpFlag flag);

// The ledgers as a report section: per ledger a note and a table.
ReportSection build_flag_ledger_section(const SuiteRecord& suite);

}  // namespace ddpb::reports
