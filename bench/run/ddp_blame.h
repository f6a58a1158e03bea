// Bucket blame in a DDP run (Note [Bucket blame]): each rank logs when its buckets became ready
// in the measured steps, from the start of its own step; at the end rank 0 gathers the logs and
// names the rank that holds each bucket back. FSDP's units are logged the same way: a unit is
// ready when its gradients are and its reduce-scatter is issued.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "bench/run/rank_process.h"
#include "impl_ddp/distributed_data_parallel.h"
#include "reports/run_record.h"

namespace ddpb::bench {

class BucketReadyLog {
 public:
  // The latest steps kept: a long run's blame reads its steady state, and the log that crosses
  // the store stays small (1000 steps of 10 buckets: about 150 KB).
  static constexpr size_t kMaxSteps = 1000;

  // A measured step's buckets; the step started (asked for its first batch) at `step_start_ns`
  // on the steady clock.
  void add(const ddp::DdpStepStats& stats, int64_t step_start_ns);
  // A measured step's ready times, in ms from the step's start, in the order every rank
  // issues their collectives.
  void add(std::vector<double> ready_ms);

  // Collective over the store, after RankProcess::merge_records: every rank publishes its log;
  // rank 0, at world size > 1, sets record.summary.bucket_blame and the critical path from them
  // and record.ranks. `design` prefixes what it prints ("ddp"); `groups` names what was ready
  // ("buckets", "units"). `with_critical_path`: whether Note [Critical path]'s model (rank 0's
  // wait in comm_exposed, after its backward) holds for the design: not for FSDP, whose ranks
  // wait in the forward's first all-gather.
  void attach_blame(const RankProcess& process, reports::RunRecord& record,
                    const std::string& design = "ddp", const std::string& groups = "buckets",
                    bool with_critical_path = true) const;

 private:
  std::deque<std::vector<double>> steps_;  // per step, each bucket's ready time (ms from its start)
};

}  // namespace ddpb::bench
