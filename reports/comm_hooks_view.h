// The comm hooks as a report section: per workload that ran them, each hook's bytes per step
// and step time against the fp32 AllReduce (the scaling-group DDP run at the same world
// size), its final loss, and the loss curves side by side, because a lossy hook (PowerSGD)
// changes what is learned. Reads the suite record (runs of group "comm_hook" and their fp32 runs:
// metrics.comm_bytes_per_step, step_time_ms, loss_per_step); never throws on its contents.
#pragma once

#include "reports/suite_record.h"
#include "reports/suite_view.h"

namespace ddpb::reports {

ReportSection build_comm_hooks_section(const SuiteRecord& suite);

}  // namespace ddpb::reports
