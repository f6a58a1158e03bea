#include "bench/run/ddp_blame.h"

#include <fmt/core.h>

#include "bench/measure/bucket_blame.h"
#include "bench/measure/critical_path.h"
#include "core/check.h"
#include "reports/json_io.h"
#include "reports/report_util.h"

namespace ddpb::bench {

void BucketReadyLog::add(const ddp::DdpStepStats& stats, int64_t step_start_ns) {
  const double zero_ms = static_cast<double>(stats.clock_zero_ns - step_start_ns) / 1e6;
  std::vector<double> ready;
  ready.reserve(stats.buckets.size());
  for (const auto& b : stats.buckets) ready.push_back(zero_ms + b.ready_ms);
  add(std::move(ready));
}

void BucketReadyLog::add(std::vector<double> ready_ms) {
  steps_.push_back(std::move(ready_ms));
  if (steps_.size() > kMaxSteps) steps_.pop_front();
}

void BucketReadyLog::attach_blame(const RankProcess& process, reports::RunRecord& record,
                                  const std::string& design, const std::string& groups,
                                  bool with_critical_path) const {
  if (process.world_size() < 2) return;
  const nlohmann::json mine(std::vector<std::vector<double>>(steps_.begin(), steps_.end()));
  const std::vector<nlohmann::json> logs = process.gather("bucket_ready", mine);
  if (process.rank() != 0) return;
  DDPB_CHECK(record.ranks.has_value()) << "bucket blame needs the merged rank records";
  std::vector<std::vector<std::vector<double>>> ready;
  for (const nlohmann::json& log : logs)
    ready.push_back(log.get<std::vector<std::vector<double>>>());
  // With --uneven-inputs join the ranks take different steps: no step lines up across them.
  for (const auto& r : ready) {
    if (r.size() != ready[0].size()) {
      fmt::print("{}: bucket blame: none, the ranks measured different steps (uneven inputs)\n",
                 design);
      return;
    }
  }
  if (ready[0].empty()) return;
  record.summary.bucket_blame =
      bucket_blame(ready, *record.ranks, record.summary.step_time_ms, groups);
  if (with_critical_path) record.summary.critical_path = critical_path(record, ready);
  fmt::print("{}: bucket blame: {}\n", design, record.summary.bucket_blame->finding);
  if (const auto& c = record.summary.critical_path; c && c->waited_for) {
    fmt::print("{}: critical path: rank 0 waits {:.1f} of the median step's {:.1f} ms for {}\n",
               design, c->wait_ms, c->step_ms, reports::rank_name(record.hosts, *c->waited_for));
  }
}

}  // namespace ddpb::bench
