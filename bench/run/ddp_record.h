// What a DDP run's record says that the other modes' do not: per step the buckets, their
// collectives and the communication figures (bench/measure/metrics.h), SyncBatchNorm's
// collectives and the buffer broadcast; per run every rank's summary, merged on rank 0 with
// the straggler figures; and --trace's events of every rank, on rank 0's clock.
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

// Collective over the store: every rank publishes its summary; rank 0 returns `record` with
// ranks[], summary.straggler_skew and summary.stragglers added (others: `record` as it is).
reports::RunRecord merge_rank_records(comm::Store& store, int rank, int world_size,
                                      const Device& device, reports::RunRecord record);

// Collective over the store: rank 0 gets every rank's trace events and clock offset.
std::pair<std::vector<nlohmann::json>, std::vector<int64_t>> gather_trace_through_store(
    comm::Store& store, int rank, int world_size, int64_t clock_offset_ns, nlohmann::json mine);

}  // namespace ddpb::bench
