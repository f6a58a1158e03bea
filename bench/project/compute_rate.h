// The compute rate of a projection: what the projected devices' forward and backward take,
// against what the measured ones took (bench/project/projection.h).
//
// Note [Compute rate]
// ~~~~~~~~~~~~~~~~~~~
// A projection onto the measured device (the `measured` topology, or a topology file without a
// device) keeps the measured compute times. A topology that names another device class
// (every preset: Note [Topology presets]) puts compute at that device's rate, one of:
//   * --device-flops R: the projected device sustains R training FLOP/s per device, so one
//     device's forward and backward take FLOPs per step / R;
//   * by default, the device's dense datasheet peak P at the run's precision times the fraction
//     f of its own peak the measured run reached: f = (FLOPs per step / measured forward and
//     backward) / the measured device's peak (its datasheet peak for a GPU, from the record's
//     MFU; else the suite's measured GEMM peak). f is at most 1: a run above its own peak means
//     the peak was measured low, and a projection must not put a device above its datasheet.
// FLOPs per step are the workload's training FLOPs per sample (Model::train_flops_per_sample,
// record.workload) times the per-device batch. Whatever the rate, the design's other compute
// (optimizer, DP's loss) scales by the same factor as its forward and backward. When no rate
// can be known (no FLOPs per sample, or no peak of the measured device), the projection is
// refused in one line naming --device-flops: a CPU's time is never printed on a GPU topology.
#pragma once

#include <optional>
#include <string>

#include "core/ops.h"
#include "reports/projection_record.h"

#include "bench/project/cost_model.h"

namespace ddpb::bench {

struct PeakRate {
  double flops_per_s = 0;
  std::string source;  // e.g. "NVIDIA H200 SXM datasheet, dense bf16"
};

// What one design's measured compute was.
struct MeasuredCompute {
  double flops_per_step = 0;     // one device's training FLOPs per step; 0: unknown
  double compute_ms = 0;         // its measured forward and backward
  std::optional<PeakRate> peak;  // the measured device's own peak
  ops::MathMode precision = ops::MathMode::FP32;
};

struct ComputeRate {
  double scale = 1;  // projected compute time / measured, at the measured batch
  reports::ComputeRateInfo info;
};

// The rate of a design measured as `m`, projected on `topo`; `given_flops_per_s` > 0 is
// --device-flops. `what` names the design's run in errors. Throws UsageError (one line, naming
// --device-flops) when `topo` names another device class and no rate can be known.
ComputeRate compute_rate(const MeasuredCompute& m, const Topology& topo, double given_flops_per_s,
                         const std::string& what);

// The dense peak of `device` at `precision`: its own, or its datasheet's (nullopt for a name
// the datasheet table does not know).
std::optional<PeakRate> device_peak(const TopologyDevice& device, ops::MathMode precision);

}  // namespace ddpb::bench
