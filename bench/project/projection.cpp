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
  // of a design. Parameters that meet too take the unit model, whatever the gradients' collective.
  if (design.shards_parameters) return GradientModel::UnitSchedule;
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

// Note [Unit schedule]: the units of mode.details, in forward order, the root apart.
void read_units(const nlohmann::json& units, UnitInputs& in) {
  for (size_t i = 0; i < units.size(); ++i) {
    const nlohmann::json& u = units[i];
    UnitSize unit{u.value("name", ""), u.value("numel", 0.0),
                  4.0 * u.value("padded_numel", u.value("numel", 0.0))};
    if (i + 1 == units.size() && unit.name == "root")
      in.root = std::move(unit);
    else
      in.units.push_back(std::move(unit));
  }
}

// The strategy's schedule: mode.details' sharding_strategy, else the traits' (a design that
// shards its parameters as full_shard, one that does not as no_shard).
void read_strategy(const nlohmann::json& details, const reports::DesignInfo& design,
                   UnitInputs& in) {
  const std::string strategy = details.value("sharding_strategy", "");
  in.regather_backward = strategy == "full_shard" || strategy == "hybrid_shard" ||
                         (strategy.empty() && design.shards_parameters);
  in.shard_group = strategy == "hybrid_shard" ? ShardGroup::Node
                   : strategy == "no_shard" || (strategy.empty() && !design.shards_parameters)
                       ? ShardGroup::One
                       : ShardGroup::World;
  in.forward_prefetch = details.value("forward_prefetch", true);
  in.backward_prefetch = details.value("backward_prefetch", true);
}

// The ranks the run divided its model state over: FSDP's shard group (mode.details'
// shard_group_size: hybrid_shard's node, no_shard's one rank), else the world.
int shard_world(const reports::RunRecord& record) {
  const nlohmann::json& details = record.mode.details;
  const int world = std::max(1, static_cast<int>(record.config.world_size));
  if (!details.is_object() || !details.contains("shard_group_size")) return world;
  const int group = details.value("shard_group_size", 0);
  return group > 0 ? group : world;
}

bool has_units(const reports::RunRecord& record) {
  const nlohmann::json& details = record.mode.details;
  return details.is_object() && details.contains("units") && details.at("units").is_array() &&
         !details.at("units").empty();
}

UnitInputs unit_inputs(const reports::RunRecord& record, const std::string& label,
                       const std::string& name) {
  if (!has_units(record))
    throw UsageError(name + ": a " + label + " record without its units (mode.details.units)");
  UnitInputs in;
  in.data_ms = phase_ms(record, "data");
  in.forward_ms = phase_ms(record, "forward") + phase_ms(record, "buffer_broadcast") +
                  phase_ms(record, "sync_bn");
  in.backward_ms = phase_ms(record, "backward_compute");
  in.optimizer_ms = phase_ms(record, "optimizer");
  read_units(record.mode.details.at("units"), in);
  read_strategy(record.mode.details, record.design, in);
  if (record.design.shards_optimizer_state)  // Note [Sharded steps], over its shard group
    in.optimizer_shards = shard_world(record);
  return in;
}

// Note [Projected memory]: what the promise holds beyond the formulas of Note [Model-state
// memory], by category; nothing for an optimizer without a formula.
reports::NamedValues<int64_t> transient_model_state(const reports::RunRecord& record,
                                                    const reports::NamedValues<int64_t>& promised,
                                                    int world) {
  const reports::OptimizerInfo& optimizer = record.config.optimizer;
  const auto k = reports::optimizer_state_bytes_per_parameter(
      optimizer.name, optimizer.extra.value.value("momentum", 0.0));
  if (!k) return {};
  const auto formula =
      reports::expected_model_state(record.design, record.workload.parameters, world, *k);
  reports::NamedValues<int64_t> out;
  for (const auto& [category, bytes] : promised) {
    // A category the formula gives nothing (a record without its optimizer's momentum) is not
    // read as transient.
    const int64_t expected = reports::named_value(formula, category);
    if (expected > 0 && bytes > expected) out.emplace_back(category, bytes - expected);
  }
  return out;
}

// Note [Projected memory]: rank 0's peak and what its design promised, when the record says.
std::optional<MemoryBasis> memory_basis(const reports::RunRecord& record) {
  if (record.memory.empty()) return std::nullopt;
  const reports::MemoryUse& m = record.memory.front();
  if (!m.expected_by_category || !m.by_category) return std::nullopt;
  const int world = shard_world(record);  // what the promise divided by
  return MemoryBasis{static_cast<double>(m.peak_bytes),
                     static_cast<double>(reports::named_value(*m.by_category, "activations")),
                     *m.expected_by_category,
                     world,
                     record.workload.parameters,
                     transient_model_state(record, *m.expected_by_category, world)};
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
        "timings), an FSDP record (units) or a DP record (byte counts): a run of a design whose "
        "gradients meet in an AllReduce or a reduce, or whose parameters are sharded",
        name, design.label, design.gradient_op.empty() ? "no collective" : design.gradient_op));
  }
  DesignBasis d;
  d.design = design;
  d.run = name;
  d.world_size = static_cast<int>(record.config.world_size);
  d.per_device_batch = per_device_batch(record);
  d.step_ms = record.summary.step_time_ms.median;
  // Note [Gradient models]: an AllReduce's record with units and no buckets is FSDP's no_shard.
  const auto& comm = record.summary.comm;
  const bool buckets = comm && comm->buckets && !comm->buckets->empty();
  if (*model == GradientModel::DeviceZeroReduce)
    d.inputs = reduce_inputs(record, design.label, name);
  else if (*model == GradientModel::UnitSchedule || (!buckets && has_units(record)))
    d.inputs = unit_inputs(record, design.label, name);
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
  if (const auto* in = std::get_if<UnitInputs>(&d.inputs)) return in->forward_ms + in->backward_ms;
  return std::get<ReduceInputs>(d.inputs).replica_ms;
}

// Note [Topology]: where no unit is free for the collectives, they take turns with compute and
// all of them add to the step, slowed like compute by the sharing; unless they cross nodes,
// where the network link, not the shared units, sets their pace. The factor their time is
// slowed by; nullopt where they overlap compute.
std::optional<double> turns_with_compute(const Topology& topo, int devices, const Scales& s) {
  if (!topo.comm_shares_compute || topo.compute_slots <= 0 || devices < topo.compute_slots)
    return std::nullopt;
  return topo.nodes(devices) > 1 ? 1.0 : s.slots;
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
  if (const auto slowed = turns_with_compute(topo, devices, s))
    p.comm_ms = p.exposed_ms = (pipe.comm_ms + gather) * *slowed;
  p.step_ms = in.data_ms * s.batch + in.forward_ms * s.compute() + backward + p.exposed_ms +
              in.optimizer_ms * optimizer_share * s.device * s.slots;
  finish_point(p, devices > 1 ? project_allreduce(b, d, in, topo, 1, scale).step_ms : p.step_ms,
               devices, projected_batch(d.per_device_batch, scale));
  return p;
}

// Note [Unit schedule]'s compute and communication streams, on one clock from forward's start.
struct UnitStreams {
  double clock = 0, compute = 0;   // the compute stream: where it is, and its busy time
  double comm_free = 0, comm = 0;  // the communication stream: when it is free, its busy time
  // A collective of `ms` issued now (at the compute stream's clock); returns when it completes.
  double issue(double ms) {
    comm_free = std::max(clock, comm_free) + ms;
    comm += ms;
    return comm_free;
  }
  void wait(double done) { clock = std::max(clock, done); }
  void run(double ms) { clock += ms, compute += ms; }
};

// Each unit's gather, issued at most once (a prefetched unit's own gather is a no-op).
struct UnitGathers {
  const std::vector<UnitCost>& units;
  std::vector<std::optional<double>> done = std::vector<std::optional<double>>(units.size());
  void issue(UnitStreams& s, size_t i) {
    if (!done[i]) done[i] = s.issue(units[i].gather_ms);
  }
};

void run_unit_forward(UnitStreams& s, const std::vector<UnitCost>& units,
                      const std::optional<UnitCost>& root, bool prefetch) {
  UnitGathers gathers{units};
  if (root) {
    const double root_done = s.issue(root->gather_ms);
    if (prefetch && !units.empty()) gathers.issue(s, 0);
    s.wait(root_done);
  }
  for (size_t i = 0; i < units.size(); ++i) {
    gathers.issue(s, i);
    if (prefetch && i + 1 < units.size()) gathers.issue(s, i + 1);
    s.wait(*gathers.done[i]);
    s.run(units[i].forward_ms);
  }
  if (root) s.run(root->forward_ms);  // the head
}

// Backward in reverse order; returns when each unit's reduce-scatter completes (the root's last).
std::vector<double> run_unit_backward(UnitStreams& s, const std::vector<UnitCost>& units,
                                      const std::optional<UnitCost>& root,
                                      const UnitScheduleOptions& o) {
  UnitGathers gathers{units};
  std::vector<double> reduced(units.size());
  if (root) s.run(root->backward_ms);  // the head's backward comes first
  for (size_t k = units.size(); k-- > 0;) {
    if (o.regather_backward) {
      gathers.issue(s, k);
      if (o.backward_prefetch && k > 0) gathers.issue(s, k - 1);
      s.wait(*gathers.done[k]);
    }
    s.run(units[k].backward_ms);
    reduced[k] = s.issue(units[k].reduce_scatter_ms);
  }
  if (root) reduced.push_back(s.issue(root->reduce_scatter_ms));
  return reduced;
}

}  // namespace

UnitScheduleResult simulate_unit_schedule(const std::vector<UnitCost>& units,
                                          const std::optional<UnitCost>& root,
                                          const UnitScheduleOptions& options) {
  UnitStreams s;
  run_unit_forward(s, units, root, options.forward_prefetch);
  const std::vector<double> reduced = run_unit_backward(s, units, root, options);
  UnitScheduleResult r;
  r.compute_end_ms = s.clock;
  // The replicate group's all-reduces: issued after backward in unit order, the root last, each
  // once its reduce-scatter completed, one at a time on the replicate group's stream.
  double replicate_free = s.clock, replicate = 0;
  for (size_t i = 0; i < reduced.size(); ++i) {
    const double ms = i < units.size() ? units[i].allreduce_ms : root->allreduce_ms;
    replicate_free = std::max(replicate_free, reduced[i]) + ms;
    replicate += ms;
  }
  r.comm_ms = s.comm + replicate;
  r.end_ms = std::max({s.comm_free, replicate_free, s.clock});
  r.exposed_ms = r.end_ms - s.compute;
  return r;
}

namespace {

// The group sizes of Note [Unit schedule] at `devices`.
struct UnitGroups {
  int shard = 1, replicate = 1;
};

UnitGroups unit_groups(ShardGroup group, int devices, const Topology& topo) {
  switch (group) {
    case ShardGroup::World:
      return {devices, 1};
    case ShardGroup::One:
      return {1, devices};
    case ShardGroup::Node: {
      const int shard = std::min(devices, topo.node_size);
      return {shard, (devices + shard - 1) / shard};
    }
  }
  return {devices, 1};
}

// `unit` at `devices`: its share of the compute (scaled), its collectives on `topo`.
UnitCost unit_cost(const UnitSize& unit, const UnitInputs& in, double parameters, double scale,
                   const UnitGroups& g, const Topology& topo) {
  const double share = parameters > 0 ? unit.parameters / parameters : 0;
  UnitCost c;
  c.forward_ms = in.forward_ms * share * scale;
  c.backward_ms = in.backward_ms * share * scale;
  c.gather_ms = all_gather_ms(unit.bytes, g.shard, topo);
  c.reduce_scatter_ms = reduce_scatter_ms(unit.bytes, g.shard, topo);
  if (g.replicate > 1) {
    // One rank of each shard group: consecutive ranks within a node (no_shard), or one a node
    // (hybrid_shard), each rank of a node in its own group on its share of the node's link.
    Topology across = topo;
    if (g.shard > 1) across.node_size = 1;
    c.allreduce_ms = allreduce_ms(unit.bytes / g.shard, g.replicate, across);
  }
  return c;
}

// nccl-tests' bus bytes of one step's collectives: (p-1)/p of each all-gather and
// reduce-scatter, 2(r-1)/r of each all-reduce.
double unit_bus_bytes(const UnitInputs& in, const UnitGroups& g) {
  const double gather = static_cast<double>(g.shard - 1) / g.shard;
  const double reduce = 2.0 * (g.replicate - 1) / g.replicate;
  double bytes = 0;
  const auto add = [&](const UnitSize& u, int gathers) {  // and one reduce-scatter
    bytes += u.bytes * gather * (gathers + 1) + u.bytes / g.shard * reduce;
  };
  for (const UnitSize& u : in.units) add(u, in.regather_backward ? 2 : 1);
  if (in.root) add(*in.root, 1);
  return bytes;
}

DesignPoint project_units(const ProjectionBasis& b, const DesignBasis& d, const UnitInputs& in,
                          const Topology& topo, int devices, const ProjectionScale& scale) {
  const Scales s = scales_for(d.per_device_batch, design_compute_rate(b, d, topo, scale).scale,
                              topo, devices, scale);
  const UnitGroups g = unit_groups(in.shard_group, devices, topo);
  double parameters = in.root ? in.root->parameters : 0;
  for (const UnitSize& u : in.units) parameters += u.parameters;
  std::vector<UnitCost> units;
  for (const UnitSize& u : in.units)
    units.push_back(unit_cost(u, in, parameters, s.compute(), g, topo));
  std::optional<UnitCost> root;
  if (in.root) root = unit_cost(*in.root, in, parameters, s.compute(), g, topo);
  const UnitScheduleResult r = simulate_unit_schedule(
      units, root, {in.regather_backward, in.forward_prefetch, in.backward_prefetch});
  DesignPoint p;
  p.comm_ms = r.comm_ms;
  p.exposed_ms = r.exposed_ms;
  if (const auto slowed = turns_with_compute(topo, devices, s))
    p.comm_ms = p.exposed_ms = r.comm_ms * *slowed;
  p.busbw_GBps = r.comm_ms > 0 ? unit_bus_bytes(in, g) / (r.comm_ms * 1e6) : 0;
  // Note [Sharded steps]: the optimizer over this device's share; no gather after it.
  const double optimizer_share =
      in.optimizer_shards > 0 ? static_cast<double>(in.optimizer_shards) / devices : 1.0;
  p.step_ms = in.data_ms * s.batch + (in.forward_ms + in.backward_ms) * s.compute() + p.exposed_ms +
              in.optimizer_ms * optimizer_share * s.device * s.slots;
  finish_point(p, devices > 1 ? project_units(b, d, in, topo, 1, scale).step_ms : p.step_ms,
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
  else if (const auto* units = std::get_if<UnitInputs>(&d.inputs))
    p = project_units(b, d, *units, topo, devices, scale);
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
  // The formulas' part scales with N; the transient part is the units' size at any N.
  reports::NamedValues<int64_t> formula = m.model_state;
  for (auto& [category, bytes] : formula) bytes -= reports::named_value(m.transient, category);
  parts.model_state = static_cast<double>(reports::total_bytes(reports::model_state_at_world(
                                              d.design, formula, m.world_size, devices)) +
                                          reports::total_bytes(m.transient));
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

// What the scans of `d` find: the question its model answers (the AllReduce and unit models: how
// far it keeps scaling; the reduce model, which runs on one node: where it stops gaining).
reports::DesignLimits design_limits(const ProjectionBasis& b, const DesignBasis& d,
                                    const Topology& topo, int most, const ProjectionScale& scale) {
  reports::DesignLimits limits;
  if (!std::holds_alternative<ReduceInputs>(d.inputs)) {
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
