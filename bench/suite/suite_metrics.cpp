#include "bench/suite/suite_metrics.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "bench/run/metrics.h"
#include "bench/run/param_diff.h"
#include "core/check.h"
#include "workloads/family.h"
#include "workloads/model.h"

namespace ddpb::bench {
namespace {

int distinct_devices(const nlohmann::json& record) {
  std::set<std::string> devices;
  if (record.contains("ranks")) {
    for (const auto& r : record["ranks"]) devices.insert(r.value("device", ""));
  } else {
    const std::string list = record["mode"].value("devices", "");
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = list.find(',', start);
      devices.insert(list.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return std::max<int>(1, static_cast<int>(devices.size()));
}

const nlohmann::json* find_run(const nlohmann::json& suite, const std::string& id) {
  for (const auto& r : suite["runs"]) {
    if (r["id"] == id) return &r;
  }
  return nullptr;
}

bool ok(const nlohmann::json* run) {
  return run && run->value("status", "") == "ok" && run->contains("metrics");
}

// A DP or DDP run of a model with BatchNorm at world size > 1 without --sync-bn: its
// statistics are per device, unlike the single-device reference's.
bool normalises_per_device(const nlohmann::json& run) {
  if (run["world_size"].get<int>() <= 1) return false;
  try {
    if (!family_of(find_workload(run["workload"].get<std::string>())).traits.batch_norm)
      return false;
  } catch (const UsageError&) {
    return false;  // an unknown workload fails elsewhere
  }
  const auto& args = run["args"];
  return std::find(args.begin(), args.end(), "--sync-bn") == args.end();
}

// Why a DP/DDP run has no correctness check against its single-device reference, if it has
// none: runs whose parameters differ from one device's by design, or whose step count does.
std::optional<std::string> correctness_skip_reason(const nlohmann::json& run) {
  if (normalises_per_device(run)) {
    return "BatchNorm normalises each device's part of the batch, so DP and DDP do not equal one "
           "device by design (DDP with --sync-bn does); scripts/peer/replay_pytorch.py checks "
           "them against PyTorch run the same way";
  }
  if (run["group"] == "bucket_autotune") {
    return "trains through the autotuner's longer warm-up, so no single-device run of the suite "
           "has its step count; tests/impl_ddp (DdpBucketAutotune) shows it equals a run with "
           "the chosen cap fixed";
  }
  if (run["variant"] == "powersgd-hook") {
    return "PowerSGD approximates every gradient by design, so its parameters drift from the "
           "reference's; the report's comm hooks section shows its loss curve next to fp32's, "
           "and scripts/peer/powersgd_reference.py checks it against a float64 reference";
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json run_metrics(const nlohmann::json& record, double peak) {
  const auto& s = record["summary"];
  nlohmann::json m = {{"samples_per_s", s["samples_per_s"]},
                      {"tokens_per_s", s["tokens_per_s"]},
                      {"step_time_ms", s["step_time_ms"]},
                      {"phases_median_ms", s["phases_median_ms"]},
                      {"achieved_flops_per_s", s["achieved_flops_per_s"]},
                      {"straggler_skew", s.value("straggler_skew", 1.0)}};
  nlohmann::json per_rank = nlohmann::json::array();
  if (record.contains("ranks")) {
    for (const auto& r : record["ranks"]) per_rank.push_back(r["step_time_ms"]["median"]);
  } else {
    per_rank.push_back(s["step_time_ms"]["median"]);
  }
  m["per_rank_median_ms"] = per_rank;
  if (s.contains("comm")) {
    const auto& c = s["comm"];
    m["comm_ms"] = c["comm_ms"];
    m["comm_exposed_ms"] = c["comm_exposed_ms"];
    m["overlap_ratio"] = c["overlap_ratio"];
    m["busbw"] = c["busbw"];
    if (c.contains("buckets")) m["buckets"] = c["buckets"];
    if (c.contains("bytes_per_step")) m["comm_bytes_per_step"] = c["bytes_per_step"];
  }
  nlohmann::json losses = nlohmann::json::array();  // warm-up steps included: they train too
  for (const auto& step : record["steps"]) losses.push_back(step["loss"]);
  m["loss_per_step"] = losses;
  if (const auto* d = record["mode"].contains("details") ? &record["mode"]["details"] : nullptr;
      d && d->contains("bucket_autotune"))
    m["bucket_autotune"] = (*d)["bucket_autotune"];
  const int devices = distinct_devices(record);
  m["devices"] = devices;
  if (peak > 0)
    m["flop_fraction"] = flop_fraction(s["achieved_flops_per_s"].get<double>(), peak, devices);
  int64_t peak_bytes = 0;
  for (const auto& d : record["memory"])
    peak_bytes = std::max(peak_bytes, d["peak_bytes"].get<int64_t>());
  if (record.contains("ranks")) {
    nlohmann::json per_rank_peak = nlohmann::json::array();
    for (const auto& r : record["ranks"]) {
      int64_t rank_peak = 0;
      for (const auto& d : r["memory"])
        rank_peak = std::max(rank_peak, d["peak_bytes"].get<int64_t>());
      per_rank_peak.push_back(rank_peak);
      peak_bytes = std::max(peak_bytes, rank_peak);
    }
    m["rank_peak_memory_bytes"] = per_rank_peak;
  }
  m["peak_memory_bytes"] = peak_bytes;
  m["memory"] = record["memory"];
  return m;
}

void derive_scaling(nlohmann::json& suite) {
  for (auto& run : suite["runs"]) {
    if (run["group"] != "scaling" || !ok(&run)) continue;
    const std::string w = run["workload"];
    const int n = run["world_size"];
    const std::string base_id = w + "/single/w1";
    const auto* base = find_run(suite, base_id);
    nlohmann::json sc = nlohmann::json::object();
    if (ok(base)) {
      sc["baseline"] = base_id;
      sc["weak_efficiency"] =
          weak_scaling_efficiency(run["metrics"]["samples_per_s"].get<double>(), n,
                                  (*base)["metrics"]["samples_per_s"].get<double>());
    }
    // Strong scaling: the single device at this run's global batch.
    const std::string strong_id =
        n == 1 ? base_id : w + "/single/w1/b" + std::to_string(run["global_batch"].get<int64_t>());
    const auto* strong = find_run(suite, strong_id);
    if (ok(strong)) {
      const double t1 = (*strong)["metrics"]["step_time_ms"]["median"].get<double>();
      const double tn = run["metrics"]["step_time_ms"]["median"].get<double>();
      sc["strong_baseline"] = strong_id;
      sc["strong_speedup"] = strong_speedup(t1, tn);
      sc["strong_efficiency"] = strong_efficiency(t1, tn, n);
    }
    if (!sc.empty()) run["scaling"] = sc;
  }
}

void derive_correctness(nlohmann::json& suite, const std::string& dir) {
  const auto& spec = suite["suite"];
  for (auto& run : suite["runs"]) {
    if (run["mode"] == "single" || !ok(&run)) continue;
    if (run.contains("correctness") &&
        (run["correctness"].contains("passed") || run["correctness"].contains("skipped"))) {
      continue;
    }
    const std::string w = run["workload"];
    const int64_t g = run["global_batch"];
    if (const auto why = correctness_skip_reason(run)) {
      run["correctness"] = {{"skipped", *why}};
      continue;
    }
    const std::string ref_id = run["world_size"].get<int>() == 1
                                   ? w + "/single/w1"
                                   : w + "/single/w1/b" + std::to_string(g);
    const auto* ref = find_run(suite, ref_id);
    if (!ref) {
      run["correctness"] = {{"reference", ref_id},
                            {"skipped", "no single-device run at this global batch in the suite"}};
      continue;
    }
    if (!ok(ref)) continue;  // not run yet (or failed: decided at the end of the suite)
    const bool lossy = run["variant"].get<std::string>().find("-hook") != std::string::npos;
    const double threshold = lossy ? spec.value("hook_correctness_threshold", 5e-2)
                                   : spec.value("correctness_threshold", 1e-2);
    const auto params = [&](const nlohmann::json& r) {
      return (std::filesystem::path(dir) / r["params"].get<std::string>()).string();
    };
    try {
      const ParamDiff d = param_diff(params(run), params(*ref));
      // A NaN or Inf parameter is as wrong as it gets; JSON has no Inf, so say so in range.
      const auto shown = [](double v) {
        return std::isfinite(v) ? v : std::numeric_limits<double>::max();
      };
      run["correctness"] = {{"reference", ref_id},
                            {"max_rel_diff", shown(d.max_rel)},
                            {"rel_l2_diff", shown(d.rel_l2)},
                            {"worst_tensor", d.worst_tensor},
                            {"metric", "rel_l2_diff"},
                            {"threshold", threshold},
                            {"passed", d.rel_l2 <= threshold}};
    } catch (const std::exception& e) {
      run["correctness"] = {
          {"reference", ref_id}, {"threshold", threshold}, {"passed", false}, {"error", e.what()}};
    }
  }
}

}  // namespace ddpb::bench
