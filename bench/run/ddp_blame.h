// Bucket blame in a DDP run (Note [Bucket blame]): each rank logs when its buckets became ready
// in the measured steps, from the start of its own step; at the end rank 0 gathers the logs and
// names the rank that holds each bucket back.
#pragma once

#include <cstdint>
#include <deque>
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

  // Collective over the store, after RankProcess::merge_records: every rank publishes its log;
  // rank 0, at world size > 1, sets record.summary.bucket_blame and the critical path from them
  // and record.ranks.
  void attach_blame(const RankProcess& process, reports::RunRecord& record) const;

 private:
  std::deque<std::vector<double>> steps_;  // per step, each bucket's ready time (ms from its start)
};

}  // namespace ddpb::bench
