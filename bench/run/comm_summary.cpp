#include "bench/run/comm_summary.h"

#include <cmath>
#include <vector>

#include "bench/run/metrics.h"
#include "bench/run/stats.h"

namespace ddpb::bench {
namespace {

std::vector<const nlohmann::json*> measured_steps(const nlohmann::json& steps) {
  std::vector<const nlohmann::json*> out;
  for (const auto& s : steps) {
    if (s.value("measured", false)) out.push_back(&s);
  }
  return out;
}

// The measured step whose time is nearest the median: its buckets stand for "one step".
const nlohmann::json* median_step(const std::vector<const nlohmann::json*>& steps) {
  std::vector<double> times;
  for (const auto* s : steps) times.push_back((*s)["time_ms"].get<double>());
  const double med = percentile(times, 50);
  const nlohmann::json* best = nullptr;
  for (const auto* s : steps) {
    if (!best || std::fabs((*s)["time_ms"].get<double>() - med) <
                     std::fabs((*best)["time_ms"].get<double>() - med)) {
      best = s;
    }
  }
  return best;
}

nlohmann::json ddp_summary(const std::vector<const nlohmann::json*>& steps, int world_size) {
  std::vector<double> comm, exposed, bytes;
  double comm_total = 0, exposed_total = 0;
  for (const auto* s : steps) {
    const auto& m = (*s)["mode"];
    bytes.push_back(m.value("comm_bytes", 0.0));
    comm.push_back(m["comm_ms"].get<double>());
    exposed.push_back(m["comm_exposed_ms"].get<double>());
    comm_total += comm.back();
    exposed_total += exposed.back();
  }
  nlohmann::json buckets = nlohmann::json::array();
  const nlohmann::json* one = median_step(steps);
  for (const auto& b : (*one)["mode"]["buckets"]) {
    nlohmann::json e = b;
    e["ready_to_launch_ms"] = b["launch_ms"].get<double>() - b["ready_ms"].get<double>();
    e["collective_ms"] = b["complete_ms"].get<double>() - b["start_ms"].get<double>();
    buckets.push_back(std::move(e));
  }
  return {{"op", "allreduce"},
          {"comm_ms", percentile(comm, 50)},
          {"comm_exposed_ms", percentile(exposed, 50)},
          // From totals over the measured steps, so one step without communication (or a
          // noisy one) does not dominate as it would in a median of ratios.
          {"overlap_ratio", overlap_ratio(comm_total, exposed_total)},
          {"buckets_step", (*one)["step"]},
          {"bytes_per_step", static_cast<int64_t>(std::llround(percentile(bytes, 50)))},
          {"buckets", buckets},
          {"busbw", busbw_record(Collective::AllReduce, world_size)}};
}

// DP's reduce runs after backward on device 0's stream: it is all exposed by design.
nlohmann::json dp_summary(const std::vector<const nlohmann::json*>& steps, int world_size) {
  std::vector<double> reduce;
  double bytes = 0;
  for (const auto* s : steps) {
    reduce.push_back((*s)["phases_ms"].value("reduce", 0.0));
    bytes = (*s)["mode"]["bytes"].value("reduce", 0.0);
  }
  const double med = percentile(reduce, 50);
  const double algbw = algbw_GBps(bytes, med);
  return {{"op", "reduce"},
          {"comm_ms", med},
          {"comm_exposed_ms", med},
          {"overlap_ratio", 0.0},
          {"bytes", bytes},
          {"algbw_GBps", algbw},
          {"busbw_GBps", algbw * busbw_factor(Collective::Reduce, world_size)},
          {"busbw", busbw_record(Collective::Reduce, world_size)}};
}

}  // namespace

nlohmann::json comm_summary(Mode mode, const nlohmann::json& steps, int world_size) {
  const auto measured = measured_steps(steps);
  if (measured.empty() || mode == Mode::Single) return nullptr;
  for (const auto* s : measured) {
    if (!s->contains("mode")) return nullptr;
  }
  if (mode == Mode::Ddp) return ddp_summary(measured, world_size);
  if (mode == Mode::Dp) return dp_summary(measured, world_size);
  return nullptr;
}

}  // namespace ddpb::bench
