// `ddpbench project`: a what-if model calibrated on measured runs. Each design is projected
// by the model of how its gradients meet (Note [Gradient models]): from a run of a design whose
// gradients meet in an AllReduce it takes the phase times and each bucket's ready time and
// bytes; from one that shards its parameters (FSDP), its phase times and its units' sizes; from
// one whose gradients meet in a reduce on device 0, its phase times and the bytes device 0
// moves. Then it replays each design at other device counts on a topology
// (bench/project/cost_model.h), its compute at the topology's device rate
// (bench/project/compute_rate.h). The model and its validation are in docs/metrics.md
// ("Projection"); the output's schema is reports/schema/projection.schema.json.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/design_info.h"
#include "reports/projection_record.h"
#include "reports/run_record.h"

#include "bench/project/compute_rate.h"
#include "bench/project/cost_model.h"

namespace ddpb::bench {

// Note [Gradient models]
// ~~~~~~~~~~~~~~~~~~~~~~
// The projection models how a design's gradients meet, not the design: the design's row names
// the collective (DesignInfo::gradient_op, which every record carries) and the collective picks
// the model, but for a design whose parameters meet too.
//   * a design that shards its parameters (the trait shards_parameters: FSDP's sharded
//     strategies): the unit model (Note [Unit schedule]), whatever its gradient collective. It
//     takes the run's phases and its units (mode.details.units). A record of a design whose
//     gradients meet in an AllReduce that has units and no buckets (FSDP's no_shard) takes it
//     too, with the all-reduces over its replicate group.
//   * "allreduce": the bucketed AllReduce model (Note [Bucket pipeline]): buckets of gradients,
//     each AllReduced once ready while backward runs, or, for a design whose communication does
//     not overlap backward (the trait overlaps_backward), all of them after it. It takes the
//     run's phases and each bucket's ready time and bytes (summary.comm.buckets).
//   * "reduce_scatter": the same bucket pipeline with each bucket reduce-scattered (ZeRO's
//     stages), the optimizer over 1/N of the parameters (Note [Sharded steps]).
//   * "reduce": the device-0 reduce model (Note [DP device-0 traffic]): one process on one
//     node, device 0 scattering inputs and parameters and gathering outputs and gradients. It
//     takes the run's phases and the bytes device 0 moves (steps[].mode.unit_bytes).
// A design whose gradients meet in no collective (single) or in one without a model is not
// projected. Results are keyed by the design's name (Note [Designs keyed by name]), so two
// designs of one collective are both projected, each from its own runs.
enum class GradientModel {
  BucketedAllReduce,
  BucketedReduceScatter,
  DeviceZeroReduce,
  UnitSchedule
};

// The model of `design`'s gradients; nullopt when the projection has none.
std::optional<GradientModel> gradient_model(const reports::DesignInfo& design);

struct BucketTiming {
  double ready_ms = 0;  // the bucket's last gradient was ready, from the start of backward
  double bytes = 0;
};

// Note [Sharded steps]
// ~~~~~~~~~~~~~~~~~~~~
// A design that shards the optimizer state (the trait shards_optimizer_state) steps 1/N of the
// parameters on each of N devices: its measured optimizer phase, of 1/world_size, is projected
// at world_size/N of itself. Its parameters then meet again after the step, fully exposed: an
// AllGather of the fp32 parameters (its phase param_allgather: ZeRO's scheme) or every owner's
// broadcast of its share (param_broadcast: PyTorch's ZeroRedundancyOptimizer), costed by
// cost_model.h on the topology, not measured.
enum class ParameterGather { None, AllGather, Broadcast };

// What the bucketed models take from one measured run (its median step).
struct AllReduceInputs {
  double data_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  std::vector<BucketTiming> buckets;
  // Note [Sharded steps]: the measured optimizer stepped 1/optimizer_shards of the parameters
  // (the run's world size); 0: the design does not shard its optimizer.
  int optimizer_shards = 0;
  ParameterGather gather = ParameterGather::None;
  double parameter_bytes = 0;  // what the gather moves: the fp32 parameters
};

// Note [Unit schedule]
// ~~~~~~~~~~~~~~~~~~~~
// FSDP's projection replays its per-unit schedule over the fitted link: all-gathers overlapped
// with forward and backward, reduce-scatters with backward (Note [FSDP's step] in
// impl_fsdp/fully_sharded_data_parallel.h). From the run's median step it takes data, forward
// (compute; with buffer_broadcast and sync_bn, as the bucket model does), backward_compute and
// optimizer; from mode.details the units in forward order with their padded sizes (the last,
// when it is named "root", is the root), the strategy, and whether forward and backward
// prefetch were on. The measured gather waits (param_allgather) and tail (comm_exposed) are
// not inputs: they are what the schedule predicts at N.
// At N devices each unit's all-gather and reduce-scatter of its padded fp32 buffer cost what
// cost_model.h gives over the shard group (N for full_shard and shard_grad_op, a node for
// hybrid_shard, one device, free, for no_shard), and its shard's all-reduce what it gives over
// the replicate group (hybrid_shard: one rank a node, on the inter-node link; no_shard: all N).
//   * Compute runs forward over the units in order, then backward in reverse; a unit's compute
//     waits for its gather.
//   * One communication stream runs gathers and reduce-scatters one at a time in issue order.
//     Forward: the root's gather first (the first unit's prefetched behind it when forward
//     prefetch is on), then each unit's gather when compute reaches the unit, and with forward
//     prefetch the next unit's then too, so that it runs under this unit's compute. Backward:
//     full_shard and hybrid_shard gather each unit again when backward reaches it, and with
//     backward prefetch the one before it then too (shard_grad_op kept them from forward).
//     Each unit's reduce-scatter is issued when its backward compute ends; the root's after
//     the last unit's.
//   * The shard's all-reduces (the replicate group's own stream) are issued after backward,
//     each once its unit's reduce-scatter completed, as finish_gradient_sync() does: all of
//     no_shard's are exposed.
// Exposed = the gather waits inside forward and backward plus whatever runs past the end of
// backward compute. Step = data + forward + backward + exposed + optimizer, the optimizer over
// 1/N of the parameters where the design shards its state (Note [Sharded steps]), compute at
// the projected device's rate (Note [Compute rate]); where every compute slot is busy and
// communication shares them (Note [Topology]), all communication is exposed, as in the bucket
// model.
// Approximations: the measured forward and backward are split over the units (the root
// included) in proportion to their parameter counts, which holds for matrix products over the
// same activations, not for a unit of few parameters and much compute (a ResNet's first
// stage); the root's share runs at the end of forward and the start of backward, where a GPT's
// tied head runs (its embedding lookups cost little); the rate limiter (limit_all_gathers) and
// the copies into and out of the flat buffers are left out; a hybrid_shard run measured with
// --shard-group-size is projected with a node as its shard group. Its validation against its
// own runs is in docs/performance.md ("FSDP's projection validation").
enum class ShardGroup { World, Node, One };

struct UnitSize {
  std::string name;
  double parameters = 0;  // its numel: its share of the compute
  double bytes = 0;       // its padded fp32 buffer: what its all-gather and reduce-scatter move
};

// What the unit model takes from one measured run (its median step).
struct UnitInputs {
  double data_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  std::vector<UnitSize> units;    // in forward order, the root left out
  std::optional<UnitSize> root;   // gathered first, kept through backward
  bool regather_backward = true;  // full_shard, hybrid_shard: gathered again for backward
  bool forward_prefetch = true, backward_prefetch = true;
  ShardGroup shard_group = ShardGroup::World;
  int optimizer_shards = 0;  // Note [Sharded steps], as AllReduceInputs's
};

// One unit at N, in ms: its compute and its collectives.
struct UnitCost {
  double forward_ms = 0, backward_ms = 0;
  double gather_ms = 0, reduce_scatter_ms = 0, allreduce_ms = 0;
};
struct UnitScheduleOptions {
  bool regather_backward = true;
  bool forward_prefetch = true, backward_prefetch = true;
};
struct UnitScheduleResult {
  double comm_ms = 0;         // every collective's time, summed
  double compute_end_ms = 0;  // backward's compute ends, waits included, from forward's start
  double end_ms = 0;          // the last collective completes
  double exposed_ms = 0;      // end_ms - the compute: the gather waits and the tail
};
// Note [Unit schedule]'s streams over `units` (in forward order) and the root.
UnitScheduleResult simulate_unit_schedule(const std::vector<UnitCost>& units,
                                          const std::optional<UnitCost>& root,
                                          const UnitScheduleOptions& options);

// Note [Projected memory]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A run's peak per device (rank 0's, over the measured steps) projected to N devices: its
// model state replaced by what the design's formulas give at N (Note [Model-state memory] in
// reports/memory_model.h), its activations scaled with the per-device batch, the rest (buffers,
// the allocator's rounding) kept. The largest model that fits a device of M bytes at N devices
// (--device-memory) scales the whole peak with the parameter count: the model state by the
// formulas, everything else in proportion to the measured model's. Activations grow more
// slowly than the parameters as a family grows wider, so the answer errs small. What a promise
// holds beyond the formulas (FSDP's gathered units and their full gradients:
// ModeRunner::transient_model_state_bytes in bench/run/trainer.h) is the units' size, not a
// share of the model's, so it is kept at every N.
struct MemoryBasis {
  double peak_bytes = 0;
  double activations_bytes = 0;
  reports::NamedValues<int64_t> model_state = {};  // promised at world_size
  int world_size = 1;
  int64_t parameters = 0;
  reports::NamedValues<int64_t> transient = {};  // the part of model_state beyond the formulas
};

// What the device-0 reduce model takes from one measured run.
struct ReduceInputs {
  double data_ms = 0, replica_ms = 0, loss_ms = 0, optimizer_ms = 0;
  double parameter_bytes = 0, buffer_bytes = 0;
  double input_bytes_per_sample = 0, output_bytes_per_sample = 0;
};

// One design's measured run, as its model takes it.
struct DesignBasis {
  reports::DesignInfo design;  // its row: the name its results are keyed by, its label, traits
  std::string run;
  int world_size = 1;
  int64_t per_device_batch = 0;
  double step_ms = 0;  // measured median, for the report
  // Its model's (Note [Gradient models]).
  std::variant<AllReduceInputs, ReduceInputs, UnitInputs> inputs;
  std::optional<MemoryBasis> memory = std::nullopt;  // absent: its record promises none
};

// A preset of the workload's family and its parameter count (the memory fit's candidates).
struct FamilyPreset {
  std::string name;
  int64_t parameters = 0;
};

struct ProjectionBasis {
  std::string workload;
  std::vector<DesignBasis> designs;      // in the order the records list the designs
  std::optional<double> single_step_ms;  // the single-device run (recorded, not the baseline)
  // Note [Compute rate]: the workload's training FLOPs per sample (0: unknown), the runs'
  // precision, and the measured device's own peak (absent: unknown).
  double train_flops_per_sample = 0;
  ops::MathMode precision = ops::MathMode::FP32;
  std::optional<PeakRate> measured_peak;
  // The label of the design whose record read_compute_basis read first; nullopt: none yet.
  std::optional<std::string> compute_read_from;
  std::vector<FamilyPreset> family_presets = {};  // Note [Projected memory]
};

// Reads a run record of `design` (`ddpbench run --out`; `name` names it in errors and in the
// projection). Throws UsageError when the record is not a run, `design` has no gradient model,
// or the record lacks what its model takes (bucket timings, byte counts, units).
DesignBasis design_basis(const reports::RunRecord& record, const reports::DesignInfo& design,
                         const std::string& name);
// Fills the basis's FLOPs per sample, precision and measured peak from one of its records: the
// peak is the record's datasheet peak (summary.mfu, GPU runs) or else `suite_peak`. Every record
// after the first must agree on precision and FLOPs per sample, or UsageError.
void read_compute_basis(ProjectionBasis& b, const reports::RunRecord& record,
                        const std::optional<PeakRate>& suite_peak);

// How the projected devices differ from the measured ones.
struct ProjectionScale {
  int64_t per_device_batch = 0;  // 0: as measured
  // --device-flops: the projected device's sustained training FLOP/s; 0: the topology's
  // device at the measured run's fraction of its peak (Note [Compute rate]).
  double target_flops_per_s = 0;
  // --device-memory: the projected device's memory in bytes, for the largest model that fits
  // (Note [Projected memory]); 0: not asked.
  double device_memory_bytes = 0;
};

// The bucket pipeline (Note [Bucket pipeline]). `collective_ms[i]` is bucket i's AllReduce
// time; buckets launch in index order.
struct PipelineResult {
  double comm_ms = 0;     // sum of the collectives (they run one after another)
  double exposed_ms = 0;  // communication still running after backward ends
  double end_ms = 0;      // when the last collective completes, from backward start
};
PipelineResult simulate_bucket_pipeline(const std::vector<BucketTiming>& buckets,
                                        const std::vector<double>& collective_ms,
                                        double backward_ms);

struct DesignPoint {
  double step_ms = 0;
  double comm_ms = 0;     // the AllReduces (the unit model: all its collectives); the reduce
                          // model: device 0's traffic
  double exposed_ms = 0;  // what the step waits for: after backward; the reduce model: all of it
  double efficiency = 0;  // weak scaling: step at one device / step (Note [Projected efficiency])
  double samples_per_s = 0;
  double busbw_GBps = 0;  // nccl-tests' bus bandwidth of its collectives; the reduce model: 0
  std::optional<double> memory_bytes = {};  // peak per device (Note [Projected memory])
};

// Note [Projected memory]: `d`'s peak per device at `devices`, and the largest model of its
// family that fits `scale.device_memory_bytes` there; nullopt without a memory basis.
std::optional<double> projected_memory(const DesignBasis& d, int devices,
                                       const ProjectionScale& scale);
std::optional<reports::MemoryFit> memory_fit(const ProjectionBasis& b, const DesignBasis& d,
                                             int devices, const ProjectionScale& scale);

// The rate `d`'s compute is projected at on `topo`. Throws UsageError when `topo` names a device
// whose rate cannot be known (Note [Compute rate]).
ComputeRate design_compute_rate(const ProjectionBasis& b, const DesignBasis& d,
                                const Topology& topo, const ProjectionScale& scale);
// `d` at `devices` on `topo`, by its model; nullopt where the model does not run (the device-0
// reduce model beyond the topology's node). Throws as design_compute_rate.
std::optional<DesignPoint> project_design(const ProjectionBasis& b, const DesignBasis& d,
                                          const Topology& topo, int devices,
                                          const ProjectionScale& scale);

// The whole projection of one workload at `devices` (plus the powers of two up to the
// largest, for the chart): every design's points keyed by its name, the crossover, and each
// design's limits (the largest N at >= 90% efficiency; where it stops gaining). `measured` are
// the suite's scaling points to draw beside it (may be empty).
reports::ProjectedWorkload project_workload(const ProjectionBasis& b, const Topology& topo,
                                            const std::vector<int>& devices,
                                            const ProjectionScale& scale,
                                            std::vector<reports::MeasuredPoint> measured);

}  // namespace ddpb::bench
