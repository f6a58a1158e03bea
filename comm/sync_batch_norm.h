// SyncBatchNorm over a process group (PyTorch's torch.nn.SyncBatchNorm): each BatchNorm
// layer normalises with the statistics of every rank's batch. Forward all-gathers each rank's
// (mean, var, count), backward all-reduces the two gradient sums (core/ops.h has the
// decomposition, core/functional.h the BatchNormSync seam). Each crossing is one blocking
// collective on the group, timed here so that the harness can report and trace it. DDP and FSDP
// convert their modules with it over their world group (--sync-bn).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/process_group.h"
#include "core/functional.h"
#include "core/nn.h"
#include "core/step_stats.h"

namespace ddpb::comm {

// One SyncBatchNorm collective: what it was, its bytes and its host times. DDP records its
// buffer broadcasts and ZeRO's parameter gathers with it too.
struct SyncBnRecord {
  const char* op;  // "allgather" (forward statistics) or "allreduce" (backward sums)
  int64_t bytes = 0;
  int64_t start_ns = 0, end_ns = 0;  // steady clock: when the collective ran
};

class ProcessGroupBatchNormSync final : public fn::BatchNormSync {
 public:
  explicit ProcessGroupBatchNormSync(std::shared_ptr<ProcessGroup> pg) : pg_(std::move(pg)) {}
  Tensor all_gather(const Tensor& local) override;
  void all_reduce_sum(const Tensor& t) override;
  // The collectives since the last call, in issue order. Call after the step's work is
  // complete: the times are the collectives' own (Work::start_ns / end_ns).
  std::vector<SyncBnRecord> take_records();

 private:
  struct Issued {
    const char* op;
    WorkPtr work;
    int64_t issue_ns, return_ns;  // around the blocking call, where the Work has no times
  };
  std::shared_ptr<ProcessGroup> pg_;
  std::vector<Issued> issued_;
};

// Makes every BatchNorm2d of `module` a SyncBatchNorm over `sync` (PyTorch's
// convert_sync_batchnorm); returns how many layers it converted.
int convert_sync_batchnorm(nn::Module& module, fn::BatchNormSync* sync);

// How a design records SyncBatchNorm (Note [One phase vocabulary]): its collectives block
// inside forward (the all-gathers of the statistics) and backward (the all-reduces of the
// gradient sums), so their time is taken out of those phases into sync_bn, and the phases
// still add up to the step.
struct SyncBnTimes {
  double forward_ms = 0, backward_ms = 0;
  double total_ms() const { return forward_ms + backward_ms; }
};
SyncBnTimes sync_bn_times(const std::vector<SyncBnRecord>& records);
// One SyncBatchNorm collective as a step's stats carry it ("sync_bn allgather" on the lane
// "comm sync_bn"; not gradient synchronisation), on the clock that starts at clock_zero_ns.
// An allgather's bytes are what it gathers from `world` ranks (nccl-tests' size).
CollectiveTiming sync_bn_collective(const SyncBnRecord& record, int world, int64_t clock_zero_ns);

}  // namespace ddpb::comm
