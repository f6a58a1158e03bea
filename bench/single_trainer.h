// `ddpbench run --mode single`: training on one device, the baseline that DP and DDP are
// compared against.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/run_config.h"

namespace ddpb::bench {

// Runs the training described by `config` (already validated) and returns its record. Prints
// per-step losses (unless quiet) and a summary to stdout.
nlohmann::json run_single(const RunConfig& config);

}  // namespace ddpb::bench
