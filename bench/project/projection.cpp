#include "bench/project/projection.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/core.h>

#include "core/check.h"
#include "reports/run_record.h"

namespace ddpb::bench {
namespace {


using nlohmann::json;

// Note [DDP efficiency threshold]
// "Keeps scaling" means at least 90% of ideal weak scaling, the bar the issue and most scaling
// studies use; the scan stops at the first device count below it.
constexpr double kGoodEfficiency = 0.9;
// Device counts are scanned one by one up to here, then only on the grid.
constexpr int kScanLimit = 1 << 16;

double phase_ms(const reports::RunRecord& record, const std::string& name) {
  double total = 0;
  for (const auto& p : record.summary.phases_median_ms) {
    if (p.phase == name) total += p.median_ms;
  }
  return total;
}

// The models are of how gradients meet (Note [Designs in records]): a record's design must
// name the collective the model is of.
void check_gradient_op(const reports::RunRecord& record, std::string_view op,
                       const std::string& name) {
  if (record.kind != "run") throw UsageError(name + ": not a ddpbench run record");
  if (record.design.gradient_op != op)
    throw UsageError(fmt::format("{}: a {} run, whose gradients do not meet in {} ({})", name,
                                 record.config.mode, op,
                                 record.design.gradient_op.empty() ? "no collective"
                                                                   : record.design.gradient_op));
}

int64_t per_device_batch(const reports::RunRecord& record) {
  return record.config.global_batch / std::max<int64_t>(1, record.config.world_size);
}

// The mode extras of the last step that has them (DP's byte counts).
const reports::StepModeData* last_step_mode(const reports::RunRecord& record) {
  for (auto it = record.steps.rbegin(); it != record.steps.rend(); ++it) {
    if (it->mode) return &*it->mode;
  }
  return nullptr;
}

// Scales of the projected device against the measured one.
struct Scales {
  double batch = 1;   // projected per-device batch / measured
  double device = 1;  // projected compute time / measured (Note [Compute rate])
  double slots = 1;   // devices sharing compute units: N / slots when N > slots
  double compute() const { return batch * device * slots; }
};

Scales scales_for(int64_t measured_batch, double device_scale, const Topology& topo, int devices,
                  const ProjectionScale& scale) {
  Scales s;
  if (scale.per_device_batch > 0 && measured_batch > 0)
    s.batch = static_cast<double>(scale.per_device_batch) / static_cast<double>(measured_batch);
  s.device = device_scale;
  if (topo.compute_slots > 0 && devices > topo.compute_slots)
    s.slots = static_cast<double>(devices) / topo.compute_slots;
  s.slots *= topo.contention(devices);
  return s;
}

int64_t projected_batch(int64_t measured, const ProjectionScale& scale) {
  return scale.per_device_batch > 0 ? scale.per_device_batch : measured;
}

// Note [Projected efficiency]
// Weak scaling (the per-device batch stays): efficiency at N = the design's own projected step
// at one device / its projected step at N, so it is exactly 100% at one device. The baseline is
// never a measured run: a measured single-device step against a DDP run's phases is a pair of
// noisy measurements, whose ratio can exceed 100% by their noise alone. As N grows, the model
// only adds to a step (collectives, DP's device-0 traffic and its loss over N·b outputs, compute
// slots shared), so the ratio is at most 1; min() keeps that promise against rounding.
void finish_point(DesignPoint& p, double one_device_ms, int devices, int64_t batch) {
  p.efficiency = p.step_ms > 0 ? std::min(1.0, one_device_ms / p.step_ms) : 0;
  p.samples_per_s = p.step_ms > 0 ? 1000.0 * devices * static_cast<double>(batch) / p.step_ms : 0;
}

MeasuredCompute measured_compute(const ProjectionBasis& b, int64_t batch, double compute_ms) {
  return {b.train_flops_per_sample * static_cast<double>(batch), compute_ms, b.measured_peak,
          b.precision};
}

}  // namespace

void read_compute_basis(ProjectionBasis& b, const reports::RunRecord& record,
                        const std::optional<PeakRate>& suite_peak) {
  const ops::MathMode precision =
      enum_from_name<ops::MathMode>(record.config.precision).value_or(b.precision);
  // One basis serves both designs: the second record read (DP after DDP) must describe the
  // same work, or one design would be projected at the other's rate.
  if (b.compute_read) {
    DDPB_USAGE_CHECK(precision == b.precision &&
                     record.workload.train_flops_per_sample == b.train_flops_per_sample)
        << b.workload << ": the DDP and DP runs differ in precision (" << enum_name(b.precision)
        << " against " << enum_name(precision) << ") or in training FLOPs per sample ("
        << b.train_flops_per_sample << " against " << record.workload.train_flops_per_sample
        << "); project runs of one configuration";
  }
  b.compute_read = true;
  b.train_flops_per_sample = record.workload.train_flops_per_sample;
  b.precision = precision;
  if (const auto& mfu = record.summary.mfu; mfu && mfu->peak_flops_per_s > 0)
    b.measured_peak = PeakRate{mfu->peak_flops_per_s, mfu->source};
  else
    b.measured_peak = suite_peak;
}

ComputeRate ddp_compute_rate(const ProjectionBasis& b, const Topology& topo,
                             const ProjectionScale& scale) {
  DDPB_CHECK(b.ddp.has_value()) << "ddp_compute_rate needs a DDP basis";
  const DdpBasis& d = *b.ddp;
  return compute_rate(measured_compute(b, d.per_device_batch, d.forward_ms + d.backward_ms), topo,
                      scale.target_flops_per_s, d.run);
}

ComputeRate dp_compute_rate(const ProjectionBasis& b, const Topology& topo,
                            const ProjectionScale& scale) {
  DDPB_CHECK(b.dp.has_value()) << "dp_compute_rate needs a DP basis";
  const DpBasis& d = *b.dp;
  return compute_rate(measured_compute(b, d.per_device_batch, d.replica_ms), topo,
                      scale.target_flops_per_s, d.run);
}

DdpBasis ddp_basis(const reports::RunRecord& record, const std::string& name) {
  check_gradient_op(record, "allreduce", name);
  const auto& comm = record.summary.comm;
  if (!comm || !comm->buckets || comm->buckets->empty())
    throw UsageError(name + ": a DDP record without bucket timings (summary.comm.buckets)");
  DdpBasis d;
  d.design = record.config.mode;
  d.run = name;
  d.world_size = static_cast<int>(record.config.world_size);
  d.per_device_batch = per_device_batch(record);
  d.data_ms = phase_ms(record, "data");
  d.forward_ms = phase_ms(record, "forward") + phase_ms(record, "buffer_broadcast") +
                 phase_ms(record, "sync_bn");
  d.backward_ms = phase_ms(record, "backward_compute");
  d.optimizer_ms = phase_ms(record, "optimizer");
  d.step_ms = record.summary.step_time_ms.median;
  for (const reports::BucketTiming& bk : *comm->buckets)
    d.buckets.push_back({bk.ready_ms, static_cast<double>(bk.bytes.value_or(0))});
  return d;
}

DpBasis dp_basis(const reports::RunRecord& record, const std::string& name) {
  check_gradient_op(record, "reduce", name);
  DpBasis d;
  d.design = record.config.mode;
  d.run = name;
  d.world_size = static_cast<int>(record.config.world_size);
  d.per_device_batch = per_device_batch(record);
  d.data_ms = phase_ms(record, "data");
  d.replica_ms = phase_ms(record, "forward") + phase_ms(record, "backward");
  d.loss_ms = phase_ms(record, "loss");
  d.optimizer_ms = phase_ms(record, "optimizer");
  d.step_ms = record.summary.step_time_ms.median;
  const reports::StepModeData* mode = last_step_mode(record);
  if (!mode || !mode->unit_bytes)
    throw UsageError(name + ": a DP record without byte counts (steps[].mode.unit_bytes)");
  const auto unit = [&](std::string_view key) {
    return static_cast<double>(reports::named_value(*mode->unit_bytes, key));
  };
  d.parameter_bytes = unit("parameters");
  d.buffer_bytes = unit("buffers");
  d.input_bytes_per_sample = unit("input_per_sample");
  d.output_bytes_per_sample = unit("output_per_sample");
  return d;
}

// Note [Bucket pipeline]
// Buckets launch in index order, each once it is ready and the one before it has launched;
// the communication stream runs one collective at a time, so a bucket starts when it is
// launched and the stream is free. Whatever runs after backward ends is exposed. This is
// the reducer's own rule (impl_ddp/reducer.h) with the collective times from the cost model.
PipelineResult simulate_bucket_pipeline(const std::vector<BucketTiming>& buckets,
                                        const std::vector<double>& collective_ms,
                                        double backward_ms) {
  DDPB_CHECK(buckets.size() == collective_ms.size()) << "one collective time per bucket";
  PipelineResult r;
  double launch = 0, stream_free = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    launch = std::max(launch, buckets[i].ready_ms);
    const double start = std::max(launch, stream_free);
    stream_free = start + collective_ms[i];
    r.comm_ms += collective_ms[i];
  }
  r.end_ms = stream_free;
  // The stream is busy without a gap from the last ready bucket on, and every bucket is ready
  // by the end of backward, so everything past backward_ms is communication.
  r.exposed_ms = std::max(0.0, r.end_ms - backward_ms);
  return r;
}

DesignPoint project_ddp(const ProjectionBasis& b, const Topology& topo, int devices,
                        const ProjectionScale& scale) {
  DDPB_CHECK(b.ddp.has_value()) << "project_ddp needs a DDP basis";
  const DdpBasis& d = *b.ddp;
  const Scales s =
      scales_for(d.per_device_batch, ddp_compute_rate(b, topo, scale).scale, topo, devices, scale);
  std::vector<BucketTiming> buckets = d.buckets;
  std::vector<double> collective;
  for (auto& bk : buckets) {
    bk.ready_ms *= s.compute();
    collective.push_back(allreduce_ms(bk.bytes, devices, topo));
  }
  const double backward = d.backward_ms * s.compute();
  const PipelineResult pipe = simulate_bucket_pipeline(buckets, collective, backward);
  DesignPoint p;
  p.comm_ms = pipe.comm_ms;
  p.exposed_ms = pipe.exposed_ms;
  double bytes = 0;
  for (const auto& bk : buckets) bytes += bk.bytes;
  p.busbw_GBps = allreduce_busbw_GBps(bytes, devices, pipe.comm_ms);
  if (topo.comm_shares_compute && topo.compute_slots > 0 && devices >= topo.compute_slots) {
    // Note [Topology]: no unit is free for the collectives, so they take turns with compute
    // and all of them add to the step, slowed like compute by the sharing.
    p.comm_ms = p.exposed_ms = pipe.comm_ms * s.slots;
  }
  p.step_ms = d.data_ms * s.batch + d.forward_ms * s.compute() + backward + p.exposed_ms +
              d.optimizer_ms * s.device * s.slots;
  finish_point(p, devices > 1 ? project_ddp(b, topo, 1, scale).step_ms : p.step_ms, devices,
               projected_batch(d.per_device_batch, scale));
  return p;
}

// Note [DP device-0 traffic]
// Device 0 sends each other device its rows of the input and a copy of the parameters and
// buffers, receives every replica's outputs, sends back their gradients, and receives every
// replica's parameter gradients to add them up: five transfers per other device, one after
// another over device 0's link, so the traffic grows linearly with the device count while
// the compute per device stays the same.
std::optional<DesignPoint> project_dp(const ProjectionBasis& b, const Topology& topo, int devices,
                                      const ProjectionScale& scale) {
  DDPB_CHECK(b.dp.has_value()) << "project_dp needs a DP basis";
  if (devices > topo.node_size) return std::nullopt;  // DP is one process on one node
  const DpBasis& d = *b.dp;
  const Scales s =
      scales_for(d.per_device_batch, dp_compute_rate(b, topo, scale).scale, topo, devices, scale);
  const double batch = static_cast<double>(projected_batch(d.per_device_batch, scale));
  const double k = devices - 1;
  const Link& copy = topo.copy_link();
  const double copied = batch * d.input_bytes_per_sample + d.parameter_bytes + d.buffer_bytes +
                        2 * batch * d.output_bytes_per_sample;
  DesignPoint p;
  p.comm_ms = k * (4 * copy.alpha_us / 1e3 + copied / (copy.bandwidth_GBps * 1e6) +
                   topo.reduce_add_link().message_ms(d.parameter_bytes));
  p.exposed_ms = p.comm_ms;
  // The loss runs on device 0 over the gathered outputs of every device.
  p.step_ms = d.data_ms * s.batch + p.comm_ms + d.replica_ms * s.compute() +
              d.loss_ms * s.batch * s.device * devices + d.optimizer_ms * s.device;
  finish_point(p, devices > 1 ? project_dp(b, topo, 1, scale)->step_ms : p.step_ms, devices,
               static_cast<int64_t>(batch));
  return p;
}

namespace {

reports::ProjectedDesign design_record(const DesignPoint& p) {
  return {p.step_ms,    p.comm_ms,
          p.exposed_ms, p.comm_ms > 0 ? 1 - p.exposed_ms / p.comm_ms : 0.0,
          p.efficiency, p.samples_per_s,
          p.busbw_GBps};
}

std::vector<int> device_grid(const std::vector<int>& devices) {
  std::set<int> grid(devices.begin(), devices.end());
  const int most = devices.empty() ? 1 : *std::max_element(devices.begin(), devices.end());
  for (int n = 1; n <= most && n > 0; n *= 2) grid.insert(n);
  return {grid.begin(), grid.end()};
}

// The largest N (scanned one by one) up to which DDP keeps >= 90% efficiency.
int ddp_good_scaling_limit(const ProjectionBasis& b, const Topology& topo, int most,
                           const ProjectionScale& scale) {
  int good = 1;
  for (int n = 2; n <= std::min(most, kScanLimit); ++n) {
    if (project_ddp(b, topo, n, scale).efficiency < kGoodEfficiency) break;
    good = n;
  }
  return good;
}

// The N after which one more device no longer raises DP's samples/s (nullopt: it keeps
// gaining up to the node or the largest N asked for).
std::optional<int> dp_gain_limit(const ProjectionBasis& b, const Topology& topo, int most,
                                 const ProjectionScale& scale) {
  double last = 0;
  for (int n = 1; n <= std::min(most, kScanLimit); ++n) {
    const auto p = project_dp(b, topo, n, scale);
    if (!p) return std::nullopt;
    if (n > 1 && p->samples_per_s <= last) return n - 1;
    last = p->samples_per_s;
  }
  return std::nullopt;
}

reports::ProjectionBasisInfo basis_record(const ProjectionBasis& b) {
  reports::ProjectionBasisInfo basis;
  if (b.ddp) basis.ddp = reports::BasisRun{b.ddp->run, b.ddp->per_device_batch};
  if (b.dp) basis.dp = reports::BasisRun{b.dp->run, b.dp->per_device_batch};
  basis.single_step_ms = b.single_step_ms;
  return basis;
}

}  // namespace

reports::ProjectedWorkload project_workload(const ProjectionBasis& b, const Topology& topo,
                                            const std::vector<int>& devices,
                                            const ProjectionScale& scale,
                                            std::vector<reports::MeasuredPoint> measured) {
  reports::ProjectedWorkload out;
  out.workload = b.workload;
  out.basis = basis_record(b);
  out.measured = std::move(measured);
  // Resolved first: a rate that cannot be known refuses the projection before any point.
  reports::ComputeRates rates;
  if (b.ddp) rates.ddp = ddp_compute_rate(b, topo, scale).info;
  if (b.dp) rates.dp = dp_compute_rate(b, topo, scale).info;
  out.compute_rate = std::move(rates);
  std::optional<bool> ddp_ahead;  // at the smallest N where both designs run
  for (int n : device_grid(devices)) {
    reports::ProjectedPoint point{n, std::nullopt, std::nullopt};
    std::optional<DesignPoint> ddp, dp;
    if (b.ddp) point.ddp = design_record(*(ddp = project_ddp(b, topo, n, scale)));
    if (b.dp && (dp = project_dp(b, topo, n, scale))) point.dp = design_record(*dp);
    if (ddp && dp && n > 1) {
      const bool ahead = ddp->step_ms < dp->step_ms;
      if (!ddp_ahead)
        ddp_ahead = ahead;
      else if (!out.crossover.value && ahead != *ddp_ahead)
        out.crossover.value = reports::Crossover{n, ahead ? b.ddp->design : b.dp->design};
    }
    out.points.push_back(std::move(point));
  }
  const int most = devices.empty() ? 1 : *std::max_element(devices.begin(), devices.end());
  if (b.ddp) out.ddp_max_devices_at_90pct = ddp_good_scaling_limit(b, topo, most, scale);
  if (b.dp) {
    const auto limit = dp_gain_limit(b, topo, most, scale);
    out.dp_stops_gaining_at = reports::Nullable<int64_t>{limit};
    out.dp_max_devices = std::min(most, topo.max_devices().value_or(topo.node_size));
  }
  return out;
}

}  // namespace ddpb::bench
