// The suite record (`ddpbench suite --out DIR`: DIR/suite.json, reports/schema/suite.schema.json,
// docs/suite-format.md) as types: the suite fills a SuiteRecord, the report's views, the
// verdict and the projection read it. JSON both ways through one field list per type (Note
// [One field list per record type]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/projection_record.h"
#include "reports/record_fields.h"
#include "reports/run_record.h"

namespace ddpb::reports {

// Why a run is in the suite (docs/suite-format.md, "Groups").
enum class RunGroup {
  Scaling,
  Reference,
  BucketSweep,
  BucketAutotune,
  Overlap,
  CommHook,
  Precision,
  Explicit,  // a run the suite file names itself (key "runs")
  Loader,    // the input pipeline on files (loader_workers)
  Flags,     // DDP's flags, each against the default in alternated runs (the cost ledger)
  Rounds,    // the parallel designs again at the largest world size, in alternated rounds
  Sharding   // DDP and its ZeRO stages on the sweep workload, in alternated rounds
};
constexpr NameTable<RunGroup, 12> enum_names(RunGroup) {
  return {{{"scaling", RunGroup::Scaling},
           {"reference", RunGroup::Reference},
           {"bucket_sweep", RunGroup::BucketSweep},
           {"bucket_autotune", RunGroup::BucketAutotune},
           {"overlap", RunGroup::Overlap},
           {"comm_hook", RunGroup::CommHook},
           {"precision", RunGroup::Precision},
           {"explicit", RunGroup::Explicit},
           {"loader", RunGroup::Loader},
           {"flags", RunGroup::Flags},
           {"rounds", RunGroup::Rounds},
           {"sharding", RunGroup::Sharding}}};
}

// What a run of group "flags" changes from its design's defaults: the flag's name (a row of
// bench/suite/design_flags.h; "default": the A run of every pair) and one sentence on what it
// changes in the step. The record carries the sentence so that reports/flag_ledger.h prices
// and explains a flag from the record alone (Note [Design flags]).
struct FlagInfo {
  static constexpr bool kRecord = true;
  static constexpr std::string_view kDefault = "default";
  std::string name = {}, mechanism = {};
  bool operator==(const FlagInfo&) const = default;
  bool is_default() const { return name == kDefault; }
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("mechanism", s.mechanism);
  }
};

enum class RunStatus { Ok, Failed, Pending, Interrupted };
constexpr NameTable<RunStatus, 4> enum_names(RunStatus) {
  return {{{"ok", RunStatus::Ok},
           {"failed", RunStatus::Failed},
           {"pending", RunStatus::Pending},
           {"interrupted", RunStatus::Interrupted}}};
}

struct AutotuneCandidate {
  static constexpr bool kRecord = true;
  double cap_mb = 0, median_ms = 0;
  std::optional<bool> measured;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("cap_mb", s.cap_mb), v("median_ms", s.median_ms), v("measured", s.measured);
  }
};

// --bucket-cap-mb auto (bench/run/bucket_tuner.h): the candidates and the choice.
struct BucketAutotuneInfo {
  static constexpr bool kRecord = true;
  std::vector<AutotuneCandidate> candidates;
  std::optional<double> chosen_mb;
  OpenFields extra;  // method, range_mb, settle and measured steps
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("candidates", s.candidates), v("chosen_mb", s.chosen_mb), v.rest(s.extra);
  }
};

// One phase group of a run against its bound (Note [Speed of light]).
struct BoundPhase {
  static constexpr bool kRecord = true;
  std::string group;  // "compute", "communication", "input" or "other"
  double measured_ms = 0, bound_ms = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("group", s.group), v("measured_ms", s.measured_ms), v("bound_ms", s.bound_ms);
  }
};

// runs[].metrics.speed_of_light (bench/suite/speed_of_light.h): the lower bound on the step
// from the measured GEMM peak and the fitted links, and how much of it the run achieved.
struct SpeedOfLight {
  static constexpr bool kRecord = true;
  double bound_ms = 0, achieved = 0;  // achieved = bound / the median step
  double compute_ms = 0, comm_ms = 0, input_ms = 0;
  std::vector<BoundPhase> phases;
  std::string largest_gap;  // the group whose measured time most exceeds its bound
  double peak_flops_per_s = 0;
  std::string link;  // which fitted link the communication bound used, and its α and β
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("bound_ms", s.bound_ms), v("achieved", s.achieved), v("compute_ms", s.compute_ms);
    v("comm_ms", s.comm_ms), v("input_ms", s.input_ms), v("phases", s.phases);
    v("largest_gap", s.largest_gap), v("peak_flops_per_s", s.peak_flops_per_s);
    v("link", s.link);
  }
};

// runs[].metrics: a run's numbers taken from its run record (bench/suite/suite_metrics.h).
struct RunMetrics {
  static constexpr bool kRecord = true;
  double samples_per_s = 0;
  std::optional<double> tokens_per_s;
  StepTimeStats step_time_ms;
  std::optional<std::vector<double>> per_rank_median_ms;
  std::optional<double> straggler_skew;
  std::optional<std::vector<PhaseMedian>> phases_median_ms;
  std::optional<double> comm_ms, comm_exposed_ms, overlap_ratio;
  std::optional<int64_t> comm_bytes_per_step;
  std::optional<double> bus_bytes_per_step, gradient_bus_bytes_per_step;  // on the wire
  std::optional<std::vector<double>> loss_per_step;                       // warm-up steps included
  std::optional<BucketAutotuneInfo> bucket_autotune;
  std::optional<std::vector<BucketTiming>> buckets;
  std::optional<BusBw> busbw;
  std::optional<double> achieved_flops_per_s, flop_fraction;
  std::optional<int64_t> devices, peak_memory_bytes;
  std::optional<std::vector<int64_t>> rank_peak_memory_bytes;
  std::optional<std::vector<MemoryUse>> memory;
  std::optional<LoaderSummary> loader;                       // rank 0's input pipeline
  std::optional<std::vector<double>> per_rank_data_wait_ms;  // median data wait of each rank
  std::optional<BucketBlame> bucket_blame;                   // DDP, world size > 1
  std::optional<SpeedOfLight> speed_of_light;                // with a GEMM peak and a comm fit
  std::optional<CriticalPath> critical_path;                 // DP and DDP
  std::optional<std::vector<HostRecord>> hosts;              // Note [Hosts in records]
  OpenFields extra;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("loader", s.loader), v("per_rank_data_wait_ms", s.per_rank_data_wait_ms);
    v("samples_per_s", s.samples_per_s), v("tokens_per_s", s.tokens_per_s);
    v("step_time_ms", s.step_time_ms), v("per_rank_median_ms", s.per_rank_median_ms);
    v("straggler_skew", s.straggler_skew), v("phases_median_ms", s.phases_median_ms);
    v("comm_ms", s.comm_ms), v("comm_exposed_ms", s.comm_exposed_ms);
    v("overlap_ratio", s.overlap_ratio), v("comm_bytes_per_step", s.comm_bytes_per_step);
    v("bus_bytes_per_step", s.bus_bytes_per_step);
    v("gradient_bus_bytes_per_step", s.gradient_bus_bytes_per_step);
    v("loss_per_step", s.loss_per_step), v("bucket_autotune", s.bucket_autotune);
    v("buckets", s.buckets), v("busbw", s.busbw);
    v("achieved_flops_per_s", s.achieved_flops_per_s), v("flop_fraction", s.flop_fraction);
    v("devices", s.devices), v("peak_memory_bytes", s.peak_memory_bytes);
    v("rank_peak_memory_bytes", s.rank_peak_memory_bytes), v("memory", s.memory);
    v("bucket_blame", s.bucket_blame), v("speed_of_light", s.speed_of_light);
    v("hosts", s.hosts);
    v("critical_path", s.critical_path), v.rest(s.extra);
  }
};

// runs[].scaling: against the single-device runs (docs/metrics.md, "Scaling").
struct ScalingInfo {
  static constexpr bool kRecord = true;
  std::optional<std::string> baseline, strong_baseline;
  std::optional<double> weak_efficiency, strong_speedup, strong_efficiency;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("baseline", s.baseline), v("weak_efficiency", s.weak_efficiency);
    v("strong_baseline", s.strong_baseline), v("strong_speedup", s.strong_speedup);
    v("strong_efficiency", s.strong_efficiency);
  }
};

// runs[].correctness: the differences from the reference, or why there is no check.
struct CorrectnessInfo {
  static constexpr bool kRecord = true;
  std::optional<std::string> reference;
  std::optional<double> max_rel_diff, rel_l2_diff;
  std::optional<std::string> metric;  // the difference the verdict used: "rel_l2_diff"
  std::optional<std::string> worst_tensor;
  std::optional<double> threshold;
  std::optional<bool> passed;
  std::optional<std::string> skipped, error;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("reference", s.reference), v("max_rel_diff", s.max_rel_diff);
    v("rel_l2_diff", s.rel_l2_diff), v("metric", s.metric), v("worst_tensor", s.worst_tensor);
    v("threshold", s.threshold), v("passed", s.passed), v("skipped", s.skipped);
    v("error", s.error);
  }
  // No check, and why (with the reference it would have used, when there is one).
  static CorrectnessInfo skipped_because(std::string why,
                                         std::optional<std::string> reference = std::nullopt) {
    CorrectnessInfo c;
    c.skipped = std::move(why);
    c.reference = std::move(reference);
    return c;
  }
  // The difference named by `metric` (older records: max_rel_diff).
  std::optional<double> verdict_difference() const {
    return metric.value_or("max_rel_diff") == "rel_l2_diff" ? rel_l2_diff : max_rel_diff;
  }
};

// runs[].pytorch (--with-pytorch): the same configuration run by torch_reference.py.
struct PytorchResult {
  static constexpr bool kRecord = true;
  std::string status;  // ok | skipped | failed
  std::optional<std::string> record, error;
  std::optional<double> samples_per_s, overlap_ratio;
  std::optional<StepTimeStats> step_time_ms;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("status", s.status), v("record", s.record), v("samples_per_s", s.samples_per_s);
    v("step_time_ms", s.step_time_ms), v("overlap_ratio", s.overlap_ratio);
    v("error", s.error);
  }
};

// One `ddpbench run` of the suite, from pending to ok or failed.
struct SuiteRun {
  static constexpr bool kRecord = true;
  std::string id;  // "<workload>/<mode>/w<N>[/<variant>]", unique
  std::optional<RunGroup> group;
  std::string workload;
  std::string mode;        // the design's name: a row of SuiteRecord::designs
  int64_t world_size = 0;  // 0: missing from a hand-edited record
  std::optional<int64_t> global_batch;
  std::string variant;
  std::vector<std::string> args;  // after "ddpbench": "run", "--mode", ...
  // The run's typed configuration, which `args` give the run command (Note [Typed run
  // configuration]); absent in a hand-made record, where run_config() reads the defaults.
  std::optional<RunConfigInfo> config;
  std::optional<RunStatus> status;
  std::optional<std::string> error;
  std::optional<double> duration_s;
  std::optional<int64_t> exit_code;
  std::optional<std::string> log, record, params, trace;  // paths in the results folder
  std::optional<RunMetrics> metrics;
  std::optional<ScalingInfo> scaling;
  std::optional<CorrectnessInfo> correctness;
  std::optional<PytorchResult> pytorch;
  std::optional<FlagInfo> flag;   // group flags: what the run changes (default: the A run)
  std::optional<int64_t> repeat;  // groups flags, rounds: which of the alternated rounds, from 0
  OpenFields extra;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("id", s.id), v("group", s.group), v("workload", s.workload), v("mode", s.mode);
    v("flag", s.flag), v("repeat", s.repeat);
    v("world_size", s.world_size), v("global_batch", s.global_batch), v("variant", s.variant);
    v("args", s.args), v("config", s.config), v("status", s.status), v("error", s.error);
    v("duration_s", s.duration_s), v("exit_code", s.exit_code), v("log", s.log);
    v("record", s.record), v("params", s.params), v("trace", s.trace);
    v("metrics", s.metrics), v("scaling", s.scaling), v("correctness", s.correctness);
    v("pytorch", s.pytorch), v.rest(s.extra);
  }

  bool ok() const { return status == RunStatus::Ok; }
  // status ok with its metrics: a run whose numbers can be used.
  bool measured() const { return ok() && metrics.has_value(); }
  // The run's configuration: `config`, or the defaults where the record has none.
  const RunConfigInfo& run_config() const;
};

// The resolved matrix (bench/suite/suite_spec.h's to_json); the keys the readers use are
// named, every other key of the spec stays in `extra`.
struct SuiteMatrix {
  static constexpr bool kRecord = true;
  std::string name, device;
  std::optional<bool> quick;
  std::vector<std::string> workloads;
  std::vector<std::string> modes;  // the designs' names
  std::vector<int64_t> world_sizes;
  std::optional<int64_t> steps, warmup;
  std::optional<uint64_t> seed;
  std::optional<double> correctness_threshold, hook_correctness_threshold;
  OpenFields extra;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("device", s.device), v("quick", s.quick);
    v("workloads", s.workloads), v("modes", s.modes), v("world_sizes", s.world_sizes);
    v("steps", s.steps), v("warmup", s.warmup), v("seed", s.seed);
    v("correctness_threshold", s.correctness_threshold);
    v("hook_correctness_threshold", s.hook_correctness_threshold), v.rest(s.extra);
  }
};

struct GemmShapePeak {
  static constexpr bool kRecord = true;
  std::optional<std::string> workload;
  int64_t m = 0, n = 0, k = 0;
  double flops_per_s = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("workload", s.workload), v("m", s.m), v("n", s.n), v("k", s.k);
    v("flops_per_s", s.flops_per_s);
  }
};

// The GEMM peak every run's FLOP fraction is measured against (bench/measure/gemm_peak.h).
struct GemmPeakInfo {
  static constexpr bool kRecord = true;
  std::string device;
  double flops_per_s = 0;
  std::optional<std::vector<GemmShapePeak>> shapes;
  OpenFields extra;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("device", s.device), v("flops_per_s", s.flops_per_s), v("shapes", s.shapes);
    v.rest(s.extra);
  }
};

// collectives[]: the suite's `ddpbench collectives` sweep of one backend, before its runs
// (bench/suite/suite_collectives.h); the projection fits its AllReduce link on it.
struct SuiteCollectives {
  static constexpr bool kRecord = true;
  std::string backend;
  int64_t world_size = 0, max_bytes = 0;
  // A sweep across the suite's hosts (Note [Runs across hosts]): its nodes, and the ranks of
  // each, which its hierarchical sweep measures within and between (Note [Hierarchical sweep]).
  std::optional<int64_t> nnodes, node_size;
  std::string status;  // "ok" or "failed"
  std::optional<std::string> record, log, error;
  std::optional<double> avg_busbw_GBps;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("backend", s.backend), v("world_size", s.world_size), v("max_bytes", s.max_bytes);
    v("nnodes", s.nnodes), v("node_size", s.node_size);
    v("status", s.status), v("record", s.record), v("log", s.log), v("error", s.error);
    v("avg_busbw_GBps", s.avg_busbw_GBps);
  }
};

// A host of a suite across hosts (bench/suite/suite_hosts.h, Note [Runs across hosts]).
struct SuiteHostInfo {
  static constexpr bool kRecord = true;
  std::string name, address;
  int64_t slots = 1;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("address", s.address), v("slots", s.slots);
  }
};

struct SuiteRecord {
  static constexpr bool kRecord = true;
  int64_t schema_version = kSchemaVersion;
  std::string implementation = "ddpbench", kind = "suite";
  bool complete = false;
  RunContext context;
  SuiteMatrix suite;
  std::vector<DesignInfo>
      designs;  // the rows of the designs the runs use (Note [Designs in records])
  std::optional<GemmPeakInfo> gemm_peak;
  std::optional<nlohmann::json> comm_fit;      // bench/project/comm_fit.h's CommFit::to_json
  std::optional<ProjectionRecord> projection;  // reports/schema/projection.schema.json
  std::optional<std::vector<SuiteCollectives>> collectives;
  // `suite --hosts`: the hosts its runs spread over, the first this suite's own, and the
  // command that started the others; absent: every run on one machine.
  std::optional<std::vector<SuiteHostInfo>> hosts;
  std::optional<std::string> launch;
  std::vector<SuiteRun> runs;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("schema_version", s.schema_version), v("implementation", s.implementation);
    v("kind", s.kind), v("complete", s.complete), v("context", s.context);
    v("suite", s.suite), v("designs", s.designs), v("gemm_peak", s.gemm_peak);
    v("comm_fit", s.comm_fit);
    v("projection", s.projection), v("collectives", s.collectives), v("hosts", s.hosts);
    v("launch", s.launch), v("runs", s.runs);
  }

  nlohmann::json to_json() const { return record_to_json(*this); }
  static SuiteRecord from_json(const nlohmann::json& j) { return record_from_json<SuiteRecord>(j); }

  const SuiteRun* find_run(std::string_view id) const;
  // The row of a run's design; a design the record does not describe reads as a row with
  // the name alone for its label and no traits.
  DesignInfo design_of(const SuiteRun& run) const { return design_named(run.mode); }
  DesignInfo design_named(std::string_view name) const;
  // The parallel designs the record describes, in its order.
  std::vector<const DesignInfo*> parallel_designs() const;
  // The reference design: the first that trains on one device (whose runs are the scaling
  // baseline and the correctness reference), or nullptr.
  const DesignInfo* reference_design() const;
  // Workloads in report order: suite.workloads first, then any other workload seen in runs.
  std::vector<std::string> workloads() const;
};

}  // namespace ddpb::reports
