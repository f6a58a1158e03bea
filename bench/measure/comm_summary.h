// The communication summary of a run record (summary.comm): the per-step communication
// numbers of DP and DDP reduced to one set of medians in the terms of docs/metrics.md.
#pragma once

#include <optional>
#include <vector>

#include "reports/run_record.h"

namespace ddpb::bench {

// Only measured steps count. Returns nullopt for single mode (no communication) and when a
// measured step carries no communication data.
std::optional<reports::CommRecord> comm_summary(reports::ModeName mode,
                                                const std::vector<reports::StepRecord>& steps,
                                                int world_size);

}  // namespace ddpb::bench
