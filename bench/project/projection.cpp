#include "bench/project/projection.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <variant>

#include <fmt/core.h>

#include "core/check.h"
#include "core/step_phase.h"
#include "reports/memory_model.h"
#include "reports/run_record.h"

namespace ddpb::bench {
namespace {

// Note [Efficiency threshold]
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

int64_t per_device_batch(const reports::RunRecord& record) {
  return record.config.global_batch / std::max<int64_t>(1, record.config.world_size);
}

// The mode extras of the last step that has them (the byte counts device 0 moves).
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
// mostly adds to a step (collectives, DP's device-0 traffic and its loss over N·b outputs,
// compute slots shared); a design that shards its optimizer also takes from it (Note [Sharded
// steps]: its optimizer over 1/N), which can make its step at N shorter than at one device.
// Efficiency is capped at 1 all the same: weak scaling does not get better than ideal, and a
// faster step shows in samples/s.
void finish_point(DesignPoint& p, double one_device_ms, int devices, int64_t batch) {
  p.efficiency = p.step_ms > 0 ? std::min(1.0, one_device_ms / p.step_ms) : 0;
  p.samples_per_s = p.step_ms > 0 ? 1000.0 * devices * static_cast<double>(batch) / p.step_ms : 0;
}

MeasuredCompute measured_compute(const ProjectionBasis& b, int64_t batch, double compute_ms) {
  return {b.train_flops_per_sample * static_cast<double>(batch), compute_ms, b.measured_peak,
          b.precision};
}

}  // namespace

std::optional<GradientModel> gradient_model(const reports::DesignInfo& design) {
  // The collectives the models are of (Note [Gradient models]); a name of a collective, never
  // of a design.
  if (design.gradient_op == "allreduce") return GradientModel::BucketedAllReduce;
  if (design.gradient_op == "reduce_scatter") return GradientModel::BucketedReduceScatter;
  if (design.gradient_op == "reduce") return GradientModel::DeviceZeroReduce;
  return std::nullopt;
}

void read_compute_basis(ProjectionBasis& b, const reports::RunRecord& record,
                        const std::optional<PeakRate>& suite_peak) {
  const ops::MathMode precision =
      enum_from_name<ops::MathMode>(record.config.precision).value_or(b.precision);
  // One basis serves every design of the workload: a record read after the first must describe
  // the same work, or one design would be projected at another's rate.
  if (b.compute_read_from) {
    DDPB_USAGE_CHECK(precision == b.precision &&
                     record.workload.train_flops_per_sample == b.train_flops_per_sample)
        << b.workload << ": the " << *b.compute_read_from << " and " << record.design.label
        << " runs differ in precision (" << enum_name(b.precision) << " against "
        << enum_name(precision) << ") or in training FLOPs per sample (" << b.train_flops_per_sample
        << " against " << record.workload.train_flops_per_sample
        << "); project runs of one configuration";
  } else {
    b.compute_read_from = record.design.label;
  }
  b.train_flops_per_sample = record.workload.train_flops_per_sample;
  b.precision = precision;
  if (const auto& mfu = record.summary.mfu; mfu && mfu->peak_flops_per_s > 0)
    b.measured_peak = PeakRate{mfu->peak_flops_per_s, mfu->source};
  else
    b.measured_peak = suite_peak;
}

namespace {

AllReduceInputs allreduce_inputs(const reports::RunRecord& record, const std::string& label,
                                 const std::string& name) {
  const auto& comm = record.summary.comm;
  if (!comm || !comm->buckets || comm->buckets->empty())
    throw UsageError(name + ": a " + label +
                     " record without bucket timings (summary.comm.buckets)");
  AllReduceInputs in;
  in.data_ms = phase_ms(record, "data");
  in.forward_ms = phase_ms(record, "forward") + phase_ms(record, "buffer_broadcast") +
                  phase_ms(record, "sync_bn");
  in.backward_ms = phase_ms(record, "backward_compute");
  in.optimizer_ms = phase_ms(record, "optimizer");
  for (const reports::BucketTiming& bk : *comm->buckets)
    in.buckets.push_back({bk.ready_ms, static_cast<double>(bk.bytes.value_or(0))});
  // Note [Sharded steps]: what the optimizer stepped, and how the parameters meet again.
  if (record.design.shards_optimizer_state)  // 1 too: a world-size-1 run stepped everything
    in.optimizer_shards = std::max<int>(1, static_cast<int>(record.config.world_size));
  if (record.design.phase_kind(step_phase_name(StepPhase::ParamAllGather)))
    in.gather = ParameterGather::AllGather;
  else if (record.design.phase_kind(step_phase_name(StepPhase::ParamBroadcast)))
    in.gather = ParameterGather::Broadcast;
  in.parameter_bytes = 4.0 * static_cast<double>(record.workload.parameters);
  return in;
}

// Note [Projected memory]: rank 0's peak and what its design promised, when the record says.
std::optional<MemoryBasis> memory_basis(const reports::RunRecord& record) {
  if (record.memory.empty()) return std::nullopt;
  const reports::MemoryUse& m = record.memory.front();
  if (!m.expected_by_category || !m.by_category) return std::nullopt;
  return MemoryBasis{static_cast<double>(m.peak_bytes),
                     static_cast<double>(reports::named_value(*m.by_category, "activations")),
                     *m.expected_by_category,
                     std::max(1, static_cast<int>(record.config.world_size)),
                     record.workload.parameters};
}

ReduceInputs reduce_inputs(const reports::RunRecord& record, const std::string& label,
                           const std::string& name) {
  ReduceInputs in;
  in.data_ms = phase_ms(record, "data");
  in.replica_ms = phase_ms(record, "forward") + phase_ms(record, "backward");
  in.loss_ms = phase_ms(record, "loss");
  in.optimizer_ms = phase_ms(record, "optimizer");
  const reports::StepModeData* mode = last_step_mode(record);
  if (!mode || !mode->unit_bytes)
    throw UsageError(name + ": a " + label +
                     " record without byte counts (steps[].mode.unit_bytes)");
  const auto unit = [&](std::string_view key) {
    return static_cast<double>(reports::named_value(*mode->unit_bytes, key));
  };
  in.parameter_bytes = unit("parameters");
  in.buffer_bytes = unit("buffers");
  in.input_bytes_per_sample = unit("input_per_sample");
  in.output_bytes_per_sample = unit("output_per_sample");
  return in;
}

}  // namespace

DesignBasis design_basis(const reports::RunRecord& record, const reports::DesignInfo& design,
                         const std::string& name) {
  if (record.kind != "run") throw UsageError(name + ": not a ddpbench run record");
  const auto model = gradient_model(design);
  if (!model) {
    throw UsageError(fmt::format(
        "{}: a {} run, whose gradients meet in {}; projection needs a DDP record (bucket "
        "timings) or a DP record (byte counts): a run of a design whose gradients meet in an "
        "AllReduce or a reduce",
        name, design.label, design.gradient_op.empty() ? "no collective" : design.gradient_op));
  }
  DesignBasis d;
  d.design = design;
  d.run = name;
  d.world_size = static_cast<int>(record.config.world_size);
  d.per_device_batch = per_device_batch(record);
  d.step_ms = record.summary.step_time_ms.median;
  if (*model == GradientModel::DeviceZeroReduce)
    d.inputs = reduce_inputs(record, design.label, name);
  else
    d.inputs = allreduce_inputs(record, design.label, name);
  d.memory = memory_basis(record);
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

namespace {

// The measured compute its rate is of: forward and backward, of one replica for the reduce model.
double compute_ms(const DesignBasis& d) {
  if (const auto* in = std::get_if<AllReduceInputs>(&d.inputs))
    return in->forward_ms + in->backward_ms;
  return std::get<ReduceInputs>(d.inputs).replica_ms;
}

// Note [Sharded steps]: the parameters' way back after a sharded optimizer's step.
double gather_ms(const AllReduceInputs& in, int devices, const Topology& topo) {
  switch (in.gather) {
    case ParameterGather::AllGather:
      return all_gather_ms(in.parameter_bytes, devices, topo);
    case ParameterGather::Broadcast:
      return sharded_broadcast_ms(in.parameter_bytes, devices, topo);
    case ParameterGather::None:
      break;
  }
  return 0;
}

DesignPoint project_allreduce(const ProjectionBasis& b, const DesignBasis& d,
                              const AllReduceInputs& in, const Topology& topo, int devices,
                              const ProjectionScale& scale) {
  const Scales s = scales_for(d.per_device_batch, design_compute_rate(b, d, topo, scale).scale,
                              topo, devices, scale);
  const double backward = in.backward_ms * s.compute();
  const bool scatters = gradient_model(d.design) == GradientModel::BucketedReduceScatter;
  std::vector<BucketTiming> buckets = in.buckets;
  std::vector<double> collective;
  for (auto& bk : buckets) {
    // Note [Gradient models]: a design that does not overlap backward launches every bucket
    // once backward ends.
    bk.ready_ms = d.design.overlaps_backward ? bk.ready_ms * s.compute() : backward;
    collective.push_back(scatters ? reduce_scatter_ms(bk.bytes, devices, topo)
                                  : allreduce_ms(bk.bytes, devices, topo));
  }
  const PipelineResult pipe = simulate_bucket_pipeline(buckets, collective, backward);
  DesignPoint p;
  p.comm_ms = pipe.comm_ms;
  p.exposed_ms = pipe.exposed_ms;
  double bytes = 0;
  for (const auto& bk : buckets) bytes += bk.bytes;
  // nccl-tests' factors: 2(p-1)/p for the AllReduce, (p-1)/p for the reduce-scatter.
  p.busbw_GBps = allreduce_busbw_GBps(bytes, devices, pipe.comm_ms) / (scatters ? 2 : 1);
  // Note [Sharded steps]: the optimizer over this device's share, then the gather, exposed.
  const double optimizer_share =
      in.optimizer_shards > 0 ? static_cast<double>(in.optimizer_shards) / devices : 1.0;
  const double gather = gather_ms(in, devices, topo);
  p.comm_ms += gather, p.exposed_ms += gather;
  if (topo.comm_shares_compute && topo.compute_slots > 0 && devices >= topo.compute_slots) {
    // Note [Topology]: no unit is free for the collectives, so they take turns with compute
    // and all of them add to the step, slowed like compute by the sharing; unless they cross
    // nodes, where the network link, not the shared units, sets their pace.
    const double slowed = topo.nodes(devices) > 1 ? 1.0 : s.slots;
    p.comm_ms = p.exposed_ms = (pipe.comm_ms + gather) * slowed;
  }
  p.step_ms = in.data_ms * s.batch + in.forward_ms * s.compute() + backward + p.exposed_ms +
              in.optimizer_ms * optimizer_share * s.device * s.slots;
  finish_point(p, devices > 1 ? project_allreduce(b, d, in, topo, 1, scale).step_ms : p.step_ms,
               devices, projected_batch(d.per_device_batch, scale));
  return p;
}

// Note [DP device-0 traffic]
// Device 0 sends each other device its rows of the input and a copy of the parameters and
// buffers, receives every replica's outputs, sends back their gradients, and receives every
// replica's parameter gradients to add them up: five transfers per other device, one after
// another over device 0's link, so the traffic grows linearly with the device count while
// the compute per device stays the same.
std::optional<DesignPoint> project_reduce(const ProjectionBasis& b, const DesignBasis& d,
                                          const ReduceInputs& in, const Topology& topo, int devices,
                                          const ProjectionScale& scale) {
  if (devices > topo.node_size) return std::nullopt;  // one process on one node
  const Scales s = scales_for(d.per_device_batch, design_compute_rate(b, d, topo, scale).scale,
                              topo, devices, scale);
  const double batch = static_cast<double>(projected_batch(d.per_device_batch, scale));
  const double k = devices - 1;
  const Link& copy = topo.copy_link();
  const double copied = batch * in.input_bytes_per_sample + in.parameter_bytes + in.buffer_bytes +
                        2 * batch * in.output_bytes_per_sample;
  DesignPoint p;
  p.comm_ms = k * (4 * copy.alpha_us / 1e3 + copied / (copy.bandwidth_GBps * 1e6) +
                   topo.reduce_add_link().message_ms(in.parameter_bytes));
  p.exposed_ms = p.comm_ms;
  // The loss runs on device 0 over the gathered outputs of every device.
  p.step_ms = in.data_ms * s.batch + p.comm_ms + in.replica_ms * s.compute() +
              in.loss_ms * s.batch * s.device * devices + in.optimizer_ms * s.device;
  finish_point(p, devices > 1 ? project_reduce(b, d, in, topo, 1, scale)->step_ms : p.step_ms,
               devices, static_cast<int64_t>(batch));
  return p;
}

}  // namespace

ComputeRate design_compute_rate(const ProjectionBasis& b, const DesignBasis& d,
                                const Topology& topo, const ProjectionScale& scale) {
  return compute_rate(measured_compute(b, d.per_device_batch, compute_ms(d)), topo,
                      scale.target_flops_per_s, d.run);
}

std::optional<DesignPoint> project_design(const ProjectionBasis& b, const DesignBasis& d,
                                          const Topology& topo, int devices,
                                          const ProjectionScale& scale) {
  std::optional<DesignPoint> p;
  if (const auto* in = std::get_if<AllReduceInputs>(&d.inputs))
    p = project_allreduce(b, d, *in, topo, devices, scale);
  else
    p = project_reduce(b, d, std::get<ReduceInputs>(d.inputs), topo, devices, scale);
  if (p) p->memory_bytes = projected_memory(d, devices, scale);
  return p;
}

namespace {

// Note [Projected memory]: the measured peak split into the model state the design promised,
// the activations at the projected per-device batch, and the rest.
struct MemoryParts {
  double model_state = 0, activations = 0, rest = 0;
};

MemoryParts memory_parts(const DesignBasis& d, const MemoryBasis& m, int devices,
                         const ProjectionScale& scale) {
  const double promised = static_cast<double>(reports::total_bytes(m.model_state));
  const double batch = d.per_device_batch > 0
                           ? static_cast<double>(projected_batch(d.per_device_batch, scale)) /
                                 static_cast<double>(d.per_device_batch)
                           : 1.0;
  MemoryParts parts;
  parts.model_state = static_cast<double>(reports::total_bytes(
      reports::model_state_at_world(d.design, m.model_state, m.world_size, devices)));
  parts.activations = m.activations_bytes * batch;
  parts.rest = std::max(0.0, m.peak_bytes - promised - m.activations_bytes);
  return parts;
}

}  // namespace

std::optional<double> projected_memory(const DesignBasis& d, int devices,
                                       const ProjectionScale& scale) {
  if (!d.memory) return std::nullopt;
  const MemoryParts parts = memory_parts(d, *d.memory, devices, scale);
  return parts.model_state + parts.activations + parts.rest;
}

std::optional<reports::MemoryFit> memory_fit(const ProjectionBasis& b, const DesignBasis& d,
                                             int devices, const ProjectionScale& scale) {
  if (!d.memory || d.memory->parameters <= 0 || scale.device_memory_bytes <= 0) return std::nullopt;
  const MemoryParts parts = memory_parts(d, *d.memory, devices, scale);
  reports::MemoryFit fit;
  fit.devices = devices;
  fit.bytes_per_parameter = (parts.model_state + parts.activations + parts.rest) /
                            static_cast<double>(d.memory->parameters);
  fit.max_parameters = static_cast<int64_t>(scale.device_memory_bytes / fit.bytes_per_parameter);
  for (const FamilyPreset& preset : b.family_presets) {
    if (preset.parameters > fit.max_parameters) continue;
    if (!fit.largest_preset_parameters || preset.parameters > *fit.largest_preset_parameters)
      fit.largest_preset = preset.name, fit.largest_preset_parameters = preset.parameters;
  }
  return fit;
}

namespace {

reports::ProjectedDesign design_record(const DesignPoint& p) {
  return {p.step_ms,    p.comm_ms,
          p.exposed_ms, p.comm_ms > 0 ? 1 - p.exposed_ms / p.comm_ms : 0.0,
          p.efficiency, p.samples_per_s,
          p.busbw_GBps, p.memory_bytes};
}

std::vector<int> device_grid(const std::vector<int>& devices) {
  std::set<int> grid(devices.begin(), devices.end());
  const int most = devices.empty() ? 1 : *std::max_element(devices.begin(), devices.end());
  for (int n = 1; n <= most && n > 0; n *= 2) grid.insert(n);
  return {grid.begin(), grid.end()};
}

// The largest N (scanned one by one) up to which `d` keeps >= 90% efficiency (Note
// [Efficiency threshold]).
int good_scaling_limit(const ProjectionBasis& b, const DesignBasis& d, const Topology& topo,
                       int most, const ProjectionScale& scale) {
  int good = 1;
  for (int n = 2; n <= std::min(most, kScanLimit); ++n) {
    const auto p = project_design(b, d, topo, n, scale);
    if (!p || p->efficiency < kGoodEfficiency) break;
    good = n;
  }
  return good;
}

// The N after which one more device no longer raises `d`'s samples/s (nullopt: it keeps
// gaining up to where it runs or the largest N asked for).
std::optional<int64_t> gain_limit(const ProjectionBasis& b, const DesignBasis& d,
                                  const Topology& topo, int most, const ProjectionScale& scale) {
  double last = 0;
  for (int n = 1; n <= std::min(most, kScanLimit); ++n) {
    const auto p = project_design(b, d, topo, n, scale);
    if (!p) return std::nullopt;
    if (n > 1 && p->samples_per_s <= last) return n - 1;
    last = p->samples_per_s;
  }
  return std::nullopt;
}

// What the scans of `d` find: the question its model answers (the AllReduce model: how far it
// keeps scaling; the reduce model, which runs on one node: where it stops gaining).
reports::DesignLimits design_limits(const ProjectionBasis& b, const DesignBasis& d,
                                    const Topology& topo, int most, const ProjectionScale& scale) {
  reports::DesignLimits limits;
  if (std::holds_alternative<AllReduceInputs>(d.inputs)) {
    limits.max_devices_at_90pct = good_scaling_limit(b, d, topo, most, scale);
  } else {
    limits.stops_gaining_at = reports::Nullable<int64_t>{gain_limit(b, d, topo, most, scale)};
    limits.max_devices = std::min(most, topo.max_devices().value_or(topo.node_size));
  }
  return limits;
}

// Note [Crossover]
// At each N > 1 where two or more designs run, the faster is the one with the shortest
// projected step (on a tie, the earlier in the records' order). The crossover is the first N at
// which another design is faster than the one that was faster before, while that one still
// runs: a design that stops running (beyond its node) hands the lead on without a crossover.
reports::Nullable<reports::Crossover> find_crossover(
    const ProjectionBasis& b, const std::vector<reports::ProjectedPoint>& points) {
  std::optional<std::string> leader;
  for (const reports::ProjectedPoint& p : points) {
    if (p.devices <= 1 || p.designs.size() < 2) continue;
    const std::string* fastest = nullptr;
    double best = 0;
    for (const DesignBasis& d : b.designs) {
      const reports::ProjectedDesign* r = p.design(d.design.name);
      if (r && (!fastest || r->step_ms < best)) fastest = &d.design.name, best = r->step_ms;
    }
    if (!fastest) continue;
    if (!leader || !p.design(*leader))
      leader = *fastest;
    else if (*leader != *fastest)
      return {reports::Crossover{p.devices, *fastest}};
  }
  return {};
}

reports::ProjectionBasisInfo basis_record(const ProjectionBasis& b) {
  reports::ProjectionBasisInfo basis;
  for (const DesignBasis& d : b.designs)
    reports::put_named(basis.designs, d.design.name, reports::BasisRun{d.run, d.per_device_batch});
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
  for (const DesignBasis& d : b.designs)
    reports::put_named(rates, d.design.name, design_compute_rate(b, d, topo, scale).info);
  out.compute_rate = std::move(rates);
  for (int n : device_grid(devices)) {
    reports::ProjectedPoint point{n, {}};
    for (const DesignBasis& d : b.designs) {
      if (const auto p = project_design(b, d, topo, n, scale))
        reports::put_named(point.designs, d.design.name, design_record(*p));
    }
    out.points.push_back(std::move(point));
  }
  out.crossover = find_crossover(b, out.points);
  const int most = devices.empty() ? 1 : *std::max_element(devices.begin(), devices.end());
  for (const DesignBasis& d : b.designs)
    reports::put_named(out.limits, d.design.name, design_limits(b, d, topo, most, scale));
  if (scale.device_memory_bytes > 0) {
    reports::NamedValues<reports::MemoryFit> fits;
    for (const DesignBasis& d : b.designs)
      if (auto fit = memory_fit(b, d, most, scale)) reports::put_named(fits, d.design.name, *fit);
    out.fits = std::move(fits);
  }
  return out;
}

}  // namespace ddpb::bench
