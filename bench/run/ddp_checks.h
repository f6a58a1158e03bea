#pragma once
// What a DDP rank checks as it runs, beside training: that the ranks run out of input together
// (docs/cli.md, "Uneven inputs"), and that a comm hook does not cost more than it saves.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/run/trainer.h"
#include "impl_ddp/comm_hooks.h"

namespace ddpb::bench {

// Given which ranks have input for step `step` (DistributedDataParallel::ranks_with_input):
// true when all have (run the step), false when none has (the run is over). Some with and
// some without throws Error naming both sets and the step, on every rank alike: PyTorch's DDP
// would hang there.
bool all_or_none_have_input(const std::vector<bool>& have, int64_t step);

// A comm hook whose own compute (PowerSGD's products and orthogonalisation) took more than half
// of the step: the warning to print (issue 25, P1), or nothing.
std::optional<std::string> hook_compute_warning(const StepOutcome& out, ddp::CommHook hook,
                                                int64_t step);

// Prints hook_compute_warning's warning on rank 0, once a run.
class HookComputeWarning {
 public:
  void after_step(const StepOutcome& out, ddp::CommHook hook, int64_t step, int rank);

 private:
  bool warned_ = false;
};

}  // namespace ddpb::bench
