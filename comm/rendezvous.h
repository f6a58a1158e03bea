// Joining a job's process group from the rank environment, in the spirit of torch's
// init_process_group(init_method="env://"): the store at MASTER_ADDR:MASTER_PORT (served by
// rank 0, the job's identity as its handshake token), the process group on it, and this
// rank's clock offset onto rank 0's, measured through the store.
//
// Collective: every rank of the job calls it once, at the same point.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "comm/process_group.h"
#include "comm/rank_env.h"
#include "comm/store.h"
#include "core/device.h"

namespace ddpb::comm {

struct RendezvousOptions {
  std::optional<CommBackend> backend;  // default: nccl on a CUDA device, gloo otherwise
  Device device;
  std::chrono::milliseconds timeout{300'000};
  // What every rank of one job shares and another job on the same port does not (Note
  // [Store job identity]): the store's handshake token where the launcher set none.
  std::string job_identity;
};

struct Rendezvous {
  RankEnv env;
  std::shared_ptr<Store> store;
  std::shared_ptr<ProcessGroup> group;
  int64_t clock_offset_ns = 0;  // add to this rank's steady clock to read rank 0's
};

// Throws UsageError for a bad environment, Error when a peer does not arrive within the
// timeout.
Rendezvous init_process_group(const RankEnv& env, const RendezvousOptions& options);

// Note [Clock offset through the store]
// NTP-style: rank r sends its time, rank 0 answers with its own at once, and the answer is
// placed at the midpoint of the round trip. Zero on rank 0 (and within a round trip of zero
// on one node). Collective over the store.
int64_t sync_clock(Store& store, int rank, int world_size);

}  // namespace ddpb::comm
