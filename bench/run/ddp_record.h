// What a DDP run's record says that the other modes' do not: per step the buckets, their
// collectives and the communication figures (bench/measure/metrics.h), SyncBatchNorm's
// collectives and the buffer broadcast. Merging the ranks' records and traces is any rank
// process's (bench/run/rank_process.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/run/trainer.h"
#include "comm/store.h"
#include "core/device.h"
#include "impl_ddp/distributed_data_parallel.h"

namespace ddpb::bench {

// --dump's files beyond the batches: PowerSGD's random Q (powersgd_q.safetensors), if any.
std::vector<std::pair<std::string, std::vector<NamedTensor>>> ddp_dump_extras(
    const ddp::DistributedDataParallel& ddp);

// The step's phases, per-step record (steps[].mode) and trace spans.
StepOutcome ddp_step_outcome(const ddp::DdpStepStats& stats, int world_size, int rank);

}  // namespace ddpb::bench
