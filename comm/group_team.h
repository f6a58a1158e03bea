// GroupTeam: a RankTeam (base/rank_team.h) whose ranks each hold a ProcessGroup, all met
// through one in-process HashStore: the threads-as-ranks of the collective benchmarks, the
// communication fit and the process-group tests (tests/comm/pg_test_util.h). Each rank's
// options say its backend and device; by a backend's name alone, rank r works on
// rank_device(backend, r): cpu:r for gloo (one logical CPU device per rank, as DDP on CPU),
// cuda:r for nccl.
//
// Groups are created and destroyed on their rank's own thread, every rank at once
// (rendezvous and NCCL's communicator teardown need all ranks to take part).
//
// Thread-safety: as RankTeam (drive it from rank 0's thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/rank_team.h"
#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "core/check.h"
#include "core/device.h"

namespace ddpb::comm {

inline Device rank_device(const std::string& backend, int rank) {
  return backend == "nccl" ? Device::cuda(rank) : Device::cpu(rank);
}

class GroupTeam {
 public:
  using OptionsOf = std::function<ProcessGroupOptions(int rank)>;

  // Blocks until every rank's group is up; throws the first rank's failure (a rank whose
  // peer failed gives up after `timeout`, the store's; each group's own is in its options).
  GroupTeam(int size, const OptionsOf& options_of, std::chrono::milliseconds timeout)
      : ranks_(size), groups_(static_cast<size_t>(size)), devices_(static_cast<size_t>(size)) {
    auto store = std::make_shared<HashStore>();
    store->set_timeout(timeout);
    ranks_.run_void([&](int r) {
      const ProcessGroupOptions options = options_of(r);
      devices_[static_cast<size_t>(r)] = options.device;
      DeviceGuard guard(options.device);
      groups_[static_cast<size_t>(r)] = make_process_group(store, r, ranks_.size(), options);
    });
  }

  // Every rank on `backend` ("gloo", "nccl"), on rank_device(backend, r), with `timeout` for
  // the store and the groups alike.
  GroupTeam(const std::string& backend, int size, std::chrono::milliseconds timeout)
      : GroupTeam(size, options_by_name(backend, timeout), timeout) {}

  ~GroupTeam() {
    try {
      ranks_.run_void([&](int r) {
        DeviceGuard guard(device(r));
        groups_[static_cast<size_t>(r)].reset();
      });
    } catch (...) {
      // A group that fails to shut down is dropped with the team; nothing to report here.
    }
  }

  GroupTeam(const GroupTeam&) = delete;
  GroupTeam& operator=(const GroupTeam&) = delete;

  int size() const { return ranks_.size(); }
  Device device(int rank) const { return devices_[static_cast<size_t>(rank)]; }
  RankTeam& ranks() { return ranks_; }
  ProcessGroup& group(int rank) { return *groups_[static_cast<size_t>(rank)]; }

  // Runs fn(rank, its group) on every rank at once, each under a DeviceGuard of its device;
  // throws as RankTeam::run_void.
  void run(const std::function<void(int, ProcessGroup&)>& fn) {
    ranks_.run_void([&](int r) {
      DeviceGuard guard(device(r));
      fn(r, group(r));
    });
  }

 private:
  static OptionsOf options_by_name(const std::string& backend, std::chrono::milliseconds timeout) {
    const auto parsed = enum_from_name<CommBackend>(backend);
    DDPB_CHECK(parsed.has_value()) << "no process group backend is named " << backend;
    return [parsed, backend, timeout](int r) {
      ProcessGroupOptions options;
      options.backend = *parsed;
      options.timeout = timeout;
      options.device = rank_device(backend, r);
      return options;
    };
  }

  RankTeam ranks_;
  std::vector<std::shared_ptr<ProcessGroup>> groups_;  // [rank]
  std::vector<Device> devices_;                        // [rank]
};

}  // namespace ddpb::comm
