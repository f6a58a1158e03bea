// The run record (`ddpbench run --out`, reports/schema/run.schema.json, docs/records.md) as
// types: the trainer fills a RunRecord, the suite, the projection and the Python peers read
// the same field names. JSON both ways through one field list per type (Note [One field list
// per record type]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/design_info.h"
#include "reports/json_io.h"
#include "reports/record_fields.h"

namespace ddpb::reports {

// Step times in ms over the measured steps (bench/measure/stats.h).
struct StepTimeStats {
  static constexpr bool kRecord = true;
  double median = 0, mean = 0, p90 = 0, p99 = 0, min = 0, max = 0, stddev = 0;
  int64_t count = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("median", s.median), v("mean", s.mean), v("p90", s.p90), v("p99", s.p99);
    v("min", s.min), v("max", s.max), v("stddev", s.stddev), v("count", s.count);
  }
};

// A phase's median over the measured steps, with its kind (Note [Phase kinds] in
// core/step_phase.h).
struct PhaseMedian {
  static constexpr bool kRecord = true;
  std::string phase, kind;
  double median_ms = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("phase", s.phase), v("kind", s.kind), v("median_ms", s.median_ms);
  }
};

struct MemoryUse {
  static constexpr bool kRecord = true;
  std::string device;
  int64_t peak_bytes = 0;
  std::optional<int64_t> reserved_bytes;  // always in run records; optional in suite metrics
  // What the peak held, by category (Note [Memory categories] in core/memory_category.h).
  std::optional<NamedValues<int64_t>> by_category;
  // Each category's own maximum, and the model state's (parameters, gradients and optimizer
  // state together: "model_state"), Note [A category's own peak] in core/allocator.cpp.
  std::optional<NamedValues<int64_t>> highest_by_category = {};
  // What the design promises of parameters, gradients and optimizer state, and highest /
  // expected per category and for their sum (Note [Model-state memory]).
  std::optional<NamedValues<int64_t>> expected_by_category = {};
  std::optional<NamedValues<double>> ratio_by_category = {};
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("device", s.device), v("peak_bytes", s.peak_bytes), v("reserved_bytes", s.reserved_bytes);
    v("by_category", s.by_category), v("highest_by_category", s.highest_by_category);
    v("expected_by_category", s.expected_by_category);
    v("ratio_by_category", s.ratio_by_category);
  }
};

// One collective of a DDP bucket (PowerSGD launches up to three: uncompressed, P, Q).
struct BucketCollective {
  static constexpr bool kRecord = true;
  std::string name;
  int64_t bytes = 0;
  double launch_ms = 0, start_ms = 0, complete_ms = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("bytes", s.bytes), v("launch_ms", s.launch_ms);
    v("start_ms", s.start_ms), v("complete_ms", s.complete_ms);
  }
};

// A DDP bucket in one step (steps[].mode.buckets), and in the median step with the derived
// times (summary.comm.buckets, runs[].metrics.buckets). Times in ms from the step's start.
struct BucketTiming {
  static constexpr bool kRecord = true;
  int64_t bucket = 0;
  std::optional<int64_t> params, bytes;
  double ready_ms = 0, launch_ms = 0, complete_ms = 0;
  std::optional<double> start_ms, ready_to_launch_ms, collective_ms, algbw_GBps, busbw_GBps;
  std::optional<std::vector<BucketCollective>> collectives;
  std::optional<double> hook_compute_ms;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("bucket", s.bucket), v("params", s.params), v("bytes", s.bytes);
    v("ready_ms", s.ready_ms), v("launch_ms", s.launch_ms), v("start_ms", s.start_ms);
    v("complete_ms", s.complete_ms), v("ready_to_launch_ms", s.ready_to_launch_ms);
    v("collective_ms", s.collective_ms), v("algbw_GBps", s.algbw_GBps);
    v("busbw_GBps", s.busbw_GBps), v("collectives", s.collectives);
    v("hook_compute_ms", s.hook_compute_ms);
  }
};

// nccl-tests' bus-bandwidth factor of the run's collective (bench/measure/metrics.h).
struct BusBw {
  static constexpr bool kRecord = true;
  std::string op, formula;
  double factor = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("op", s.op), v("factor", s.factor), v("formula", s.formula);
  }
};

// One DP replica in one step.
struct DpDeviceStep {
  static constexpr bool kRecord = true;
  std::string device;
  int64_t rows = 0;
  double busy_ms = 0, idle_ms = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("device", s.device), v("rows", s.rows), v("busy_ms", s.busy_ms), v("idle_ms", s.idle_ms);
  }
};

// steps[].mode: DP fills devices, bytes and unit_bytes; DDP rank, buckets and the comm
// numbers (bench/run/ddp_record.cpp); the rest (SyncBatchNorm, span overlap) stays open.
// One kind of collective in a step: how often it ran, its bytes, and its bytes on the wire
// (bytes × nccl-tests' bus factor; docs/metrics.md "Bytes on the wire").
struct OpTraffic {
  static constexpr bool kRecord = true;
  std::string op;
  int64_t calls = 0, bytes = 0;
  double bus_bytes = 0;
  bool operator==(const OpTraffic&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("op", s.op), v("calls", s.calls), v("bytes", s.bytes), v("bus_bytes", s.bus_bytes);
  }
};

struct StepModeData {
  static constexpr bool kRecord = true;
  std::optional<std::vector<DpDeviceStep>> devices;
  std::optional<NamedValues<int64_t>> bytes;
  std::optional<NamedValues<int64_t>> unit_bytes;
  std::optional<int64_t> rank;
  std::optional<std::vector<BucketTiming>> buckets;
  std::optional<int64_t> comm_bytes;
  std::optional<double> comm_ms, comm_exposed_ms, overlap_ratio;
  // Every collective of the step by op, their bytes on the wire, and the gradient
  // collectives' share of them (Note [Step stats]).
  std::optional<std::vector<OpTraffic>> by_op;
  std::optional<double> bus_bytes, gradient_bus_bytes;
  OpenFields extra;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("devices", s.devices), v("bytes", s.bytes), v("unit_bytes", s.unit_bytes);
    v("rank", s.rank), v("buckets", s.buckets), v("comm_bytes", s.comm_bytes);
    v("comm_ms", s.comm_ms), v("comm_exposed_ms", s.comm_exposed_ms);
    v("overlap_ratio", s.overlap_ratio), v("by_op", s.by_op), v("bus_bytes", s.bus_bytes);
    v("gradient_bus_bytes", s.gradient_bus_bytes), v.rest(s.extra);
  }
};

// steps[].loader: what the input pipeline cost this step (docs/records.md).
struct LoaderStep {
  static constexpr bool kRecord = true;
  double data_wait_ms = 0;       // the training thread blocked in the loader's next()
  double fill_ms = 0;            // the worker's time reading, decoding, transforming the batch(es)
  std::optional<double> h2d_ms;  // CUDA: the copies' device time (events); CPU: absent
  std::optional<bool> h2d_overlapped;  // CUDA: every copy had finished before it was asked for
  int64_t skipped = 0;                 // bad samples replaced (--on-bad-sample skip)
  bool operator==(const LoaderStep&) const = default;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("data_wait_ms", s.data_wait_ms), v("fill_ms", s.fill_ms), v("h2d_ms", s.h2d_ms),
        v("h2d_overlapped", s.h2d_overlapped), v("skipped", s.skipped);
  }
};

struct StepRecord {
  static constexpr bool kRecord = true;
  int64_t step = 0;
  bool measured = false;
  double loss = 0, time_ms = 0;
  NamedValues<double> phases_ms;  // phase -> ms, in key order (JSON objects are sorted)
  std::optional<StepModeData> mode;
  std::optional<LoaderStep> loader;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("step", s.step), v("measured", s.measured), v("loss", s.loss), v("time_ms", s.time_ms);
    v("phases_ms", s.phases_ms), v("mode", s.mode), v("loader", s.loader);
  }
};

// summary.loader: the input pipeline over the run (docs/records.md, docs/metrics.md).
// A file --data read: a token shard with its tokens, or an image folder's class folder with
// its images, and the samples (windows, images) it gave.
struct DataFileRecord {
  static constexpr bool kRecord = true;
  std::string path;
  std::optional<int64_t> tokens, images;
  int64_t samples = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("path", s.path), v("tokens", s.tokens), v("images", s.images), v("samples", s.samples);
  }
};

struct LoaderSummary {
  static constexpr bool kRecord = true;
  std::string source;               // "synthetic", "tokens" or "imagefolder"
  std::optional<std::string> data;  // --data
  // --data: what was read, in order; the split of a folder of token shards holding both and
  // the folder's files not read (Note [Token splits], data/token_shards.h); meta.pkl's
  // vocab_size (nanoGPT).
  std::optional<std::vector<DataFileRecord>> files;
  std::optional<std::string> split;
  std::optional<std::vector<std::string>> left_out;
  std::optional<int64_t> meta_vocab_size;
  int64_t workers = 0, prefetch_factor = 0;
  std::string pin_memory;  // "on", "off", or "not applicable (CPU device)"
  bool normalize_on_device = false;
  int64_t samples = 0;                  // assembled, over the run
  double fill_ms_total = 0;             // summed over the workers (decode time)
  double samples_per_s = 0;             // what the loader can give: samples x workers / fill time
  double data_wait_ms_median = 0;       // over measured steps
  double data_wait_share = 0;           // of the median step
  std::optional<double> h2d_ms_median;  // CUDA
  std::optional<double> h2d_overlap_ratio;  // CUDA: the share of copies done before asked for
  int64_t skipped_samples = 0;
  std::optional<std::string> first_skip;
  int64_t padded_samples = 0;  // the sampler's padding by repetition, per epoch over all ranks
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("source", s.source), v("data", s.data), v("files", s.files), v("split", s.split);
    v("left_out", s.left_out), v("meta_vocab_size", s.meta_vocab_size), v("workers", s.workers),
        v("prefetch_factor", s.prefetch_factor), v("pin_memory", s.pin_memory),
        v("normalize_on_device", s.normalize_on_device), v("samples", s.samples),
        v("fill_ms_total", s.fill_ms_total), v("samples_per_s", s.samples_per_s),
        v("data_wait_ms_median", s.data_wait_ms_median), v("data_wait_share", s.data_wait_share),
        v("h2d_ms_median", s.h2d_ms_median), v("h2d_overlap_ratio", s.h2d_overlap_ratio),
        v("skipped_samples", s.skipped_samples), v("first_skip", s.first_skip),
        v("padded_samples", s.padded_samples);
  }
};

struct Mfu {
  static constexpr bool kRecord = true;
  double mfu = 0, peak_flops_per_s = 0;
  std::string source;
  int64_t gpus = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("mfu", s.mfu), v("peak_flops_per_s", s.peak_flops_per_s), v("source", s.source);
    v("gpus", s.gpus);
  }
};

struct StragglerRecord {
  static constexpr bool kRecord = true;
  int64_t rank = 0;
  double compute_ms = 0, skew = 0;
  std::optional<std::string> host;  // the rank's host, where the record names hosts
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("rank", s.rank), v("compute_ms", s.compute_ms), v("skew", s.skew), v("host", s.host);
  }
};

// summary.bucket_blame (bench/measure/bucket_blame.h, Note [Bucket blame]): per DDP bucket,
// the rank that became ready last and how long it held the bucket back; per rank, the wait it
// caused; and the rank that holds the step back, if one does, with the phase it is slow in.
struct BlamedBucket {
  static constexpr bool kRecord = true;
  int64_t bucket = 0;
  std::optional<int64_t> last_rank;  // the rank most often last beyond the noise; none: no rank
  double held_fraction = 0;          // of the measured steps, those it held this bucket back
  double delay_ms_median = 0;        // over those steps
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("bucket", s.bucket), v("last_rank", s.last_rank), v("held_fraction", s.held_fraction);
    v("delay_ms_median", s.delay_ms_median);
  }
};

struct RankBlame {
  static constexpr bool kRecord = true;
  int64_t rank = 0;
  int64_t buckets_held = 0;      // (step, bucket) pairs this rank held back beyond the noise
  double held_fraction = 0;      // of every (step, bucket) pair observed
  double delay_ms_per_step = 0;  // the wait it caused, summed over buckets, per measured step
  double delay_ms_median = 0;    // over the buckets it held back
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("rank", s.rank), v("buckets_held", s.buckets_held), v("held_fraction", s.held_fraction);
    v("delay_ms_per_step", s.delay_ms_per_step), v("delay_ms_median", s.delay_ms_median);
  }
};

struct BucketBlame {
  static constexpr bool kRecord = true;
  int64_t steps = 0, buckets = 0;  // measured steps and buckets per step observed
  double noise_ms = 0;             // a bucket held back by less is held back by no one
  double holder_threshold_ms = 0;  // the median delay a rank that holds the step back exceeds
  std::vector<BlamedBucket> per_bucket;
  std::vector<RankBlame> per_rank;
  std::optional<int64_t> holder;            // the rank that holds the step back, if one does
  std::optional<std::string> holder_phase;  // the phase its extra time is in, if one stands out
  std::optional<double> holder_phase_excess_ms;  // its median there over the others' median
  std::string finding;                           // one sentence for the verdict and the report
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("steps", s.steps), v("buckets", s.buckets), v("noise_ms", s.noise_ms);
    v("holder_threshold_ms", s.holder_threshold_ms);
    v("per_bucket", s.per_bucket), v("per_rank", s.per_rank), v("holder", s.holder);
    v("holder_phase", s.holder_phase), v("holder_phase_excess_ms", s.holder_phase_excess_ms);
    v("finding", s.finding);
  }
};

// One interval of a step (summary.critical_path): on the chain that ends at the step's end,
// or on a rank's lane of the Gantt chart. Times in ms from the start of that rank's step.
struct PathSpan {
  static constexpr bool kRecord = true;
  int64_t rank = 0;   // DDP: the rank; DP: the device index
  std::string kind;   // "compute", "communication", "data", "wait" or "host"
  std::string label;  // the phase ("backward_compute"), "bucket 3", or "waits for rank 1"
  double start_ms = 0, end_ms = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("rank", s.rank), v("kind", s.kind), v("label", s.label), v("start_ms", s.start_ms);
    v("end_ms", s.end_ms);
  }
};

// summary.critical_path (bench/measure/critical_path.h, Note [Critical path]): the median
// measured step's time split along the chain of dependent intervals that ends at its end.
// compute + communication + data + wait + host = step_ms.
struct CriticalPath {
  static constexpr bool kRecord = true;
  int64_t step = 0;  // the step it was taken from (the measured one nearest the median)
  double step_ms = 0;
  double compute_ms = 0, communication_ms = 0, data_ms = 0, wait_ms = 0, host_ms = 0;
  std::optional<int64_t> waited_for;  // the rank (DP: device) the step waited for, if it did
  std::vector<PathSpan> path;         // the chain, in time order
  std::vector<PathSpan> lanes;        // every rank's (device's) intervals: the Gantt chart
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("step", s.step), v("step_ms", s.step_ms), v("compute_ms", s.compute_ms);
    v("communication_ms", s.communication_ms), v("data_ms", s.data_ms), v("wait_ms", s.wait_ms);
    v("host_ms", s.host_ms), v("waited_for", s.waited_for), v("path", s.path);
    v("lanes", s.lanes);
  }
};

// summary.comm (bench/measure/comm_summary.h): DDP's AllReduce, DP's reduce.
struct CommRecord {
  static constexpr bool kRecord = true;
  std::string op;  // "allreduce" | "reduce"
  double comm_ms = 0, comm_exposed_ms = 0, overlap_ratio = 0;
  std::optional<int64_t> bytes_per_step;                // median of the gradient collectives'
  std::optional<int64_t> buckets_step;                  // a design with buckets: the median step
  std::optional<std::vector<BucketTiming>> buckets;     // its buckets
  std::optional<double> bytes, algbw_GBps, busbw_GBps;  // bytes_per_step over comm_ms
  BusBw busbw;
  // Bytes on the wire (docs/metrics.md): medians over the measured steps of every collective's
  // and of the gradient collectives'; what the design promises for the latter; the median
  // step's collectives by op.
  std::optional<double> bus_bytes_per_step, gradient_bus_bytes_per_step;
  std::optional<double> expected_gradient_bus_bytes;
  std::optional<std::vector<OpTraffic>> by_op;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("op", s.op), v("comm_ms", s.comm_ms), v("comm_exposed_ms", s.comm_exposed_ms);
    v("overlap_ratio", s.overlap_ratio), v("bytes_per_step", s.bytes_per_step);
    v("buckets_step", s.buckets_step), v("buckets", s.buckets), v("bytes", s.bytes);
    v("algbw_GBps", s.algbw_GBps), v("busbw_GBps", s.busbw_GBps), v("busbw", s.busbw);
    v("bus_bytes_per_step", s.bus_bytes_per_step);
    v("gradient_bus_bytes_per_step", s.gradient_bus_bytes_per_step);
    v("expected_gradient_bus_bytes", s.expected_gradient_bus_bytes), v("by_op", s.by_op);
  }
};

struct RunSummary {
  static constexpr bool kRecord = true;
  StepTimeStats step_time_ms;
  std::vector<PhaseMedian> phases_median_ms;
  double samples_per_s = 0, tokens_per_s = 0;
  std::optional<double> images_per_s;
  double achieved_flops_per_s = 0;
  std::optional<Mfu> mfu;
  double first_loss = 0, last_loss = 0;
  std::optional<double> straggler_skew;                    // DDP, world size > 1
  std::optional<std::vector<StragglerRecord>> stragglers;  // DDP, world size > 1
  std::optional<CommRecord> comm;
  std::optional<LoaderSummary> loader;
  std::optional<BucketBlame> bucket_blame;    // DDP, world size > 1
  std::optional<CriticalPath> critical_path;  // DP and DDP
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("step_time_ms", s.step_time_ms), v("phases_median_ms", s.phases_median_ms);
    v("samples_per_s", s.samples_per_s), v("tokens_per_s", s.tokens_per_s);
    v("images_per_s", s.images_per_s), v("achieved_flops_per_s", s.achieved_flops_per_s);
    v("mfu", s.mfu), v("first_loss", s.first_loss), v("last_loss", s.last_loss);
    v("straggler_skew", s.straggler_skew), v("stragglers", s.stragglers), v("comm", s.comm);
    v("loader", s.loader), v("bucket_blame", s.bucket_blame);
    v("critical_path", s.critical_path);
  }
};

// Where and with what the run ran (bench/measure/context.h); open beyond the named keys.
struct RunContext {
  static constexpr bool kRecord = true;
  std::string date, host, ddpbench_version, build_type, compiler;
  bool cuda_compiled = false, nvtx_compiled = false;
  int64_t cuda_devices = 0, cpu_cores = 0;
  std::optional<std::string> git_commit, cpu_model;
  OpenFields extra;  // system, versions, env, resumed, ...
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("date", s.date), v("host", s.host), v("ddpbench_version", s.ddpbench_version);
    v("build_type", s.build_type), v("compiler", s.compiler);
    v("cuda_compiled", s.cuda_compiled), v("nvtx_compiled", s.nvtx_compiled);
    v("cuda_devices", s.cuda_devices), v("cpu_cores", s.cpu_cores);
    v("git_commit", s.git_commit), v("cpu_model", s.cpu_model), v.rest(s.extra);
  }
};

struct OptimizerInfo {
  static constexpr bool kRecord = true;
  std::string name;
  double lr = 0;
  OpenFields extra;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("lr", s.lr), v.rest(s.extra);
  }
};

// The command line as the run understood it (bench/run/run_config.h's to_json), in the run
// record and in each suite run (Note [Typed run configuration]); every flag beyond the named
// ones stays in `extra`.
//
// Note [Typed run configuration]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A run's configuration is read in one way: the suite describes each run as a typed RunConfig
// and writes its child's arguments from it (Note [One run field list] in
// bench/run/run_fields.h); RunConfig::to_json is this record. reports/ and the suite read the
// fields named here, never the argument list.
struct RunConfigInfo {
  static constexpr bool kRecord = true;
  std::string mode;  // the design's name (Note [Designs in records])
  std::string workload, device, precision;
  int64_t world_size = 1, global_batch = 0, steps = 0, warmup = 0;
  uint64_t seed = 0;
  std::optional<bool> cuda_graph;
  std::optional<std::string> attention;
  OptimizerInfo optimizer;
  std::string devices = {}, backend = {};  // --devices; --backend ("": the device's default)
  double bucket_cap_mb = 25;
  bool bucket_cap_auto = false;
  int64_t accumulate = 1, zero_stage = 0;
  std::string comm_hook = "none";
  bool sync_bn = false, no_overlap = false;
  std::string inject_fault = {};
  std::string data = {}, data_format = {};  // --data; --data-format ("": detected)
  OpenFields extra;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("mode", s.mode), v("workload", s.workload), v("device", s.device);
    v("world_size", s.world_size), v("global_batch", s.global_batch), v("steps", s.steps);
    v("warmup", s.warmup), v("seed", s.seed), v("cuda_graph", s.cuda_graph);
    v("attention", s.attention), v("precision", s.precision), v("optimizer", s.optimizer);
    v("devices", s.devices), v("backend", s.backend), v("bucket_cap_mb", s.bucket_cap_mb);
    v("bucket_cap_auto", s.bucket_cap_auto), v("accumulate", s.accumulate);
    v("zero_stage", s.zero_stage);
    v("comm_hook", s.comm_hook), v("sync_bn", s.sync_bn), v("no_overlap", s.no_overlap);
    v("inject_fault", s.inject_fault);
    v("data", s.data), v("data_format", s.data_format);
    v.rest(s.extra);
  }
};

struct ModeInfo {
  static constexpr bool kRecord = true;
  std::string name;                                   // the design's name
  std::string devices;                                // "cpu:0,cpu:1"
  nlohmann::json details = nlohmann::json::object();  // the runner's describe(): per mode
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("devices", s.devices), v("details", s.details);
  }
};

struct WorkloadInfo {
  static constexpr bool kRecord = true;
  std::string name, family;
  int64_t parameters = 0, tokens_per_sample = 0;
  double train_flops_per_sample = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("family", s.family), v("parameters", s.parameters);
    v("tokens_per_sample", s.tokens_per_sample);
    v("train_flops_per_sample", s.train_flops_per_sample);
  }
};

// A cuDNN execution plan the run built (core/conv_plans.h).
struct ConvPlanInfo {
  static constexpr bool kRecord = true;
  int64_t device = 0;
  std::string direction, layout, engine;
  std::vector<int64_t> dims;
  bool tensor_cores = false;
  int64_t engine_index = 0, workspace_bytes = 0, candidates = 0, allowed = 0, tried = 0;
  double build_ms = 0;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("device", s.device), v("direction", s.direction), v("dims", s.dims);
    v("layout", s.layout), v("tensor_cores", s.tensor_cores), v("engine", s.engine);
    v("engine_index", s.engine_index), v("workspace_bytes", s.workspace_bytes);
    v("build_ms", s.build_ms), v("candidates", s.candidates), v("allowed", s.allowed);
    v("tried", s.tried);
  }
};

// One DDP rank's own numbers (ranks[], merged by rank 0).
struct RankRecord {
  static constexpr bool kRecord = true;
  int64_t rank = 0;
  std::string device;
  double compute_ms = 0;
  StepTimeStats step_time_ms;
  std::vector<PhaseMedian> phases_median_ms;
  std::vector<MemoryUse> memory;
  std::optional<std::string> host = {};  // its host's name (Note [Hosts in records])
  std::optional<int64_t> node = {};      // its host's index in hosts[]
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("rank", s.rank), v("device", s.device), v("compute_ms", s.compute_ms);
    v("step_time_ms", s.step_time_ms), v("phases_median_ms", s.phases_median_ms);
    v("memory", s.memory), v("host", s.host), v("node", s.node);
  }
};

// Note [Hosts in records]
// A DDP run's ranks[] name each rank's host (its hostname, as the rank saw it) and node, and
// hosts[] lists the hosts in the order their first rank appears, which is the node order of
// ddpbench's launcher and torchrun (node r holds ranks r*k .. r*k+k-1). A node is a host, so
// it is found the same way under mpirun and srun, whose node indices differ by launcher. Text
// that names a rank adds its host once a run spans more than one (reports::rank_name).
struct HostRecord {
  static constexpr bool kRecord = true;
  std::string name;
  int64_t node = 0;
  std::vector<int64_t> ranks;
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("name", s.name), v("node", s.node), v("ranks", s.ranks);
  }
};

struct RunRecord {
  static constexpr bool kRecord = true;
  int64_t schema_version = kSchemaVersion;
  std::string implementation = "ddpbench", kind = "run";
  RunContext context;
  RunConfigInfo config;
  DesignInfo design;  // the row of config.mode (Note [Designs in records])
  ModeInfo mode;
  WorkloadInfo workload;
  std::vector<StepRecord> steps;
  RunSummary summary;
  std::vector<MemoryUse> memory;
  std::optional<std::vector<ConvPlanInfo>> conv_plans;
  std::optional<std::vector<RankRecord>> ranks;  // DDP rank 0's record
  std::optional<std::vector<HostRecord>> hosts;  // with ranks[] (Note [Hosts in records])
  template <class S, class V>
  static void fields(S& s, V& v) {
    v("schema_version", s.schema_version), v("implementation", s.implementation);
    v("kind", s.kind), v("context", s.context), v("config", s.config);
    v("design", s.design), v("mode", s.mode);
    v("workload", s.workload), v("steps", s.steps), v("summary", s.summary);
    v("memory", s.memory), v("conv_plans", s.conv_plans), v("ranks", s.ranks);
    v("hosts", s.hosts);
  }

  nlohmann::json to_json() const { return record_to_json(*this); }
  static RunRecord from_json(const nlohmann::json& j) { return record_from_json<RunRecord>(j); }
};

// The peak over every device a record names (its own and, for DDP, every rank's).
int64_t peak_memory_bytes(const std::vector<MemoryUse>& memory);

}  // namespace ddpb::reports
