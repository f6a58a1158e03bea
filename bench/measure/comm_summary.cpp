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

reports::CommRecord ddp_summary(const std::vector<const StepRecord*>& steps, int world_size) {
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
  const StepRecord* one = median_step(steps);
  std::vector<reports::BucketTiming> buckets =
      one->mode->buckets.value_or(std::vector<reports::BucketTiming>{});
  for (reports::BucketTiming& b : buckets) {
    b.ready_to_launch_ms = b.launch_ms - b.ready_ms;
    b.collective_ms = b.complete_ms - b.start_ms.value_or(b.launch_ms);
  }
  reports::CommRecord c;
  c.op = "allreduce";
  c.comm_ms = percentile(comm, 50);
  c.comm_exposed_ms = percentile(exposed, 50);
  // From totals over the measured steps, so one step without communication (or a noisy one)
  // does not dominate as it would in a median of ratios.
  c.overlap_ratio = overlap_ratio(comm_total, exposed_total);
  c.buckets_step = one->step;
  c.bytes_per_step = static_cast<int64_t>(std::llround(percentile(bytes, 50)));
  c.buckets = std::move(buckets);
  c.busbw = busbw_record(Collective::AllReduce, world_size);
  return c;
}

// DP's reduce runs after backward on device 0's stream: it is all exposed by design.
reports::CommRecord dp_summary(const std::vector<const StepRecord*>& steps, int world_size) {
  std::vector<double> reduce;
  double bytes = 0;
  for (const StepRecord* s : steps) {
    reduce.push_back(reports::named_value(s->phases_ms, "reduce"));
    if (s->mode->bytes)
      bytes = static_cast<double>(reports::named_value(*s->mode->bytes, "reduce"));
  }
  const double med = percentile(reduce, 50);
  const double algbw = algbw_GBps(bytes, med);
  reports::CommRecord c;
  c.op = "reduce";
  c.comm_ms = c.comm_exposed_ms = med;
  c.overlap_ratio = 0.0;
  c.bytes = bytes;
  c.algbw_GBps = algbw;
  c.busbw_GBps = algbw * busbw_factor(Collective::Reduce, world_size);
  c.busbw = busbw_record(Collective::Reduce, world_size);
  return c;
}

}  // namespace

std::optional<reports::CommRecord> comm_summary(const reports::DesignInfo& design,
                                                const std::vector<StepRecord>& steps,
                                                int world_size) {
  const auto measured = measured_steps(steps);
  if (measured.empty() || design.gradient_op.empty()) return std::nullopt;
  for (const StepRecord* s : measured) {
    if (!s->mode) return std::nullopt;
  }
  if (design.gradient_op == "allreduce") return ddp_summary(measured, world_size);
  if (design.gradient_op == "reduce") return dp_summary(measured, world_size);
  return std::nullopt;
}

}  // namespace ddpb::bench
