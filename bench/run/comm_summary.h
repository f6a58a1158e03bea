// The communication summary of a run record (summary.comm): the per-step communication
// numbers of DP and DDP reduced to one set of medians in the terms of docs/metrics.md.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/run/run_config.h"

namespace ddpb::bench {

// `steps` is the record's steps[] array; only measured steps count. Returns null for single
// mode (no communication) and when no measured step carries communication data.
nlohmann::json comm_summary(Mode mode, const nlohmann::json& steps, int world_size);

}  // namespace ddpb::bench
