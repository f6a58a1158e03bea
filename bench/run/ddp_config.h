// What a DDP rank is made of, from its configuration and its rank environment: its device,
// its job's identity, where its flight recorder dumps, DistributedDataParallel's options,
// and the words the record uses for its buffer semantics.
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

// --devices' entry for this rank, or --device's type at the local rank's index.
Device ddp_rank_device(const RunConfig& config, const comm::RankEnv& env);

// What every rank of one job shares and another job on the same port most likely does not
// (Note [Store job identity]): a hash of the resolved configuration and the store's port.
std::string job_identity(const RunConfig& config, const comm::RankEnv& env);

// Where DDP ranks dump their flight recorders: --flight-dir, or else the launcher's choice, or
// ddpbench-flight-<port> under $XDG_RUNTIME_DIR, $TMPDIR or /tmp, or a private folder next to
// it when that one is another user's (comm::resolve_flight_dir; said on stderr).
std::string default_flight_dir(const RunConfig& config, const comm::RankEnv& env);
// The job the rank's dumps belong to (comm::flight_job_id of its store token).
std::string flight_job(const RunConfig& config, const comm::RankEnv& env);

// What every rank of the job must agree on (Note [Configuration fingerprint] in
// comm/rendezvous.h): WORLD_SIZE, the version and commit, and the configuration but for where
// each rank writes.
std::vector<std::pair<std::string, std::string>> training_fingerprint(const RunConfig& config,
                                                                      const comm::RankEnv& env);

// How the rank joins its job: backend, device, --timeout, the job's identity.
comm::RendezvousOptions rendezvous_options(const RunConfig& config, const comm::RankEnv& env,
                                           const Device& device);

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
