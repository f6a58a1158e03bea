#include "bench/run/ddp_record.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "bench/measure/metrics.h"
#include "reports/json_io.h"

namespace ddpb::bench {
namespace {

// One bucket's record and trace spans: one span per collective (PowerSGD has up to three)
// and per host-timed hook compute; its collectives' busy intervals go to `busy`.
reports::BucketTiming bucket_record(const ddp::BucketRecord& r, int world_size, int64_t zero_ns,
                                    StepOutcome& out, std::vector<Interval>& busy) {
  const double factor = busbw_factor(Collective::AllReduce, world_size);
  std::vector<reports::BucketCollective> collectives;
  for (const auto& c : r.collectives) {
    const double start = c.start_ms > 0 ? c.start_ms : c.launch_ms;
    busy.emplace_back(start, c.complete_ms);
    const double busbw = algbw_GBps(static_cast<double>(c.bytes), c.complete_ms - start) * factor;
    const std::string name = c.name == "allreduce" ? c.name : "powersgd " + c.name;
    out.spans.push_back({name + " bucket " + std::to_string(r.index),
                         "comm bucket " + std::to_string(r.index),
                         zero_ns + static_cast<int64_t>(start * 1e6),
                         c.complete_ms - start,
                         {{"bucket", r.index},
                          {"bytes", c.bytes},
                          {"busbw_GBps", busbw},
                          {"ready_ms", r.ready_ms},
                          {"launch_ms", c.launch_ms}}});
    collectives.push_back({c.name, c.bytes, c.launch_ms, start, c.complete_ms});
  }
  double hook_compute_ms = 0;
  for (const auto& h : r.compute) {
    hook_compute_ms += h.end_ms - h.start_ms;
    out.spans.push_back({h.name + " bucket " + std::to_string(r.index),
                         "comm hook compute",
                         zero_ns + static_cast<int64_t>(h.start_ms * 1e6),
                         h.end_ms - h.start_ms,
                         {{"bucket", r.index}}});
  }
  const double start = r.start_ms > 0 ? r.start_ms : r.launch_ms;
  const double algbw = algbw_GBps(static_cast<double>(r.bytes), r.complete_ms - start);
  reports::BucketTiming b;
  b.bucket = r.index;
  b.params = r.params;
  b.bytes = r.bytes;
  b.ready_ms = r.ready_ms;
  b.launch_ms = r.launch_ms;
  b.start_ms = start;
  b.complete_ms = r.complete_ms;
  b.algbw_GBps = algbw;
  b.busbw_GBps = algbw * factor;
  b.collectives = std::move(collectives);
  b.hook_compute_ms = hook_compute_ms;
  return b;
}

// Per-bucket records; communication time is the union of the collectives' busy intervals,
// exposed communication the part after backward compute ended.
void add_bucket_records(const ddp::DdpStepStats& s, int world_size, int rank, StepOutcome& out) {
  std::vector<Interval> busy;
  std::vector<reports::BucketTiming> buckets;
  double first_launch = s.buckets.empty() ? 0.0 : s.buckets.front().launch_ms, last_complete = 0;
  int64_t bytes = 0;
  for (const auto& r : s.buckets) {
    first_launch = std::min(first_launch, r.launch_ms);
    last_complete = std::max(last_complete, r.complete_ms);
    bytes += r.bytes;
    buckets.push_back(bucket_record(r, world_size, s.backward_start_ns, out, busy));
  }
  const CommTime ct = comm_time(std::move(busy), s.backward_end_ms);
  reports::StepModeData& m = *out.mode;
  m.rank = rank;
  m.buckets = std::move(buckets);
  m.comm_bytes = bytes;
  m.comm_ms = ct.comm_ms;
  m.comm_exposed_ms = ct.exposed_ms;
  m.overlap_ratio = overlap_ratio(ct.comm_ms, ct.exposed_ms);
  m.extra.value["backward_end_ms"] = s.backward_end_ms;
  m.extra.value["span_overlap_ratio"] =
      span_overlap_ratio(first_launch, last_complete, s.backward_end_ms);
}

// SyncBatchNorm's collectives: their time and bytes, and one trace span each.
void add_sync_bn_records(const ddp::DdpStepStats& s, StepOutcome& out) {
  if (!s.sync_batch_norm) return;
  double ms_total = 0;
  int64_t bytes = 0;
  for (const ddp::SyncBnRecord& r : s.sync_bn) {
    const double ms = static_cast<double>(r.end_ns - r.start_ns) / 1e6;
    ms_total += ms;
    bytes += r.bytes;
    out.spans.push_back(
        {std::string("sync_bn ") + r.op, "comm sync_bn", r.start_ns, ms, {{"bytes", r.bytes}}});
  }
  out.mode->extra.value["sync_bn_ms"] = ms_total;
  out.mode->extra.value["sync_bn_bytes"] = bytes;
}

}  // namespace

StepOutcome ddp_step_outcome(const ddp::DdpStepStats& s, int world_size, int rank) {
  StepOutcome out;
  out.loss = s.loss;
  out.step_ms = s.step_ms;
  for (const PhaseTime& p : s.phases) out.phases_ms.emplace_back(step_phase_name(p.phase), p.ms);
  out.mode.emplace();
  if (s.buffer_broadcast_bytes >= 0)
    out.mode->extra.value["buffer_broadcast_bytes"] = s.buffer_broadcast_bytes;
  add_sync_bn_records(s, out);
  add_bucket_records(s, world_size, rank, out);
  return out;
}

std::vector<std::pair<std::string, std::vector<NamedTensor>>> ddp_dump_extras(
    const ddp::DistributedDataParallel& ddp) {
  std::vector<NamedTensor> q;
  for (auto& [name, t] : ddp.reducer().comm_hook().dump_tensors()) q.push_back({name, t});
  if (q.empty()) return {};
  return {{"powersgd_q.safetensors", std::move(q)}};
}

}  // namespace ddpb::bench
