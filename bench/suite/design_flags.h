// The flags the suite's group "flags" prices, one row each (Note [Design flags]).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "reports/design_info.h"
#include "reports/suite_record.h"

namespace ddpb::bench {

// Note [Design flags]
// ~~~~~~~~~~~~~~~~~~~
// A flag of a design is a row of one table, as a design is (Note [The design table]): its
// name (what the suite file's "flags" lists), the trait a design needs for the flag to apply
// (DDP's reducer flags: has_buckets), the `ddpbench run` arguments it adds, what it asks of
// the workload, and one sentence on what it changes in the step. The suite pairs each flag
// with its design's defaults (Note [Flag pairs] in suite_spec.cpp), and every run of group
// "flags" carries its row's name and sentence in the suite record (reports::FlagInfo), so
// that reports/ prices and explains flags, and keys them by design, without knowing any. The
// row named "default" is every pair's A run: no arguments, on every design.

// Where a flag run stands: its default's global batch, its world size and the suite's warm-up.
struct FlagPoint {
  int64_t global_batch = 0;
  int world_size = 0;
  int64_t warmup = 0;
};

// The `ddpbench run` arguments of a flag run, and its global batch.
struct FlagArgs {
  std::vector<std::string> args = {};
  int64_t global_batch = 0;
};

struct DesignFlag {
  const char* name = "";
  // The trait a design needs for the flag to apply; nullptr: every design (the default).
  bool reports::DesignInfo::*design_trait = nullptr;
  FlagArgs (*args)(const FlagPoint&) = nullptr;
  // One sentence: what the flag changes in the step, and so where its cost or gain comes from.
  const char* mechanism = "";
  // Prices BatchNorm: runs on a workload with it when the suite has one (else on the flags
  // workload, where it may change nothing, which the ledger then shows).
  bool prices_batch_norm = false;
  // Changes BatchNorm's statistics (SyncBatchNorm): left out without a workload that has
  // BatchNorm, and its runs are not checked against one device (bench/suite/suite_metrics.cpp).
  bool syncs_batch_norm = false;
  // What it prices that only CPU devices have, for the error on other devices; nullptr: any.
  const char* cpu_only = nullptr;

  bool is_default() const { return name == reports::FlagInfo::kDefault; }
  bool applies_to(const reports::DesignInfo& design) const {
    return design_trait == nullptr || design.*design_trait;
  }
  // What the suite record says of a run with this flag.
  reports::FlagInfo info() const { return {name, mechanism}; }
};

// Every row, "default" first, in the order suites list them.
const std::vector<DesignFlag>& design_flags();

// The row every pair's A run has: "default".
const DesignFlag& default_design_flag();

// The row named `name`, or nullptr.
const DesignFlag* find_design_flag(std::string_view name);

// The rows named, in that order (the built-in suites' lists); an internal error for an
// unknown name.
std::vector<const DesignFlag*> design_flags_named(std::initializer_list<std::string_view> names);

// Every row's name, as "default, static_graph or cpu_threads_all", for messages.
std::string design_flag_names();

// The row of a run of group "flags" (by its record's flag name), or nullptr for any other run.
const DesignFlag* flag_of(const reports::SuiteRun& run);

}  // namespace ddpb::bench
