// GroupTeam: a RankTeam (bench/run/rank_team.h) whose ranks each hold a ProcessGroup of one
// backend, all met through one in-process HashStore, as the process-group tests do
// (tests/comm/pg_test_util.h). Rank r works on rank_device(backend, r): cpu:r for gloo (one
// logical CPU device per rank, as DDP on CPU), cuda:r for nccl.
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

#include "bench/run/rank_team.h"
#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "core/check.h"
#include "core/device.h"
#include "core/stream.h"

namespace ddpb::bench {

inline Device rank_device(const std::string& backend, int rank) {
  return backend == "nccl" ? Device::cuda(rank) : Device::cpu(rank);
}

class GroupTeam {
 public:
  // Blocks until every rank's group is up; throws the first rank's failure (a rank whose
  // peer failed gives up after `timeout`).
  GroupTeam(std::string backend, int size, std::chrono::milliseconds timeout)
      : backend_(std::move(backend)), ranks_(size), groups_(static_cast<size_t>(size)) {
    auto store = std::make_shared<comm::HashStore>();
    store->set_timeout(timeout);
    ranks_.run_void([&](int r) {
      comm::ProcessGroupOptions options;
      const auto backend = enum_from_name<comm::CommBackend>(backend_);
      DDPB_CHECK(backend.has_value()) << "no process group backend is named " << backend_;
      options.backend = *backend;
      options.device = device(r);
      options.timeout = timeout;
      DeviceGuard guard(options.device);
      groups_[static_cast<size_t>(r)] = comm::make_process_group(store, r, ranks_.size(), options);
    });
  }

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

  const std::string& backend() const { return backend_; }
  int size() const { return ranks_.size(); }
  Device device(int rank) const { return rank_device(backend_, rank); }
  RankTeam& ranks() { return ranks_; }
  comm::ProcessGroup& group(int rank) { return *groups_[static_cast<size_t>(rank)]; }

 private:
  std::string backend_;
  RankTeam ranks_;
  std::vector<std::shared_ptr<comm::ProcessGroup>> groups_;  // [rank]
};

// Seconds that fn takes on `device`, measured from the calling thread:
//  - CUDA: between two events recorded on the device's current stream before and after fn,
//    then synchronised, so fn must leave its work ordered on that stream (Work::wait() of
//    the NCCL group does exactly that). This is GPU time, free of host launch jitter.
//  - CPU: the host's steady clock around fn, which must have finished its work on return
//    (Work::wait() of the Gloo group blocks until the collective is done).
inline double timed_seconds(const Device& device, const std::function<void()>& fn) {
  if (device.is_cuda()) {
    Stream& stream = current_stream(device);
    Event start = Event::create(device), end = Event::create(device);
    start.record(stream);
    fn();
    end.record(stream);
    end.synchronize();
    return start.elapsed_ms(end) / 1e3;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ddpb::bench
