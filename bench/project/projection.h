// `ddpbench project`: a what-if model calibrated on measured runs. From a DDP run it takes
// the phase times and each bucket's ready time and bytes; from a DP run its phase times and
// the bytes device 0 moves; then it replays both designs at other device counts on a
// topology (bench/project/cost_model.h), its compute at the topology's device rate
// (bench/project/compute_rate.h). The model and its validation are in docs/metrics.md
// ("Projection"); the output's schema is reports/schema/projection.schema.json.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/projection_record.h"
#include "reports/run_record.h"

#include "bench/project/compute_rate.h"
#include "bench/project/cost_model.h"

namespace ddpb::bench {

struct BucketTiming {
  double ready_ms = 0;  // the bucket's last gradient was ready, from the start of backward
  double bytes = 0;
};

// What the DDP model takes from one measured DDP run (its median step).
struct DdpBasis {
  std::string design;  // the measured run's design (its record's "mode")
  std::string run;
  int world_size = 1;
  int64_t per_device_batch = 0;
  double data_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  double step_ms = 0;  // measured median, for the report
  std::vector<BucketTiming> buckets;
};

// What the DP model takes from one measured DP run.
struct DpBasis {
  std::string design;
  std::string run;
  int world_size = 1;
  int64_t per_device_batch = 0;
  double data_ms = 0, replica_ms = 0, loss_ms = 0, optimizer_ms = 0;
  double step_ms = 0;
  double parameter_bytes = 0, buffer_bytes = 0;
  double input_bytes_per_sample = 0, output_bytes_per_sample = 0;
};

struct ProjectionBasis {
  std::string workload;
  std::optional<DdpBasis> ddp;
  std::optional<DpBasis> dp;
  std::optional<double> single_step_ms;  // the single-device run (recorded, not the baseline)
  // Note [Compute rate]: the workload's training FLOPs per sample (0: unknown), the runs'
  // precision, and the measured device's own peak (absent: unknown).
  double train_flops_per_sample = 0;
  ops::MathMode precision = ops::MathMode::FP32;
  std::optional<PeakRate> measured_peak;
  bool compute_read = false;  // read_compute_basis has read a record into it
};

// Reads a DDP or DP run record (`ddpbench run --out`). Throws UsageError when the record is
// not a DP or DDP run, or a DDP record has no bucket timings (summary.comm.buckets).
DdpBasis ddp_basis(const reports::RunRecord& record, const std::string& name);
DpBasis dp_basis(const reports::RunRecord& record, const std::string& name);
// Fills the basis's FLOPs per sample, precision and measured peak from one of its records: the
// peak is the record's datasheet peak (summary.mfu, GPU runs) or else `suite_peak`.
void read_compute_basis(ProjectionBasis& b, const reports::RunRecord& record,
                        const std::optional<PeakRate>& suite_peak);

// How the projected devices differ from the measured ones.
struct ProjectionScale {
  int64_t per_device_batch = 0;  // 0: as measured
  // --device-flops: the projected device's sustained training FLOP/s; 0: the topology's
  // device at the measured run's fraction of its peak (Note [Compute rate]).
  double target_flops_per_s = 0;
};

// The DDP bucket pipeline (Note [Bucket pipeline]). `collective_ms[i]` is bucket i's
// AllReduce time; buckets launch in index order.
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
  double comm_ms = 0;     // DDP: AllReduce; DP: device-0 traffic
  double exposed_ms = 0;  // DDP: after backward; DP: all of it
  double efficiency = 0;  // weak scaling: step at one device / step (Note [Projected efficiency])
  double samples_per_s = 0;
  double busbw_GBps = 0;  // DDP: nccl-tests' bus bandwidth of its AllReduces; DP: 0
};

// One design at `devices` on `topo`; DP returns nullopt beyond the topology's node. Throws
// UsageError when `topo` names a device whose rate cannot be known (Note [Compute rate]).
ComputeRate ddp_compute_rate(const ProjectionBasis& b, const Topology& topo,
                             const ProjectionScale& scale);
ComputeRate dp_compute_rate(const ProjectionBasis& b, const Topology& topo,
                            const ProjectionScale& scale);
DesignPoint project_ddp(const ProjectionBasis& b, const Topology& topo, int devices,
                        const ProjectionScale& scale);
std::optional<DesignPoint> project_dp(const ProjectionBasis& b, const Topology& topo, int devices,
                                      const ProjectionScale& scale);

// The whole projection of one workload at `devices` (plus the powers of two up to the
// largest, for the chart): points, crossover, DDP's largest N at >= 90% efficiency, where DP
// stops gaining. `measured` are the suite's scaling points to draw beside it (may be empty).
reports::ProjectedWorkload project_workload(const ProjectionBasis& b, const Topology& topo,
                                            const std::vector<int>& devices,
                                            const ProjectionScale& scale,
                                            std::vector<reports::MeasuredPoint> measured);

}  // namespace ddpb::bench
