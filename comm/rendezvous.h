// Joining a job's process group from the rank environment, in the spirit of torch's
// init_process_group: the store (init method "env://": the TCPStore at MASTER_ADDR:MASTER_PORT,
// served by rank 0, the job's identity as its handshake token; "file://PATH": a FileStore every
// rank opens), the process group on it, and this rank's clock offset onto rank 0's, measured
// through the store.
//
// Collective: every rank of the job calls it once, at the same point.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  // Where the ranks meet (torch's init_method): "env://" or "file://PATH" (Note [File
  // rendezvous]).
  std::string init_method = "env://";
  // What every rank must agree on (Note [Configuration fingerprint]): named values, in order.
  std::vector<std::pair<std::string, std::string>> fingerprint;
  bool verbose = false;  // say which address the process group binds to, and why
};

// Note [Rendezvous deadline]
// The whole rendezvous, from the store's first connection through the process group's pairs
// or communicator to the clock offset, runs under one deadline of options.timeout: a rank that
// never arrives costs the timeout once, not once per phase (issue 25, H5). The store keeps
// options.timeout for its later uses.
//
// Note [Configuration fingerprint]
// Ranks started by separate launchers (nodes, torchrun, mpirun) can disagree: another --lr,
// another world size, another build. Such a job used to train and fail much later ("replicas
// diverged"), or time out ("not every rank arrived"). At rendezvous every rank publishes its
// fingerprint (the training configuration, its world size, the binary's version and commit);
// rank 0 compares each rank's with its own as they arrive and publishes a verdict, and every
// rank fails at once on a mismatch with one line naming the field, both values and both ranks
// (a UsageError: the job was started wrong).

// Note [File rendezvous]
// file://PATH is a FileStore (comm/file_store.h) at PATH: the ranks of one node, or of nodes
// sharing a filesystem whose flock works, meet without a TCP port. As torch's file:// method,
// the last rank to close the store removes the file, and a file a crashed run left behind
// keeps its keys; this job's keys live under its job identity, so a file of another
// configuration or port cannot answer for this one, but a rerun of the same job needs a new
// path (or the old file removed).

// Checks an init method's form ("env://" or "file://PATH" with PATH's folder existing);
// throws UsageError naming the flag.
void check_init_method(const std::string& init_method);

struct Rendezvous {
  RankEnv env;
  std::shared_ptr<Store> store;
  std::shared_ptr<ProcessGroup> group;
  int64_t clock_offset_ns = 0;  // add to this rank's steady clock to read rank 0's
  // The true offset lies within clock_offset_ns ± this: half the exchange's round trip (Note
  // [Clock offset through the store]). Zero on rank 0.
  int64_t clock_uncertainty_ns = 0;
  std::string host;  // this host's name
  std::string
      bind_address;  // where the process group listens (Note [Choosing this host's address])
};

// Throws UsageError for a bad environment, Error when a peer does not arrive within the
// timeout.
Rendezvous init_process_group(const RankEnv& env, const RendezvousOptions& options);

// Note [Clock offset through the store]
// NTP-style: rank r sends its time, rank 0 answers with its own at once, and the answer is
// placed at the midpoint of the round trip. Rank 0 stamps its answer after the ping arrived
// and before the pong left, so the true offset lies within half the round trip of the
// estimate: that half is the offset's uncertainty. The round trip includes rank 0 serving the
// ranks before this one, through the store, so it is hundreds of microseconds on one node at
// best: a reader comparing ranks' timestamps to finer than that needs a better exchange
// (bench/collectives refines it, Note [Clock offset for arrivals]). Zero on rank 0 (and
// within its uncertainty of zero on one node). Collective over the store.
struct ClockOffset {
  int64_t offset_ns = 0;       // add to this rank's steady clock to read rank 0's
  int64_t uncertainty_ns = 0;  // the true offset lies within offset_ns ± this
};
ClockOffset measure_clock_offset(Store& store, int rank, int world_size);
// measure_clock_offset's offset alone.
int64_t sync_clock(Store& store, int rank, int world_size);

}  // namespace ddpb::comm
