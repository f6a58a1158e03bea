// The training designs `ddpbench run --mode` offers, one row each (Note [The design table]).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/run/run_config.h"
#include "reports/design_info.h"
#include "workloads/model.h"

namespace ddpb::bench {

class ModeRunner;

// Note [The design table]
// ~~~~~~~~~~~~~~~~~~~~~~~
// single, DP and DDP are rows of one table, as the workload families are (Note [Workload
// families]). A row holds what the records say about the design (reports::DesignInfo: name,
// label, noun, traits, phases with their kinds; Note [Designs in records]) and what running
// it takes: its runner, and the host memory a participant needs beyond the model. The CLI,
// the trainer, the measurements and the suite ask a row for a trait (`processes_per_rank`
// starts the launcher, `has_buckets` accepts DDP's reducer flags and gets the bucket sweep);
// none of them compares a design's name. A new design is one runner and one row, or one
// register_design() call (the tests register a toy design that way).
struct Design {
  reports::DesignInfo info;
  std::unique_ptr<ModeRunner> (*make_runner)(const RunConfig&, const WorkloadSpec&) = nullptr;
  // Host memory one process needs besides the model's tensors (the CPU capacity check).
  int64_t process_overhead_bytes = int64_t{8} << 20;
  // What the suite's PyTorch side by side runs it as (scripts/peer/torch_reference.py), and
  // whether that needs CUDA devices.
  const char* pytorch_peer = "";
  bool pytorch_peer_needs_cuda = false;
  // The bytes its gradient collectives put on the wire a step (docs/metrics.md "Bytes on the
  // wire"), for `gradient_bytes` of gradients over `world` ranks or devices; null: none.
  double (*expected_gradient_bus_bytes)(double gradient_bytes, int world) = nullptr;
  // DDP's ZeRO stage (Note [ZeRO in DDP]): 0 for plain DDP and every other design.
  int zero_stage = 0;
  // --zero-variant pytorch: the stage's optimizer over DDP's AllReduce, its shards broadcast
  // (PyTorch's ZeroRedundancyOptimizer; Note [ZeRO in DDP]).
  bool zero_broadcast = false;
  // Whether a suite without a "modes" key scales it; ZeRO's stages run in their own group.
  bool in_default_suite = true;
};

// Every row, in the order suites and reports list them (a deque: rows never move).
const std::deque<Design>& designs();

// The row --mode names; a usage error listing the names for any other.
const Design& design_named(std::string_view name);

// The row of a run's configuration.
inline const Design& design_of(const RunConfig& config) {
  return design_named(config.mode);
}

// The names of the rows with a trait (every row without one), as "ddp" or "single, dp or
// ddp", for messages.
std::string design_names(bool reports::DesignInfo::*trait = nullptr);

// Every row's name, in the table's order; `default_suite` only: the rows a suite without a
// "modes" key scales.
std::vector<std::string> design_names_in_order(bool default_suite = false);

// --zero-stage, --zero-variant and --mode agree (Note [ZeRO in DDP]): --mode ddp --zero-stage
// N [--zero-variant pytorch] becomes the row of that stage, --mode zeroN (zero1-pytorch) sets
// the flags; a usage error names the flags when they disagree or the design has no such stage.
void resolve_zero_stage(RunConfig& config);

// Adds a row (a test's toy design). A usage error if the name is taken.
void register_design(Design design);

}  // namespace ddpb::bench
