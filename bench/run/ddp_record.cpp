#include "bench/run/ddp_record.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "bench/measure/metrics.h"
#include "bench/run/step_outcome.h"
#include "reports/json_io.h"

namespace ddpb::bench {
namespace {

// One bucket's row of steps[].mode.buckets, from its collectives (their spans are
// step_outcome's); a span per host-timed hook compute.
reports::BucketTiming bucket_record(const ddp::BucketRecord& r, int world_size, int64_t zero_ns,
                                    StepOutcome& out) {
  // ZeRO's buckets are reduce-scattered (Note [ZeRO in DDP]), every other's AllReduced.
  const bool scattered = !r.collectives.empty() && r.collectives.front().name == "reduce_scatter";
  const double factor =
      busbw_factor(scattered ? Collective::ReduceScatter : Collective::AllReduce, world_size);
  std::vector<reports::BucketCollective> collectives;
  for (const auto& c : r.collectives) {
    const double start = c.start_ms > 0 ? c.start_ms : c.launch_ms;
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

}  // namespace

StepOutcome ddp_step_outcome(const ddp::DdpStepStats& s, int world_size, int rank) {
  StepOutcome out = step_outcome(s, world_size);
  reports::StepModeData& m = *out.mode;
  m.rank = rank;
  if (s.buffer_broadcast_bytes >= 0)
    m.extra.value["buffer_broadcast_bytes"] = s.buffer_broadcast_bytes;
  if (s.sync_batch_norm) add_sync_bn_totals(s.sync_bn, out);
  std::vector<reports::BucketTiming> buckets;
  for (const auto& r : s.buckets)
    buckets.push_back(bucket_record(r, world_size, s.clock_zero_ns, out));
  m.buckets = std::move(buckets);
  if (!m.comm_ms) {  // no bucket this step: no communication, recorded as such
    m.comm_bytes = 0;
    m.comm_ms = m.comm_exposed_ms = m.overlap_ratio = 0.0;
    m.extra.value["backward_end_ms"] = s.compute_end_ms;
    m.extra.value["span_overlap_ratio"] = 0.0;
  }
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
