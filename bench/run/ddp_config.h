// What a DDP rank adds to any rank process (bench/run/rank_process.h): DistributedDataParallel's
// options, its bucket-cap search, and the words the record uses for its buffer semantics and
// mode details.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/run/bucket_tuner.h"
#include "bench/run/run_config.h"
#include "comm/rank_env.h"
#include "comm/rendezvous.h"
#include "core/device.h"
#include "impl_ddp/distributed_data_parallel.h"

namespace ddpb::bench {

ddp::DdpOptions ddp_options(const RunConfig& config);

// --bucket-cap-mb auto on a DDP rank: the search sets each candidate cap on `ddp`'s Reducer,
// and every rank takes rank 0's measurement (Note [Bucket autotune agreement]).
std::unique_ptr<WarmupBucketSearch> make_ddp_bucket_search(ddp::DistributedDataParallel& ddp,
                                                           const nn::Module& model);

// The record's mode.details.buffers: what happens to a model's buffers (Note [DDP buffers]).
std::string buffer_semantics(const RunConfig& config, bool has_buffers);

// The record's mode.details of a DDP rank: backend, buffers, world size, launcher, the bucket
// layouts before and after the rebuild, and the autotune's candidates (when `search`).
nlohmann::json ddp_mode_details(const RunConfig& config, const comm::RankEnv& env,
                                const ddp::DistributedDataParallel& ddp, bool has_buffers,
                                const WarmupBucketSearch* search);

}  // namespace ddpb::bench
