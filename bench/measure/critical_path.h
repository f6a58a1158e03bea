// The critical path of a step (docs/metrics.md, "Critical path"): what the step's time went to
// along the chain of dependent intervals that ends at its end, and the Gantt chart's lanes.
//
// Note [Critical path]
// ~~~~~~~~~~~~~~~~~~~~
// Taken from the measured step nearest the median (rank 0's, for DDP). A step's phases run one
// after the other on its timing thread (Note [One phase vocabulary]), so the chain is its
// phases in order, each of one kind: data (data); forward, loss, backward, backward_compute,
// optimizer (compute); scatter, replicate, gather, reduce, buffer_broadcast, sync_bn,
// comm_exposed (communication). Two intervals wait on another lane, and their waits are split
// out as "wait", naming the rank or device waited for:
//   DDP  comm_exposed cannot end before the slowest rank has its last bucket ready. The slowest
//        rank's last ready time beyond rank 0's, each from its own step's start (the clocks of
//        Note [Bucket blame]), is rank 0 waiting for that rank; the rest is communication.
//   DP   forward and backward last, on device 0's thread, as long as the slowest replica's work
//        (parallel_apply joins the workers). Their time beyond device 0's own replica's work
//        is waiting for the slowest device, taken from the end of backward.
// "host" is the step's time outside every phase: the loop's own work between them. So
//   compute + communication + data + wait + host = the step's time.
// The lanes are the Gantt chart: rank 0's (device 0's) intervals of that step and its bucket
// collectives ("bucket b"); every other DDP rank's phase medians laid end to end (the ranks'
// records keep medians, not steps); each DP replica's work, split between forward and backward
// in device 0's proportion and placed at their starts.
#pragma once

#include <optional>
#include <vector>

#include "reports/run_record.h"

namespace ddpb::bench {

// `ready_ms[rank][step][bucket]`: DDP's bucket ready times of the last measured steps (Note
// [Bucket blame]); empty for DP, single, or when the ranks' steps do not line up. nullopt when
// the record has no measured step.
std::optional<reports::CriticalPath> critical_path(
    const reports::RunRecord& record,
    const std::vector<std::vector<std::vector<double>>>& ready_ms = {});

}  // namespace ddpb::bench
