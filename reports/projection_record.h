// The projection record (`ddpbench project --json`, suite.json's "projection";
// reports/schema/projection.schema.json, docs/metrics.md "Projection") as types: the
// projection (bench/project/) fills a ProjectionRecord, the report's projection section and
// the CLI's table read it. JSON both ways through one field list per type (Note [One field
// list per record type]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/design_info.h"
#include "reports/json_io.h"
#include "reports/record_fields.h"
#include "reports/run_record.h"

namespace ddpb::reports {

// A link of the α–β model: a message of n bytes takes alpha_us + n / bandwidth.
struct LinkInfo {
  static constexpr bool kRecord = true;
  double alpha_us = 0, bandwidth_GBps = 0;
  bool operator==(const LinkInfo&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("alpha_us", s.alpha_us), v("bandwidth_GBps", s.bandwidth_GBps);
  }
};

// The device class a topology's nodes hold (Note [Compute rate] in bench/project/compute_rate.h):
// a name in the datasheet table (bench/measure/mfu.h) or a peak given outright.
struct TopologyDeviceInfo {
  static constexpr bool kRecord = true;
  std::string name;
  std::optional<double> peak_flops_per_s;  // absent: the datasheet's at the run's precision
  std::optional<std::string> source;
  bool operator==(const TopologyDeviceInfo&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("peak_flops_per_s", s.peak_flops_per_s), v("source", s.source);
  }
};

// The topology a projection ran on (Note [Topology] in bench/project/cost_model.h).
struct TopologyInfo {
  static constexpr bool kRecord = true;
  std::string name, source;
  int64_t node_size = 1;
  LinkInfo intra;
  std::optional<LinkInfo> inter, copy, reduce_add;
  int64_t compute_slots = 0;
  bool comm_shares_compute = false;
  std::optional<double> compute_contention;
  // Note [One ring across nodes] (bench/project/cost_model.h): present, and true, only for a
  // topology of one ring, so that records written before it read back unchanged.
  std::optional<bool> one_ring = {};
  std::optional<TopologyDeviceInfo> device;  // absent: the measured device computes
  // Note [Links by collective] (bench/project/cost_model.h): absent, intra prices them.
  std::optional<LinkInfo> all_gather = {}, reduce_scatter = {};
  bool operator==(const TopologyInfo&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("source", s.source), v("node_size", s.node_size), v("intra", s.intra),
        v("inter", s.inter), v("copy", s.copy), v("reduce_add", s.reduce_add),
        v("compute_slots", s.compute_slots), v("comm_shares_compute", s.comm_shares_compute),
        v("compute_contention", s.compute_contention), v("one_ring", s.one_ring),
        v("device", s.device), v("all_gather", s.all_gather), v("reduce_scatter", s.reduce_scatter);
  }
};

struct ProjectionScaleInfo {
  static constexpr bool kRecord = true;
  int64_t per_device_batch = 0;   // 0: as measured
  double target_flops_per_s = 0;  // --device-flops; 0: the topology's device (Note [Compute rate])
  std::optional<double> device_memory_bytes = {};  // --device-memory
  bool operator==(const ProjectionScaleInfo&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("per_device_batch", s.per_device_batch), v("target_flops_per_s", s.target_flops_per_s);
    v("device_memory_bytes", s.device_memory_bytes);
  }
};

// The largest model of the workload's family one design fits on a device of
// --device-memory bytes at `devices` (Note [Projected memory] in bench/project/projection.h).
struct MemoryFit {
  static constexpr bool kRecord = true;
  int64_t devices = 1;
  double bytes_per_parameter = 0;  // the peak per device over the parameter count, there
  int64_t max_parameters = 0;
  std::optional<std::string> largest_preset = {};  // the family's largest preset within it
  std::optional<int64_t> largest_preset_parameters = {};
  bool operator==(const MemoryFit&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("devices", s.devices), v("bytes_per_parameter", s.bytes_per_parameter),
        v("max_parameters", s.max_parameters), v("largest_preset", s.largest_preset),
        v("largest_preset_parameters", s.largest_preset_parameters);
  }
};

// Note [Designs keyed by name]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The projection is of designs, and a design is its name (Note [Designs in records]): every
// per-design value of the record (a point's results, the basis runs, the compute rates, the
// scans' limits, the validation's median errors) is an object keyed by the design's name, and
// the record carries the rows of the designs it projects ("designs"), so that the report and the
// CLI label them from the data. A design absent at a point (one that runs on one node, beyond
// it) is absent from that point's object. The keys are kept in the order a JSON object keeps
// them (put_named), so that a record read back equals the one written; the order the designs
// are shown in is the order of "designs".

// The value named `name` in `values`, or nullptr.
template <class T>
const T* find_named(const NamedValues<T>& values, std::string_view name) {
  for (const auto& [key, value] : values)
    if (key == name) return &value;
  return nullptr;
}

// Puts `value` under `name` (replacing one there), the keys in JSON's order (Note [Designs
// keyed by name]).
template <class T>
void put_named(NamedValues<T>& values, const std::string& name, T value) {
  auto it = values.begin();
  while (it != values.end() && it->first < name) ++it;
  if (it != values.end() && it->first == name)
    it->second = std::move(value);
  else
    values.emplace(it, name, std::move(value));
}

// One design at one device count.
struct ProjectedDesign {
  static constexpr bool kRecord = true;
  double step_ms = 0, comm_ms = 0, exposed_ms = 0, overlap_ratio = 0, efficiency = 0,
         samples_per_s = 0;
  std::optional<double> busbw_GBps;         // the AllReduce model's bus bandwidth
  std::optional<double> memory_bytes = {};  // peak per device (Note [Projected memory])
  bool operator==(const ProjectedDesign&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("step_ms", s.step_ms), v("comm_ms", s.comm_ms), v("exposed_ms", s.exposed_ms),
        v("overlap_ratio", s.overlap_ratio), v("efficiency", s.efficiency),
        v("samples_per_s", s.samples_per_s), v("busbw_GBps", s.busbw_GBps);
    v("memory_bytes", s.memory_bytes);
  }
};

struct ProjectedPoint {
  static constexpr bool kRecord = true;
  int64_t devices = 1;
  NamedValues<ProjectedDesign> designs = {};  // by name; a design that does not run here: absent
  bool operator==(const ProjectedPoint&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("devices", s.devices), v("designs", s.designs);
  }
  const ProjectedDesign* design(std::string_view name) const { return find_named(designs, name); }
};

// The measured run a design's model is calibrated on.
struct BasisRun {
  static constexpr bool kRecord = true;
  std::string run;
  int64_t per_device_batch = 0;
  bool operator==(const BasisRun&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("run", s.run), v("per_device_batch", s.per_device_batch);
  }
};

struct ProjectionBasisInfo {
  static constexpr bool kRecord = true;
  NamedValues<BasisRun> designs = {};  // by name
  std::optional<double> single_step_ms;
  bool operator==(const ProjectionBasisInfo&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("designs", s.designs), v("single_step_ms", s.single_step_ms);
  }
};

// A measured scaling point drawn beside the projection.
struct MeasuredPoint {
  static constexpr bool kRecord = true;
  std::string mode;  // the design's name
  int64_t devices = 1;
  std::string run;
  double step_ms = 0;
  std::optional<double> efficiency;
  bool operator==(const MeasuredPoint&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("mode", s.mode), v("devices", s.devices), v("run", s.run), v("step_ms", s.step_ms),
        v("efficiency", s.efficiency);
  }
};

// The rate one design's forward and backward were projected at (Note [Compute rate]).
struct ComputeRateInfo {
  static constexpr bool kRecord = true;
  std::string source;                      // where the rate comes from, in words
  std::optional<double> flops_per_s;       // training FLOP/s per device; absent: not known
  std::optional<double> peak_flops_per_s;  // the projected device's peak (a datasheet rate)
  std::optional<double> fraction;          // of it, what the measured run reached of its own
  bool operator==(const ComputeRateInfo&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("source", s.source), v("flops_per_s", s.flops_per_s);
    v("peak_flops_per_s", s.peak_flops_per_s), v("fraction", s.fraction);
  }
};

// Each design's rate, by name.
using ComputeRates = NamedValues<ComputeRateInfo>;

// What the scan of one design's projection found (bench/project/projection.h): which keys a
// design has depends on its model (Note [Gradient models]).
struct DesignLimits {
  static constexpr bool kRecord = true;
  // The largest N up to which it keeps >= 90% efficiency (the bucketed AllReduce model).
  std::optional<int64_t> max_devices_at_90pct;
  // The N after which one more device no longer raises its samples/s; null: it keeps gaining
  // (the device-0 reduce model).
  std::optional<Nullable<int64_t>> stops_gaining_at;
  // The most devices it runs on, one node (the device-0 reduce model).
  std::optional<int64_t> max_devices;
  bool operator==(const DesignLimits&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("max_devices_at_90pct", s.max_devices_at_90pct), v("stops_gaining_at", s.stops_gaining_at),
        v("max_devices", s.max_devices);
  }
};

// The smallest device count at which the faster design changes.
struct Crossover {
  static constexpr bool kRecord = true;
  int64_t devices = 2;
  std::string faster;  // the design's name
  bool operator==(const Crossover&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("devices", s.devices), v("faster", s.faster);
  }
};

struct ProjectedWorkload {
  static constexpr bool kRecord = true;
  std::string workload;
  ProjectionBasisInfo basis;
  std::vector<ProjectedPoint> points;
  std::vector<MeasuredPoint> measured;
  Nullable<Crossover> crossover;
  NamedValues<DesignLimits> limits = {};            // by name
  std::optional<ComputeRates> compute_rate;         // by name
  std::optional<NamedValues<MemoryFit>> fits = {};  // by name; with --device-memory
  bool operator==(const ProjectedWorkload&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("workload", s.workload), v("basis", s.basis), v("points", s.points),
        v("measured", s.measured), v("crossover", s.crossover), v("limits", s.limits),
        v("compute_rate", s.compute_rate), v("fits", s.fits);
  }
};

// The suite's check of the model against its own runs at world size > 1.
struct ValidationRun {
  static constexpr bool kRecord = true;
  std::string run;
  std::string mode;  // the design's name
  int64_t devices = 2;
  double measured_ms = 0, predicted_ms = 0, error = 0;  // error: predicted / measured - 1
  std::optional<std::string> workload;
  bool operator==(const ValidationRun&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("run", s.run), v("mode", s.mode), v("devices", s.devices), v("measured_ms", s.measured_ms),
        v("predicted_ms", s.predicted_ms), v("error", s.error), v("workload", s.workload);
  }
};

// Each projected design's median |predicted / measured - 1|, by name; null: no run of it to
// check.
using MedianAbsError = NamedValues<Nullable<double>>;

struct ProjectionValidation {
  static constexpr bool kRecord = true;
  std::string topology, basis;
  std::optional<std::string> oversubscribed;  // CPU world sizes above the core count
  std::vector<ValidationRun> runs;
  MedianAbsError median_abs_error;
  // A design's projection of a workload is unvalidated where one of its runs missed by more
  // than this (|error| > tolerance; Note [Validation tolerance] in
  // bench/project/suite_projection.h).
  std::optional<double> tolerance;
  bool operator==(const ProjectionValidation&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("topology", s.topology), v("basis", s.basis), v("oversubscribed", s.oversubscribed),
        v("runs", s.runs), v("median_abs_error", s.median_abs_error), v("tolerance", s.tolerance);
  }
};

struct ProjectionRecord {
  static constexpr bool kRecord = true;
  int64_t schema_version = kSchemaVersion;
  std::string implementation = "ddpbench";
  std::string kind = "projection";
  std::string source;          // the results folder or record projected from
  std::string device = "cpu";  // the measured runs' device kind
  // The rows of the designs it projects (Note [Designs keyed by name]), in the order the
  // suite or the run record lists them.
  std::vector<DesignInfo> designs = {};
  TopologyInfo topology;
  std::vector<int64_t> devices;
  ProjectionScaleInfo scale;
  std::vector<ProjectedWorkload> workloads;
  std::optional<ProjectionValidation> validation;  // the suite's check of the model, carried over
  bool operator==(const ProjectionRecord&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("schema_version", s.schema_version), v("implementation", s.implementation), v("kind", s.kind),
        v("source", s.source), v("device", s.device), v("designs", s.designs),
        v("topology", s.topology), v("devices", s.devices), v("scale", s.scale),
        v("workloads", s.workloads), v("validation", s.validation);
  }

  // The row of the design named `name`; for a name it does not list (a hand-edited record), a
  // row whose label is the name.
  DesignInfo design_named(std::string_view name) const { return design_or_name(designs, name); }

  nlohmann::json to_json() const { return record_to_json(*this); }
  static ProjectionRecord from_json(const nlohmann::json& j) {
    return record_from_json<ProjectionRecord>(j);
  }
};

}  // namespace ddpb::reports
