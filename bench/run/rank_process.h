// What any design whose ranks are processes has, once (Note [Rank processes]): the rank's
// environment and device, its flight recorder, the rendezvous that joins its job (process
// group, store, clock offset), and the collectives over the store that end a run: rank 0
// gathers every rank's record, trace and logs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/run/run_config.h"
#include "bench/run/trainer.h"
#include "comm/process_group.h"
#include "comm/rank_env.h"
#include "comm/rendezvous.h"
#include "comm/store.h"
#include "core/device.h"
#include "reports/run_record.h"

namespace ddpb::bench {

// Note [Rank processes]
// ~~~~~~~~~~~~~~~~~~~~~
// DDP's ranks are processes, and so will the sharded designs' be. Everything a rank needs
// that is not its design's own lives here, named for a rank rather than for DDP: which rank
// it is (the launcher's environment, checked against --world-size), its device, the flight
// recorder's identity and folder, the rendezvous (the configuration fingerprint every rank
// must share, the job identity, the store and the process group), and the ends of a run,
// each a gather to rank 0 through the store under a key of its own: the ranks' records
// (ranks[] and the stragglers), their trace events with their clock offsets, and any log a
// design keeps (DDP's bucket ready times). A design takes the process group once and wraps
// it in its own machinery.
class RankProcess {
 public:
  // Joins the job: reads the rank environment (a usage error when it disagrees with
  // --world-size), sets the flight recorder's identity, picks the device, and meets the
  // other ranks.
  explicit RankProcess(const RunConfig& config);

  const comm::RankEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  const Device& device() const { return device_; }
  comm::Store& store() const { return *store_; }
  int64_t clock_offset_ns() const { return clock_offset_ns_; }
  const std::string& host() const { return host_; }
  // The process group of the job; once.
  std::shared_ptr<comm::ProcessGroup> take_group();
  // A group of some of the world's ranks (comm/process_group.h Note [Sub-groups]) on the
  // world group's backend, device, timeout and address: nullptr on a rank not in `ranks`.
  // Collective over the world: every rank calls it with the same `ranks`, in the same order
  // as its other groups.
  std::shared_ptr<comm::ProcessGroup> new_group(const std::vector<int>& ranks) const;
  // Where the rank stands: its share of every global batch, its device, its dump file.
  RunnerPlace place(int64_t global_batch) const;

  // Collective over the store: every rank publishes `mine` under `what`; rank 0 gets every
  // rank's, in rank order, and the others an empty list.
  std::vector<nlohmann::json> gather(std::string_view what, const nlohmann::json& mine) const;
  // Rank 0 returns `record` with ranks[], summary.straggler_skew and summary.stragglers
  // added; the others return it as it is. Collective.
  reports::RunRecord merge_records(reports::RunRecord record) const;
  // --trace: rank 0 gets every rank's events and each rank's clock offset onto rank 0's.
  // Collective.
  std::pair<std::vector<nlohmann::json>, std::vector<int64_t>> gather_trace(
      nlohmann::json mine) const;

 private:
  comm::RankEnv env_;
  Device device_;
  std::shared_ptr<comm::Store> store_;
  std::shared_ptr<comm::ProcessGroup> group_;
  comm::ProcessGroupOptions group_options_;  // what new_group() gives its sub-groups
  int64_t clock_offset_ns_ = 0;
  std::string host_;  // this host's name (records name hosts, issue 45)
};

// --devices' entry for this rank, or --device's type at the local rank's index.
Device rank_device(const RunConfig& config, const comm::RankEnv& env);

// What every rank of one job shares and another job on the same port most likely does not
// (Note [Store job identity]): a hash of the resolved configuration and the store's port.
std::string job_identity(const RunConfig& config, const comm::RankEnv& env);

// Where ranks dump their flight recorders: --flight-dir, or else the launcher's choice, or
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

}  // namespace ddpb::bench
