// The training designs `ddpbench run --mode` offers, one row each (Note [The design table]).
#pragma once

#include <deque>
#include <memory>
#include <optional>
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
using MakeRunner = std::unique_ptr<ModeRunner> (*)(const RunConfig&, const WorkloadSpec&);

struct Design {
  reports::DesignInfo info;
  MakeRunner make_runner = nullptr;
  // Host memory one process needs besides the model's tensors (the CPU capacity check).
  int64_t process_overhead_bytes = int64_t{8} << 20;
  // What the suite's PyTorch side by side runs it as (scripts/peer/torch_reference.py), and
  // whether that needs CUDA devices.
  const char* pytorch_peer = "";
  bool pytorch_peer_needs_cuda = false;
  // The bytes its gradient collectives put on the wire a step (docs/metrics.md "Bytes on the
  // wire"), for `gradient_bytes` of gradients over `world` ranks or devices, sharded over
  // groups of `shard_ranks` (ModeRunner::shard_ranks; the world but for FSDP's hybrid_shard and
  // no_shard); null: none.
  double (*expected_gradient_bus_bytes)(double gradient_bytes, int world,
                                        int shard_ranks) = nullptr;
  // DDP's ZeRO stage (Note [ZeRO in DDP]): 0 for plain DDP and every other design.
  int zero_stage = 0;
  // --zero-variant pytorch: the stage's optimizer over DDP's AllReduce, its shards broadcast
  // (PyTorch's ZeroRedundancyOptimizer; Note [ZeRO in DDP]).
  bool zero_broadcast = false;
  // FSDP's sharding strategy (Note [FSDP's step] in impl_fsdp/fully_sharded_data_parallel.h):
  // set on the FSDP rows only, which share one runner and differ by it, as ZeRO's rows do by
  // their stage.
  std::optional<fsdp::ShardingStrategy> sharding_strategy;
  // Whether a suite without a "modes" key scales it; ZeRO's stages and FSDP run in their own
  // groups.
  bool in_default_suite = true;
  // Whether the suite's sharding group (Note [Sharding rounds]) measures it beside the
  // suite's DDP: ZeRO's stages and FSDP's strategies but hybrid_shard, which on one host
  // is full_shard with a replicate group of one rank.
  bool in_sharding_group = false;
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

// The names of the rows one runner runs (DDP's with ZeRO's stages; FSDP's strategies), as
// "fsdp, fsdp-grad-op or ...", for messages.
std::string design_names_of_runner(MakeRunner make_runner);

// Every row's name, in the table's order; `default_suite` only: the rows a suite without a
// "modes" key scales.
std::vector<std::string> design_names_in_order(bool default_suite = false);

// --zero-stage, --zero-variant and --mode agree (Note [ZeRO in DDP]): --mode ddp --zero-stage
// N [--zero-variant pytorch] becomes the row of that stage, --mode zeroN (zero1-pytorch) sets
// the flags; a usage error names the flags when they disagree or the design has no such stage.
void resolve_zero_stage(RunConfig& config);

// --sharding-strategy and --mode agree, as resolve_zero_stage does for --zero-stage: --mode fsdp
// --sharding-strategy X becomes X's row (fsdp-grad-op, ...), --mode fsdp-X sets the flag; a
// usage error in one line when the flag is given with a design that is not FSDP or names
// another strategy than the row.
void resolve_sharding_strategy(RunConfig& config);

// Adds a row (a test's toy design). A usage error if the name is taken.
void register_design(Design design);

}  // namespace ddpb::bench
