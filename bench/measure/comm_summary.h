// The communication summary of a run record (summary.comm): the per-step communication
// numbers of DP and DDP reduced to one set of medians in the terms of docs/metrics.md.
#pragma once

#include <optional>
#include <vector>

#include "reports/run_record.h"

namespace ddpb::bench {

// Only measured steps count. The design's gradient collective says which numbers its steps
// carry: an AllReduce's buckets, or a reduce's bytes. Returns nullopt for a design without one
// (single) and when a measured step carries no communication data.
// `expected_gradient_bus_bytes`: what the design promises its gradient collectives put on
// the wire a step (its row, bench/run/designs.h), recorded beside the measured value.
std::optional<reports::CommRecord> comm_summary(
    const reports::DesignInfo& design, const std::vector<reports::StepRecord>& steps,
    int world_size, std::optional<double> expected_gradient_bus_bytes = std::nullopt);

}  // namespace ddpb::bench
