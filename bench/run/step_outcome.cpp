#include "bench/run/step_outcome.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "bench/measure/metrics.h"

namespace ddpb::bench {
namespace {

// nccl-tests' bus factor of a collective; one it defines none for (DP's scatter and gather)
// counts its bytes as they are: DP's transfers count what device 0's link moves.
double bus_factor(const std::string& op, int world_size) {
  const auto known = enum_from_name<Collective>(op);
  return known ? busbw_factor(*known, world_size) : 1.0;
}

TraceSpan collective_span(const CollectiveTiming& c, int64_t zero_ns, int world_size) {
  const double ms = c.complete_ms - c.start_ms;
  nlohmann::json args = {{"bytes", c.bytes}, {"launch_ms", c.launch_ms}};
  args["busbw_GBps"] = algbw_GBps(static_cast<double>(c.bytes), ms) *
                       bus_factor(c.op, c.group_size > 0 ? c.group_size : world_size);
  if (c.group >= 0) args["bucket"] = c.group;
  return {c.name, c.lane, zero_ns + std::llround(c.start_ms * 1e6), ms, std::move(args)};
}

// Every collective by op, in the order each op first ran, and the bytes on the wire.
void add_traffic(const StepStats& s, int world_size, reports::StepModeData& m) {
  if (s.collectives.empty()) return;
  std::vector<reports::OpTraffic> by_op;
  double bus = 0, gradient_bus = 0;
  for (const CollectiveTiming& c : s.collectives) {
    auto it = std::find_if(by_op.begin(), by_op.end(),
                           [&](const reports::OpTraffic& t) { return t.op == c.op; });
    if (it == by_op.end()) it = by_op.insert(by_op.end(), reports::OpTraffic{c.op, 0, 0, 0});
    // A collective over a sub-group (FSDP's shard groups) puts its own group's share out.
    const int ranks = c.group_size > 0 ? c.group_size : world_size;
    const double on_wire = static_cast<double>(c.bytes) * bus_factor(c.op, ranks);
    ++it->calls;
    it->bytes += c.bytes;
    it->bus_bytes += on_wire;
    bus += on_wire;
    if (c.gradient) gradient_bus += on_wire;
  }
  m.by_op = std::move(by_op);
  m.bus_bytes = bus;
  m.gradient_bus_bytes = gradient_bus;
}

// The gradient collectives' communication figures.
void add_comm_figures(const StepStats& s, reports::StepModeData& m) {
  std::vector<Interval> busy;
  int64_t bytes = 0;
  double first_launch = std::numeric_limits<double>::infinity(), last_complete = 0;
  for (const CollectiveTiming& c : s.collectives) {
    if (!c.gradient) continue;
    busy.emplace_back(c.start_ms, c.complete_ms);
    bytes += c.bytes;
    first_launch = std::min(first_launch, c.launch_ms);
    last_complete = std::max(last_complete, c.complete_ms);
  }
  if (busy.empty()) return;
  const CommTime ct = comm_time(std::move(busy), s.compute_end_ms);
  m.comm_bytes = bytes;
  m.comm_ms = ct.comm_ms;
  m.comm_exposed_ms = ct.exposed_ms;
  m.overlap_ratio = overlap_ratio(ct.comm_ms, ct.exposed_ms);
  m.extra.value["backward_end_ms"] = s.compute_end_ms;
  m.extra.value["span_overlap_ratio"] =
      span_overlap_ratio(first_launch, last_complete, s.compute_end_ms);
}

}  // namespace

StepOutcome step_outcome(const StepStats& s, int world_size) {
  StepOutcome out;
  out.loss = s.loss;
  out.step_ms = s.step_ms;
  for (const PhaseTime& p : s.phases) out.phases_ms.emplace_back(step_phase_name(p.phase), p.ms);
  for (const CollectiveTiming& c : s.collectives)
    out.spans.push_back(collective_span(c, s.clock_zero_ns, world_size));
  out.mode.emplace();
  add_comm_figures(s, *out.mode);
  add_traffic(s, world_size, *out.mode);
  return out;
}

void add_sync_bn_totals(const std::vector<comm::SyncBnRecord>& records, StepOutcome& out) {
  double ms_total = 0;
  int64_t bytes = 0;
  for (const comm::SyncBnRecord& r : records) {
    ms_total += static_cast<double>(r.end_ns - r.start_ns) / 1e6;
    bytes += r.bytes;
  }
  out.mode->extra.value["sync_bn_ms"] = ms_total;
  out.mode->extra.value["sync_bn_bytes"] = bytes;
}

}  // namespace ddpb::bench
