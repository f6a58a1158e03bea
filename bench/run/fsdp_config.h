// What an FSDP rank adds to any rank process (bench/run/rank_process.h): FullyShardedDataParallel's
// options, its process groups, its units (the wrapping policy over the workload's blocks), and
// what the record says of them (Note [FSDP's step] in impl_fsdp/fully_sharded_data_parallel.h).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "bench/run/rank_process.h"
#include "bench/run/run_config.h"
#include "bench/run/trainer.h"
#include "impl_fsdp/fully_sharded_data_parallel.h"
#include "workloads/model.h"

namespace ddpb::bench {

fsdp::FsdpOptions fsdp_options(const RunConfig& config);

// The ranks one shard group holds: hybrid_shard's --shard-group-size, or the ranks of one node
// (the launcher's LOCAL_WORLD_SIZE; the world when unknown); the world for full_shard and
// shard_grad_op, 1 for no_shard. A usage error when it does not divide the world.
int shard_group_size(const RunConfig& config, const comm::RankEnv& env);

// The groups the strategy runs over (FsdpGroups): shard groups of shard_group_size()
// consecutive ranks, and, when there is more than one, the replicate groups of the ranks with
// the same index in each. Collective over the world (Note [Sub-groups]): every rank makes
// every group, in the same order, and keeps those it is in.
fsdp::FsdpGroups fsdp_groups(const RunConfig& config, const RankProcess& process,
                             std::shared_ptr<comm::ProcessGroup> world);

// --fsdp-wrap block: the family's blocks (WorkloadFamily::blocks) as units, each named for its
// module, or for the stage its modules share ("layer2"); model: none (everything in the root).
std::vector<fsdp::FsdpUnitSpec> fsdp_units(const RunConfig& config, const WorkloadSpec& spec,
                                           Model& model);

// A step's outcome (step_outcome), with the rank, the buffer broadcast's bytes, the rate
// limiter's waits, the host's exposed waits for gathers and reduce-scatters and, with
// --sync-bn, SyncBatchNorm's totals in extra.
StepOutcome fsdp_step_outcome(const fsdp::FsdpStepStats& stats, int world_size, int rank);

// The record's mode.details of an FSDP rank: strategy, wrapping, units with their sizes (root
// last), groups, the rate limit and prefetch, backend, buffers, launcher.
nlohmann::json fsdp_mode_details(const RunConfig& config, const comm::RankEnv& env,
                                 const fsdp::FullyShardedDataParallel& fsdp, bool has_buffers);

}  // namespace ddpb::bench
