// What the harness derives from any design's step, the same way for every design (Note [Step
// stats] in core/step_stats.h).
#pragma once

#include <vector>

#include "bench/run/trainer.h"
#include "comm/sync_batch_norm.h"
#include "core/step_stats.h"

namespace ddpb::bench {

// The step's loss, time and phases; a trace span per collective (its bytes, bus bandwidth and
// bucket); and, when the step synchronised gradients, steps[].mode's communication figures:
// comm_bytes, comm_ms (the union of the gradient collectives' busy intervals), comm_exposed_ms
// (the part after compute ended), overlap_ratio, and in extra backward_end_ms (compute_end_ms)
// and span_overlap_ratio (bench/measure/metrics.h); and every collective by op with its bytes
// on the wire (by_op, bus_bytes, gradient_bus_bytes).
StepOutcome step_outcome(const StepStats& stats, int world_size);

// SyncBatchNorm's collectives summed into steps[].mode.extra (sync_bn_ms, sync_bn_bytes), for
// a design that ran with --sync-bn; their spans are step_outcome's.
void add_sync_bn_totals(const std::vector<comm::SyncBnRecord>& records, StepOutcome& out);

}  // namespace ddpb::bench
