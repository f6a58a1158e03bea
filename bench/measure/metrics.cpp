#include "bench/measure/metrics.h"

#include "core/step_phase.h"

#include <algorithm>

namespace ddpb::bench {

CommTime comm_time(std::vector<Interval> busy, double compute_end_ms, double compute_wait_ms) {
  std::sort(busy.begin(), busy.end());
  CommTime t;
  bool open = false;
  double cur_s = 0, cur_e = 0;
  auto close = [&] {
    if (!open || cur_e <= cur_s) return;
    t.comm_ms += cur_e - cur_s;
    t.exposed_ms += std::max(0.0, cur_e - std::max(cur_s, compute_end_ms));
  };
  for (auto [s, e] : busy) {
    if (e < s) continue;  // a malformed interval carries no time
    if (!open || s > cur_e) {
      close();
      cur_s = s;
      cur_e = e;
      open = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  close();
  t.exposed_ms = std::min(t.comm_ms, t.exposed_ms + std::max(0.0, compute_wait_ms));
  return t;
}

double overlap_ratio(double comm_ms, double exposed_ms) {
  if (comm_ms <= 0) return 0.0;
  return std::clamp(1.0 - exposed_ms / comm_ms, 0.0, 1.0);
}

double span_overlap_ratio(double first_launch_ms, double last_complete_ms, double compute_end_ms) {
  const double span = last_complete_ms - first_launch_ms;
  if (span <= 0) return 0.0;
  return std::clamp((std::min(compute_end_ms, last_complete_ms) - first_launch_ms) / span, 0.0,
                    1.0);
}

double busbw_factor(Collective op, int n) {
  const bool one =
      op == Collective::Broadcast || op == Collective::Reduce || op == Collective::SendRecv;
  if (n <= 1) return one ? 1.0 : 0.0;
  switch (op) {
    case Collective::AllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::AllGatherCoalesced:
    case Collective::ReduceScatterCoalesced:
      return static_cast<double>(n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv:
      return 1.0;
  }
  return 1.0;
}

const char* busbw_formula(Collective op) {
  switch (op) {
    case Collective::AllReduce:
      return "busbw = algbw * 2(n-1)/n";
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::AllGatherCoalesced:
    case Collective::ReduceScatterCoalesced:
      return "busbw = algbw * (n-1)/n";
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv:
      return "busbw = algbw";
  }
  return "busbw = algbw";
}

const char* collective_name(Collective op) {
  switch (op) {
    case Collective::AllReduce:
      return "allreduce";
    case Collective::AllGather:
      return "allgather";
    case Collective::ReduceScatter:
      return "reducescatter";
    case Collective::Broadcast:
      return "broadcast";
    case Collective::Reduce:
      return "reduce";
    case Collective::AllToAll:
      return "alltoall";
    case Collective::SendRecv:
      return "sendrecv";
    case Collective::AllGatherCoalesced:
      return "allgather_coalesced";
    case Collective::ReduceScatterCoalesced:
      return "reducescatter_coalesced";
  }
  return "unknown";
}

reports::BusBw busbw_record(Collective op, int world_size) {
  reports::BusBw b;
  b.op = collective_name(op);
  b.factor = busbw_factor(op, world_size);
  b.formula = busbw_formula(op);
  return b;
}

double algbw_GBps(double bytes, double ms) {
  return ms > 0 ? bytes / (ms / 1000.0) / 1e9 : 0.0;
}

double weak_scaling_efficiency(double throughput_n, int n, double throughput_1) {
  if (n <= 0 || throughput_1 <= 0) return 0.0;
  return throughput_n / (n * throughput_1);
}

double strong_speedup(double step_ms_1, double step_ms_n) {
  return step_ms_n > 0 ? step_ms_1 / step_ms_n : 0.0;
}

double strong_efficiency(double step_ms_1, double step_ms_n, int n) {
  return n > 0 ? strong_speedup(step_ms_1, step_ms_n) / n : 0.0;
}

double flop_fraction(double achieved, double peak_per_device, int devices) {
  if (peak_per_device <= 0 || devices <= 0) return 0.0;
  return achieved / (peak_per_device * devices);
}

double compute_time_ms(const std::vector<reports::PhaseMedian>& phase_medians) {
  double compute = 0;
  for (const reports::PhaseMedian& p : phase_medians) {
    if (p.kind == phase_kind_name(PhaseKind::Compute)) compute += p.median_ms;
  }
  return compute;
}

StragglerSummary straggler_summary(const std::vector<double>& compute_ms_by_rank) {
  StragglerSummary s;
  if (compute_ms_by_rank.empty()) return s;
  const auto [lo, hi] = std::minmax_element(compute_ms_by_rank.begin(), compute_ms_by_rank.end());
  if (*lo <= 0) return s;
  s.skew = *hi / *lo;
  for (size_t r = 0; r < compute_ms_by_rank.size(); ++r) {
    const double ms = compute_ms_by_rank[r];
    if (ms > kStragglerFactor * *lo) s.stragglers.push_back({static_cast<int>(r), ms, ms / *lo});
  }
  return s;
}

}  // namespace ddpb::bench
