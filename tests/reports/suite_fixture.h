// A synthetic suite.json (docs/suite-format.md) with every run group: scaling (single, dp, ddp
// at w1/w2/w4 for two workloads), reference, bucket_sweep, overlap, comm_hook, one failed run
// and a PyTorch block. Numbers are made up but consistent (weak efficiency from samples/s,
// overlap from comm and exposed comm), so charts and tables have something real to show.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "../util/design_rows.h"

namespace ddpb::testing {

using nlohmann::json;

inline json step_stats(double median) {
  return {{"median", median},        {"mean", median * 1.02},
          {"p90", median * 1.1},     {"p99", median * 1.2},
          {"min", median * 0.95},    {"max", median * 1.25},
          {"stddev", median * 0.03}, {"count", 20}};
}

// Metrics of an ok run. DDP gets per-bucket timings of its median step, DP its phase list.
inline json make_metrics(const std::string& mode, int world_size, double samples_per_s,
                         double median_ms, double comm_ms = 0, double exposed_ms = 0) {
  json phases = json::array();
  auto phase = [&](const char* name, double ms) {
    phases.push_back({{"phase", name}, {"kind", kind_of_phase(name)}, {"median_ms", ms}});
  };
  if (mode == "single") {
    phase("data", 0.1 * median_ms);
    phase("forward", 0.3 * median_ms);
    phase("backward", 0.5 * median_ms);
    phase("optimizer", 0.1 * median_ms);
  } else if (mode == "dp") {
    for (const char* p : {"data", "scatter", "replicate", "forward", "gather", "loss"})
      phase(p, 0.05 * median_ms);
    phase("backward", 0.4 * median_ms);
    phase("reduce", comm_ms);
    phase("optimizer", 0.6 * median_ms - comm_ms - 0.1 * median_ms);
  } else {
    phase("data", 0.05 * median_ms);
    phase("forward", 0.25 * median_ms);
    phase("backward_compute", 0.5 * median_ms);
    phase("comm_exposed", exposed_ms);
    phase("optimizer", 0.2 * median_ms - exposed_ms);
  }
  json m = {{"samples_per_s", samples_per_s},
            {"tokens_per_s", samples_per_s},
            {"step_time_ms", step_stats(median_ms)},
            {"phases_median_ms", phases},
            {"achieved_flops_per_s", samples_per_s * 2e7},
            {"flop_fraction", samples_per_s * 2e7 / (1e11 * world_size)},
            {"peak_memory_bytes", 40'000'000 + 1'000'000 * world_size},
            {"memory", json::array()}};
  json per_rank = json::array();
  for (int r = 0; r < world_size; ++r) {
    m["memory"].push_back({{"device", "cpu:" + std::to_string(r)},
                           {"peak_bytes", 40'000'000 + 1'000'000 * world_size},
                           {"reserved_bytes", 50'000'000}});
    per_rank.push_back(median_ms * (1 + 0.01 * r));
  }
  if (mode == "single") return m;
  m["per_rank_median_ms"] = per_rank;
  m["straggler_skew"] = 1.01;
  m["comm_ms"] = comm_ms;
  m["comm_exposed_ms"] = exposed_ms;
  m["overlap_ratio"] = comm_ms > 0 ? 1 - exposed_ms / comm_ms : 0.0;
  if (mode == "ddp") {
    m["busbw"] = {{"op", "allreduce"},
                  {"factor", 2.0 * (world_size - 1) / world_size},
                  {"formula", "busbw = algbw * 2(n-1)/n"}};
    json buckets = json::array();
    for (int b = 0; b < 4; ++b) {
      const double ready = median_ms * (0.35 + 0.12 * b);
      const double launch = ready + 0.05 * b;
      const double start = launch + 0.02;
      const double complete = start + comm_ms / 4;
      buckets.push_back({{"bucket", b},
                         {"bytes", 4'194'304 >> b},
                         {"ready_ms", ready},
                         {"launch_ms", launch},
                         {"start_ms", start},
                         {"complete_ms", complete},
                         {"ready_to_launch_ms", launch - ready},
                         {"collective_ms", complete - start},
                         {"algbw_GBps", 1.2},
                         {"busbw_GBps", 1.2 * 2.0 * (world_size - 1) / world_size}});
    }
    m["buckets"] = buckets;
  }
  return m;
}

inline json make_run(const std::string& workload, const std::string& mode, int world_size,
                     const std::string& group, const std::string& variant = "") {
  std::string id = workload + "/" + mode + "/w" + std::to_string(world_size);
  if (!variant.empty()) id += "/" + variant;
  std::string file = id;
  for (char& c : file) c = c == '/' ? '_' : c;
  return {
      {"id", id},
      {"group", group},
      {"workload", workload},
      {"mode", mode},
      {"world_size", world_size},
      {"global_batch", 32 * world_size},
      {"variant", variant},
      {"args",
       {"run", "--mode", mode, "--workload", workload, "--world-size", std::to_string(world_size)}},
      // The run's typed configuration, which args give back (Note [Typed run configuration]).
      {"config",
       {{"mode", mode},
        {"workload", workload},
        {"device", "cpu"},
        {"world_size", world_size},
        {"global_batch", 32 * world_size},
        {"steps", 20},
        {"warmup", 3},
        {"seed", 0},
        {"precision", "fp32"},
        {"optimizer", {{"name", "sgd"}, {"lr", 0.01}}},
        {"devices", ""},
        {"backend", ""},
        {"bucket_cap_mb", 25.0},
        {"bucket_cap_auto", false},
        {"accumulate", 1},
        {"comm_hook", "none"},
        {"sync_bn", false},
        {"no_overlap", false},
        {"zero_stage", 0},
        {"inject_fault", ""},
        {"data", ""},
        {"data_format", ""}}},
      {"status", "ok"},
      {"duration_s", 3.5},
      {"record", "runs/" + file + ".json"},
      {"trace", "traces/" + file + ".json"}};
}

// A projection record (reports/schema/projection.schema.json) for the fixture's workloads:
// DDP keeps scaling, DP loses to it from 4 devices on and stops at its node of 8. Designs keyed
// by name, their rows beside them (Note [Designs keyed by name]).
inline json make_projection() {
  auto point = [](double step, double comm, double exposed, double eff, double samples) {
    return json{{"step_ms", step},       {"comm_ms", comm},
                {"exposed_ms", exposed}, {"overlap_ratio", comm > 0 ? 1 - exposed / comm : 0},
                {"efficiency", eff},     {"samples_per_s", samples}};
  };
  json designs = json::array();
  for (const json& row : design_rows())
    if (row["parallel"].get<bool>()) designs.push_back(row);
  json p = {{"schema_version", 2},
            {"implementation", "ddpbench"},
            {"kind", "projection"},
            {"source", "results"},
            {"device", "cpu"},
            {"designs", designs},
            {"topology",
             {{"name", "nvlink+ib-ndr"},
              {"source", "presets"},
              {"node_size", 8},
              {"intra", {{"alpha_us", 3}, {"bandwidth_GBps", 450}}},
              {"inter", {{"alpha_us", 5}, {"bandwidth_GBps", 50}}},
              {"compute_slots", 0},
              {"comm_shares_compute", false},
              {"compute_contention", 1.0}}},
            {"devices", {8, 64}},
            {"scale", {{"per_device_batch", 0}, {"target_flops_per_s", 0}}},
            {"workloads", json::array()}};
  for (const std::string w : {"mlp-small", "gpt-tiny"}) {
    json pts = json::array();
    for (int n : {1, 2, 4, 8, 16, 32, 64}) {
      json pt = {{"devices", n}, {"designs", json::object()}};
      const double ddp = 10 + 0.05 * n;
      pt["designs"]["ddp"] = point(ddp, n > 1 ? 2 : 0, n > 1 ? 0.5 : 0, 10 / ddp, 32000 * n / ddp);
      if (n <= 8) {
        const double dp = 9 + 0.6 * n;
        pt["designs"]["dp"] = point(dp, 0.6 * n, 0.6 * n, 10 / dp, 32000 * n / dp);
      }
      pts.push_back(pt);
    }
    p["workloads"].push_back(
        {{"workload", w},
         {"basis", {{"designs", {{"ddp", {{"run", w + "/ddp/w1"}, {"per_device_batch", 32}}}}}}},
         {"points", pts},
         {"measured",
          {{{"mode", "ddp"},
            {"devices", 2},
            {"run", w + "/ddp/w2"},
            {"step_ms", 11},
            {"efficiency", 0.91}}}},
         {"crossover", {{"devices", 4}, {"faster", "ddp"}}},
         {"limits",
          {{"ddp", {{"max_devices_at_90pct", 20}}},
           {"dp", {{"stops_gaining_at", nullptr}, {"max_devices", 8}}}}}});
  }
  p["validation"] = {
      {"topology", "measured"},
      {"basis", "each workload's world-size-1 runs"},
      {"oversubscribed", "World sizes above 2 oversubscribe this machine's 2 cores."},
      {"runs",
       {{{"run", "mlp-small/ddp/w2"},
         {"mode", "ddp"},
         {"devices", 2},
         {"measured_ms", 11},
         {"predicted_ms", 10.1},
         {"error", -0.0818}}}},
      {"median_abs_error", {{"ddp", 0.0818}, {"dp", nullptr}}}};
  return p;
}

// summary.bucket_blame of a DDP run at world size n: the last rank holds most buckets back.
inline json make_bucket_blame(int n) {
  json per_rank = json::array(), per_bucket = json::array();
  for (int r = 0; r < n; ++r) {
    const bool late = r == n - 1;
    per_rank.push_back({{"rank", r},
                        {"buckets_held", late ? 36 : 1},
                        {"held_fraction", late ? 0.9 : 0.025},
                        {"delay_ms_per_step", late ? 21.6 : 0.03},
                        {"delay_ms_median", late ? 12.0 : 0.3}});
  }
  for (int b = 0; b < 2; ++b)
    per_bucket.push_back(
        {{"bucket", b}, {"last_rank", n - 1}, {"held_fraction", 0.9}, {"delay_ms_median", 12.0}});
  return {{"steps", 20},
          {"buckets", 2},
          {"noise_ms", 0.25},
          {"holder_threshold_ms", 1.0},
          {"per_bucket", per_bucket},
          {"per_rank", per_rank},
          {"holder", n - 1},
          {"holder_phase", "backward_compute"},
          {"holder_phase_excess_ms", 11.8},
          {"finding", "rank " + std::to_string(n - 1) +
                          " holds back 90% of buckets by a median 12.0 ms: its backward_compute "
                          "is 11.8 ms slower than the other ranks'"}};
}

// summary.critical_path of a DP or DDP step of `median` ms at world size n: a tenth of it
// waiting for the last rank (device).
inline json make_critical_path(const std::string& mode, int n, double median) {
  const bool ddp = mode == "ddp";
  const double data = 0.05 * median, forward = 0.3 * median, backward = 0.4 * median;
  const double comm = 0.2 * median, wait = 0.1 * median, host = 0.05 * median;
  json lanes = json::array(), path = json::array();
  const auto span = [](int rank, const char* kind, const char* label, double a, double b) {
    return json{{"rank", rank}, {"kind", kind}, {"label", label}, {"start_ms", a}, {"end_ms", b}};
  };
  for (int r = 0; r < n; ++r) {
    lanes.push_back(span(r, "data", "data", 0, data));
    lanes.push_back(span(r, "compute", "forward", data, data + forward));
    lanes.push_back(span(r, "compute", "backward", data + forward, data + forward + backward));
  }
  lanes.push_back(span(0, "communication", "bucket 0", data + forward + 0.5 * backward,
                       data + forward + backward + comm));
  double t = 0;
  using Segment = std::tuple<const char*, const char*, double>;
  for (const auto& [kind, label, ms] : std::initializer_list<Segment>{
           {"data", "data", data},
           {"compute", "forward", forward},
           {"compute", "backward", backward},
           {"wait", "waits", wait},
           {"communication", ddp ? "comm_exposed" : "reduce", comm - wait},
           {"host", "outside the phases", host}}) {
    path.push_back(span(0, kind, label, t, t + ms));
    t += ms;
  }
  return {{"step", 10},
          {"step_ms", t},
          {"compute_ms", forward + backward},
          {"communication_ms", comm - wait},
          {"data_ms", data},
          {"wait_ms", wait},
          {"host_ms", host},
          {"waited_for", n - 1},
          {"path", path},
          {"lanes", lanes}};
}

inline json make_suite() {
  json suite = {{"schema_version", 2},
                {"designs", design_rows()},
                {"implementation", "ddpbench"},
                {"kind", "suite"},
                {"complete", true},
                {"context",
                 {{"date", "2025-01-01T00:00:00Z"},
                  {"host", "testhost"},
                  {"ddpbench_version", "0.1.0"},
                  {"build_type", "Release"},
                  {"compiler", "GNU 12.2.0"},
                  {"cuda_compiled", false},
                  {"nvtx_compiled", true},
                  {"cuda_devices", 0},
                  {"cpu_cores", 2},
                  {"git_commit", "abc1234"},
                  {"cpu_model", "Test CPU"},
                  {"versions", {{"gloo", "0.0.1"}, {"openblas", "0.3.21"}}},
                  {"env", {{"OMP_NUM_THREADS", "1"}}}}},
                {"suite",
                 {{"name", "test-suite"},
                  {"device", "cpu"},
                  {"quick", false},
                  {"workloads", {"mlp-small", "gpt-tiny"}},
                  {"modes", {"single", "dp", "ddp"}},
                  {"world_sizes", {1, 2, 4}},
                  {"steps", 20},
                  {"warmup", 3},
                  {"seed", 0},
                  {"per_device_batch", {{"mlp-small", 32}, {"gpt-tiny", 4}}},
                  {"bucket_sweep_mb", {0.25, 1, 25}},
                  {"sweep_workload", "mlp-small"},
                  {"overlap_off", true},
                  {"comm_hooks", {"fp16"}},
                  {"with_pytorch", true},
                  {"timeout_s", 300}}},
                {"gemm_peak",
                 {{"device", "cpu"},
                  {"flops_per_s", 1.1e11},
                  {"shapes",
                   {{{"workload", "mlp-small"},
                     {"m", 32},
                     {"n", 1024},
                     {"k", 1024},
                     {"flops_per_s", 1e11}}}}}},
                {"runs", json::array()}};
  json& runs = suite["runs"];
  for (const std::string w : {"mlp-small", "gpt-tiny"}) {
    const double t1 = w == "mlp-small" ? 3000.0 : 400.0;
    json single = make_run(w, "single", 1, "scaling");
    single["metrics"] = make_metrics("single", 1, t1, 32 * 1000.0 / t1);
    runs.push_back(single);
    for (int n : {2, 4}) {
      json ref = make_run(w, "single", 1, "reference", "b" + std::to_string(32 * n));
      ref["global_batch"] = 32 * n;
      ref["metrics"] = make_metrics("single", 1, t1, 32 * n * 1000.0 / t1);
      runs.push_back(ref);
      for (const std::string mode : {"dp", "ddp"}) {
        json r = make_run(w, mode, n, "scaling");
        const double eff = mode == "dp" ? 0.7 - 0.1 * n : 0.95 - 0.02 * n;
        const double samples = eff * n * t1;
        const double median = 32 * n * 1000.0 / samples;
        const double comm = 0.2 * median;
        r["metrics"] = make_metrics(mode, n, samples, median, comm, mode == "dp" ? comm : comm / 3);
        if (mode == "ddp") r["metrics"]["bucket_blame"] = make_bucket_blame(n);
        r["metrics"]["critical_path"] = make_critical_path(mode, n, median);
        r["scaling"] = {{"baseline", w + "/single/w1"},
                        {"weak_efficiency", eff},
                        {"strong_baseline", ref["id"]},
                        {"strong_speedup", eff * n * 0.9},
                        {"strong_efficiency", eff * 0.9}};
        r["correctness"] = {{"reference", ref["id"]},
                            {"max_rel_diff", 3e-7},
                            {"threshold", 1e-4},
                            {"passed", true}};
        runs.push_back(r);
      }
    }
  }
  // The DDP variants, all on mlp-small at w4 next to its default run (25 MB buckets).
  for (const double mb : {0.25, 1.0}) {
    json r =
        make_run("mlp-small", "ddp", 4, "bucket_sweep", mb == 1.0 ? "bucket-1mb" : "bucket-0.25mb");
    r["args"].push_back("--bucket-cap-mb");
    r["args"].push_back(mb == 1.0 ? "1" : "0.25");
    r["config"]["bucket_cap_mb"] = mb;
    r["metrics"] = make_metrics("ddp", 4, 9000 * mb / (mb + 0.5), 14.0 / mb + 8, 6.0 / mb, 1.0);
    r["correctness"] = {{"skipped", "bucket sweep: same math as the default run"}};
    runs.push_back(r);
  }
  // --bucket-cap-mb auto next to the sweep: its warm-up search and its choice.
  json autotune = make_run("mlp-small", "ddp", 4, "bucket_autotune", "bucket-auto");
  autotune["args"].push_back("--bucket-cap-mb");
  autotune["args"].push_back("auto");
  autotune["config"]["bucket_cap_auto"] = true;
  autotune["metrics"] = make_metrics("ddp", 4, 9600, 13.0, 5.0, 1.0);
  autotune["metrics"]["bucket_autotune"] = {{"candidates",
                                             {{{"cap_mb", 5.81}, {"median_ms", 13.5}},
                                              {{"cap_mb", 17.2}, {"median_ms", 14.0}},
                                              {{"cap_mb", 2.64}, {"median_ms", 13.2}}}},
                                            {"chosen_mb", 2.64}};
  autotune["correctness"] = {{"skipped", "a longer warm-up"}};
  runs.push_back(autotune);
  json no_overlap = make_run("mlp-small", "ddp", 4, "overlap", "no-overlap");
  no_overlap["args"].push_back("--no-overlap");
  no_overlap["config"]["no_overlap"] = true;
  no_overlap["metrics"] = make_metrics("ddp", 4, 8000, 16.0, 3.0, 3.0);
  runs.push_back(no_overlap);
  json hook = make_run("mlp-small", "ddp", 4, "comm_hook", "fp16-hook");
  hook["args"].push_back("--comm-hook");
  hook["args"].push_back("fp16");
  hook["config"]["comm_hook"] = "fp16";
  hook["metrics"] = make_metrics("ddp", 4, 10500, 12.2, 1.6, 0.5);
  hook["correctness"] = {{"reference", "mlp-small/single/w1/b128"},
                         {"max_rel_diff", 2e-4},
                         {"threshold", 1e-2},
                         {"passed", true}};
  runs.push_back(hook);
  // Group flags: one round of the default and static_graph.
  for (const std::string flag : {"default", "static_graph"}) {
    json f = make_run("mlp-small", "ddp", 4, "flags",
                      flag == "default" ? "flags-default-r0" : "flags-static-graph-r0");
    f["flag"] = {{"name", flag}, {"mechanism", "what " + flag + " changes"}};
    f["repeat"] = 0;
    f["metrics"] = make_metrics("ddp", 4, 10000, flag == "default" ? 12.8 : 11.9, 1.6, 0.5);
    runs.push_back(f);
  }
  // PyTorch alongside one DDP run.
  for (auto& r : runs) {
    if (r["id"] == "mlp-small/ddp/w2") {
      r["pytorch"] = {{"status", "ok"},
                      {"record", "runs/mlp-small_ddp_w2.pytorch.json"},
                      {"samples_per_s", r["metrics"]["samples_per_s"].get<double>() / 1.25},
                      {"step_time_ms", step_stats(20)},
                      {"overlap_ratio", 0.3}};
    }
  }
  // gpt-tiny's DDP at w4 failed: no metrics, an error instead.
  for (auto& r : runs) {
    if (r["id"] == "gpt-tiny/ddp/w4") {
      r["status"] = "failed";
      r["error"] = "rank 1 exited with signal 9 (SIGKILL) during step 3 & stopped the others";
      r.erase("metrics");
      r.erase("scaling");
      r.erase("correctness");
      r.erase("record");
    }
  }
  suite["projection"] = make_projection();
  return suite;
}

// The run with `id` in a suite (the fixture's ids are unique).
inline json& run_by_id(json& suite, const std::string& id) {
  for (auto& r : suite["runs"]) {
    if (r["id"] == id) return r;
  }
  throw std::runtime_error("no run " + id);
}

// A fresh directory under /tmp, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("ddpb_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace ddpb::testing
