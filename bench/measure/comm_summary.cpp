#include "bench/measure/comm_summary.h"

#include <cmath>
#include <vector>

#include "bench/measure/metrics.h"
#include "bench/measure/stats.h"

namespace ddpb::bench {
namespace {

using reports::StepRecord;

std::vector<const StepRecord*> measured_steps(const std::vector<StepRecord>& steps) {
  std::vector<const StepRecord*> out;
  for (const StepRecord& s : steps) {
    if (s.measured) out.push_back(&s);
  }
  return out;
}

// The measured step whose time is nearest the median: its buckets stand for "one step".
const StepRecord* median_step(const std::vector<const StepRecord*>& steps) {
  std::vector<double> times;
  for (const StepRecord* s : steps) times.push_back(s->time_ms);
  const double med = percentile(times, 50);
  const StepRecord* best = nullptr;
  for (const StepRecord* s : steps) {
    if (!best || std::fabs(s->time_ms - med) < std::fabs(best->time_ms - med)) best = s;
  }
  return best;
}

// Bytes on the wire: medians over the measured steps, and the median step's ops.
void add_traffic(const std::vector<const StepRecord*>& steps, const StepRecord& one,
                 reports::CommRecord& c) {
  std::vector<double> bus, gradient_bus;
  for (const StepRecord* s : steps) {
    if (!s->mode->bus_bytes) return;  // a record of an earlier version
    bus.push_back(*s->mode->bus_bytes);
    gradient_bus.push_back(s->mode->gradient_bus_bytes.value_or(0));
  }
  c.bus_bytes_per_step = percentile(bus, 50);
  c.gradient_bus_bytes_per_step = percentile(gradient_bus, 50);
  c.by_op = one.mode->by_op;
}

// Medians over the measured steps of what each step's gradient collectives did
// (bench/run/step_outcome.h), the same for every design: a design that does not overlap them
// with backward (DP's reduce_add) has them all exposed.
reports::CommRecord gradient_summary(const std::vector<const StepRecord*>& steps,
                                     const std::string& name, Collective op, int world_size) {
  std::vector<double> comm, exposed, bytes;
  double comm_total = 0, exposed_total = 0;
  for (const StepRecord* s : steps) {
    const reports::StepModeData& m = *s->mode;
    bytes.push_back(static_cast<double>(m.comm_bytes.value_or(0)));
    comm.push_back(m.comm_ms.value_or(0));
    exposed.push_back(m.comm_exposed_ms.value_or(0));
    comm_total += comm.back();
    exposed_total += exposed.back();
  }
  reports::CommRecord c;
  c.op = name;  // the row's gradient_op, as the schema names it
  c.comm_ms = percentile(comm, 50);
  c.comm_exposed_ms = percentile(exposed, 50);
  // From totals over the measured steps, so one step without communication (or a noisy one)
  // does not dominate as it would in a median of ratios.
  c.overlap_ratio = overlap_ratio(comm_total, exposed_total);
  c.bytes_per_step = static_cast<int64_t>(std::llround(percentile(bytes, 50)));
  c.bytes = static_cast<double>(*c.bytes_per_step);
  c.algbw_GBps = algbw_GBps(*c.bytes, c.comm_ms);
  c.busbw_GBps = *c.algbw_GBps * busbw_factor(op, world_size);
  c.busbw = busbw_record(op, world_size);
  const StepRecord* one = median_step(steps);
  add_traffic(steps, *one, c);
  if (one->mode->buckets) {
    std::vector<reports::BucketTiming> buckets = *one->mode->buckets;
    for (reports::BucketTiming& b : buckets) {
      b.ready_to_launch_ms = b.launch_ms - b.ready_ms;
      b.collective_ms = b.complete_ms - b.start_ms.value_or(b.launch_ms);
    }
    c.buckets_step = one->step;
    c.buckets = std::move(buckets);
  }
  return c;
}

}  // namespace

std::optional<reports::CommRecord> comm_summary(const reports::DesignInfo& design,
                                                const std::vector<StepRecord>& steps,
                                                int world_size,
                                                std::optional<double> expected_gradient_bus_bytes) {
  const auto measured = measured_steps(steps);
  if (measured.empty() || design.gradient_op.empty()) return std::nullopt;
  for (const StepRecord* s : measured) {
    if (!s->mode) return std::nullopt;
  }
  if (const auto op = enum_from_name<Collective>(design.gradient_op)) {
    reports::CommRecord c = gradient_summary(measured, design.gradient_op, *op, world_size);
    c.expected_gradient_bus_bytes = expected_gradient_bus_bytes;
    return c;
  }
  return std::nullopt;
}

}  // namespace ddpb::bench
