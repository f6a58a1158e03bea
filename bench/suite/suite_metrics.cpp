#include "bench/suite/suite_metrics.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "bench/measure/metrics.h"
#include "bench/run/param_diff.h"
#include "bench/run/run_config.h"
#include "bench/suite/design_flags.h"
#include "core/check.h"
#include "workloads/family.h"
#include "workloads/model.h"

namespace ddpb::bench {
namespace {

using reports::RunRecord;
using reports::SuiteRecord;
using reports::SuiteRun;

int distinct_devices(const RunRecord& record) {
  std::set<std::string> devices;
  if (record.ranks) {
    for (const auto& r : *record.ranks) devices.insert(r.device);
  } else {
    const std::string& list = record.mode.devices;
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

bool measured(const SuiteRun* run) {
  return run && run->measured();
}

// A DP or DDP run of a model with BatchNorm at world size > 1 without --sync-bn: its
// statistics are per device, unlike the single-device reference's.
bool normalises_per_device(const SuiteRun& run) {
  if (run.world_size <= 1) return false;
  try {
    if (!family_of(find_workload(run.workload)).traits.batch_norm) return false;
  } catch (const UsageError&) {
    return false;  // an unknown workload fails elsewhere
  }
  return !run.run_config().sync_bn;
}

// Why a DP/DDP run has no correctness check against its single-device reference, if it has
// none: runs whose parameters differ from one device's by design, or whose step count does.
std::optional<std::string> correctness_skip_reason(const SuiteRun& run) {
  if (normalises_per_device(run)) {
    return "BatchNorm normalises each device's part of the batch, so DP and DDP do not equal one "
           "device by design (DDP with --sync-bn does); scripts/peer/replay_pytorch.py checks "
           "them against PyTorch run the same way";
  }
  if (const DesignFlag* flag = flag_of(run); flag && flag->syncs_batch_norm) {
    return "SyncBatchNorm equals one device on the whole batch, but over a suite's steps float32 "
           "rounding flips (ReLU and max-pool near-ties) grow through BatchNorm's biases "
           "(resnet-tiny: rel_l2 2.7e-3 after 15 steps, 0.47 after 30, in a BatchNorm bias); "
           "ReplayTest.ResNetTinyDdpSyncBatchNormIsOneFullBatch checks --sync-bn against a "
           "float64 replay";
  }
  if (run.group == reports::RunGroup::BucketAutotune) {
    return "trains through the autotuner's longer warm-up, so no single-device run of the suite "
           "has its step count; tests/impl_ddp (DdpBucketAutotune) shows it equals a run with "
           "the chosen cap fixed";
  }
  if (run.run_config().comm_hook == "powersgd" &&
      (run.group == reports::RunGroup::CommHook || run.group == reports::RunGroup::Flags)) {
    return "PowerSGD approximates every gradient by design, so its parameters drift from the "
           "reference's; the report's comm hooks section shows its loss curve next to fp32's, "
           "and scripts/peer/powersgd_reference.py checks it against a float64 reference";
  }
  return std::nullopt;
}

// The parameter difference from the reference, judged against `threshold`.
reports::CorrectnessInfo compare_parameters(const std::string& run_params,
                                            const std::string& ref_params, double threshold) {
  reports::CorrectnessInfo c;
  c.threshold = threshold;
  try {
    const ParamDiff d = param_diff(run_params, ref_params);
    // A NaN or Inf parameter is as wrong as it gets; JSON has no Inf, so say so in range.
    const auto shown = [](double v) {
      return std::isfinite(v) ? v : std::numeric_limits<double>::max();
    };
    c.max_rel_diff = shown(d.max_rel);
    c.rel_l2_diff = shown(d.rel_l2);
    c.worst_tensor = d.worst_tensor;
    c.metric = "rel_l2_diff";
    c.passed = d.rel_l2 <= threshold;
  } catch (const std::exception& e) {
    c.passed = false;
    c.error = e.what();
  }
  return c;
}

}  // namespace

reports::RunMetrics run_metrics(const RunRecord& record, double peak) {
  const reports::RunSummary& s = record.summary;
  reports::RunMetrics m;
  m.samples_per_s = s.samples_per_s;
  m.tokens_per_s = s.tokens_per_s;
  m.step_time_ms = s.step_time_ms;
  m.phases_median_ms = s.phases_median_ms;
  m.achieved_flops_per_s = s.achieved_flops_per_s;
  m.straggler_skew = s.straggler_skew.value_or(1.0);
  m.bucket_blame = s.bucket_blame;
  m.critical_path = s.critical_path;
  std::vector<double> per_rank;
  if (record.ranks) {
    for (const auto& r : *record.ranks) per_rank.push_back(r.step_time_ms.median);
  } else {
    per_rank.push_back(s.step_time_ms.median);
  }
  m.per_rank_median_ms = per_rank;
  if (s.comm) {
    m.comm_ms = s.comm->comm_ms;
    m.comm_exposed_ms = s.comm->comm_exposed_ms;
    m.overlap_ratio = s.comm->overlap_ratio;
    m.busbw = s.comm->busbw;
    m.buckets = s.comm->buckets;
    m.comm_bytes_per_step = s.comm->bytes_per_step;
    m.bus_bytes_per_step = s.comm->bus_bytes_per_step;
    m.gradient_bus_bytes_per_step = s.comm->gradient_bus_bytes_per_step;
    // DP's reduce: the bytes of its one collective a step (parameters x (devices - 1)).
    if (!m.comm_bytes_per_step && s.comm->bytes)
      m.comm_bytes_per_step = static_cast<int64_t>(*s.comm->bytes);
  }
  std::vector<double> losses;  // warm-up steps included: they train too
  for (const auto& step : record.steps) losses.push_back(step.loss);
  m.loss_per_step = losses;
  if (const auto it = record.mode.details.find("bucket_autotune");
      record.mode.details.is_object() && it != record.mode.details.end())
    m.bucket_autotune = reports::record_from_json<reports::BucketAutotuneInfo>(*it);
  const int devices = distinct_devices(record);
  m.devices = devices;
  if (peak > 0) m.flop_fraction = flop_fraction(s.achieved_flops_per_s, peak, devices);
  int64_t peak_bytes = reports::peak_memory_bytes(record.memory);
  if (record.ranks) {
    std::vector<int64_t> per_rank_peak;
    for (const auto& r : *record.ranks) {
      per_rank_peak.push_back(reports::peak_memory_bytes(r.memory));
      peak_bytes = std::max(peak_bytes, per_rank_peak.back());
    }
    m.rank_peak_memory_bytes = per_rank_peak;
  }
  m.peak_memory_bytes = peak_bytes;
  m.memory = record.memory;
  m.loader = s.loader;
  // Each rank's median data wait, from its phases: the input-bound rule names the rank.
  std::vector<double> waits;
  const auto data_of = [](const std::vector<reports::PhaseMedian>& phases) {
    for (const reports::PhaseMedian& p : phases) {
      if (p.phase == "data") return p.median_ms;
    }
    return 0.0;
  };
  if (record.ranks) {
    for (const auto& r : *record.ranks) waits.push_back(data_of(r.phases_median_ms));
  } else {
    waits.push_back(data_of(s.phases_median_ms));
  }
  m.per_rank_data_wait_ms = waits;
  m.hosts = record.hosts;
  return m;
}

// The id of the reference design's run of `workload` at one device, at `global_batch` when
// given (the strong-scaling baseline and the correctness reference), else the matrix's own.
static std::string reference_id(const SuiteRecord& suite, const std::string& workload,
                                std::optional<int64_t> global_batch = std::nullopt) {
  const reports::DesignInfo* ref = suite.reference_design();
  const std::string id = workload + "/" + (ref ? ref->name : std::string("?")) + "/w1";
  return global_batch ? id + "/b" + std::to_string(*global_batch) : id;
}

void derive_scaling(SuiteRecord& suite) {
  for (SuiteRun& run : suite.runs) {
    if (run.group != reports::RunGroup::Scaling || !run.measured()) continue;
    const int n = static_cast<int>(run.world_size);
    const std::string base_id = reference_id(suite, run.workload);
    const SuiteRun* base = suite.find_run(base_id);
    reports::ScalingInfo sc;
    if (measured(base)) {
      sc.baseline = base_id;
      sc.weak_efficiency =
          weak_scaling_efficiency(run.metrics->samples_per_s, n, base->metrics->samples_per_s);
    }
    // Strong scaling: the single device at this run's global batch.
    const std::string strong_id =
        n == 1 ? base_id : reference_id(suite, run.workload, run.global_batch.value_or(0));
    const SuiteRun* strong = suite.find_run(strong_id);
    if (measured(strong)) {
      const double t1 = strong->metrics->step_time_ms.median;
      const double tn = run.metrics->step_time_ms.median;
      sc.strong_baseline = strong_id;
      sc.strong_speedup = strong_speedup(t1, tn);
      sc.strong_efficiency = strong_efficiency(t1, tn, n);
    }
    if (sc.baseline || sc.strong_baseline) run.scaling = sc;
  }
}

namespace {
// The id of the single-device run that `run`'s final parameters are compared with: none for
// a run of the reference design itself or one whose correctness is skipped by design.
std::optional<std::string> correctness_reference(const SuiteRecord& suite, const SuiteRun& run) {
  if (!suite.design_of(run).parallel || correctness_skip_reason(run)) return std::nullopt;
  // --accumulate K: a step is K micro-batches of the global batch, one of K times as many.
  const int64_t k = std::max<int64_t>(1, run.run_config().accumulate);
  const int64_t samples_per_step = run.global_batch.value_or(0) * k;
  return run.world_size == 1 ? reference_id(suite, run.workload)
                             : reference_id(suite, run.workload, samples_per_step);
}
}  // namespace

bool needs_parameters(const SuiteRecord& suite, const SuiteRun& run) {
  if (correctness_reference(suite, run)) return true;
  return std::any_of(suite.runs.begin(), suite.runs.end(), [&](const SuiteRun& other) {
    return correctness_reference(suite, other) == run.id;
  });
}

void derive_correctness(SuiteRecord& suite, const std::string& dir) {
  for (SuiteRun& run : suite.runs) {
    if (!suite.design_of(run).parallel || !run.measured()) continue;
    if (run.correctness && (run.correctness->passed || run.correctness->skipped)) continue;
    if (const auto why = correctness_skip_reason(run)) {
      run.correctness = reports::CorrectnessInfo::skipped_because(*why);
      continue;
    }
    const std::string ref_id = *correctness_reference(suite, run);
    const SuiteRun* ref = suite.find_run(ref_id);
    if (!ref) {
      run.correctness = reports::CorrectnessInfo::skipped_because(
          "no single-device run at this global batch in the suite", ref_id);
      continue;
    }
    if (!measured(ref)) continue;  // not run yet (or failed: decided at the end of the suite)
    // A compressing hook (fp16, bf16, PowerSGD) changes the result by design.
    const bool lossy = run.run_config().comm_hook != "none";
    const double threshold = lossy ? suite.suite.hook_correctness_threshold.value_or(5e-2)
                                   : suite.suite.correctness_threshold.value_or(1e-2);
    const auto params = [&](const SuiteRun& r) {
      return (std::filesystem::path(dir) / r.params.value_or("")).string();
    };
    run.correctness = compare_parameters(params(run), params(*ref), threshold);
    run.correctness->reference = ref_id;
  }
}

}  // namespace ddpb::bench
