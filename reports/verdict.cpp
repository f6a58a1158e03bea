#include "reports/verdict.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "reports/critical_path_view.h"
#include "reports/loader_view.h"
#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

// Note [Verdict shares]
// The bottleneck rules compare a phase group's share of its run's median step with one
// threshold, kShare: a fifth of the step is where removing the group entirely would speed the
// step up by 25%, large enough to name and small enough that the named group is the one worth
// attacking first. The machine rule is about efficiency instead: below kMachineEfficiency of
// ideal weak scaling, with at least as many CPU ranks as cores, no design can scale.
constexpr double kShare = 0.2;
constexpr double kMachineEfficiency = 0.8;

// Note [Input-bound rule]
// A run is input-bound on rank R when R's median wait for its next batch (the data phase:
// the training thread blocked in the loader's next()) is at least kInputShare of its median
// step, the share the TensorBoard profiler's "DataLoader" rule used. The counterfactual "step
// time if input were free" is the step minus that exposed wait: what the step would take with
// a loader that always had the batch ready. The advice names what the record says could help:
// more workers when fewer than the cores, page-locked memory on CUDA, u8 images normalized on
// the device for image folders on CUDA, and the loader's own capacity against what training
// asks of it.
constexpr double kInputShare = 0.05;

// The runs here are ok with metrics (scaling_run and the sweep's candidates check it); a run
// without metrics reads as a zero step.
double median_ms(const SuiteRun& run) {
  return run.metrics ? run.metrics->step_time_ms.median : 0;
}
double stddev_ms(const SuiteRun& run) {
  return run.metrics ? run.metrics->step_time_ms.stddev : 0;
}
template <typename T>
std::optional<T> metric(const SuiteRun* run, std::optional<T> RunMetrics::*field) {
  return run && run->metrics ? (*run->metrics).*field : std::nullopt;
}
double weak_efficiency(const SuiteRun* run) {
  return run && run->scaling ? run->scaling->weak_efficiency.value_or(0) : 0;
}

// The verdict compares DP with DDP (its rows and sentences are of the two).
const std::string kDp = "dp", kDdp = "ddp";

// The ok scaling-group run of `mode` for workload `w` at world size `n` (no variant).
const SuiteRun* scaling_run(const SuiteRecord& suite, const std::string& w, const std::string& mode, int n) {
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == RunGroup::Scaling && r.workload == w && r.mode == mode &&
        r.world_size == n && r.variant.empty())
      return &r;
  }
  return nullptr;
}

// Same workload and world size, in `group`, ok.
std::vector<const SuiteRun*> companions(const SuiteRecord& suite, const SuiteRun& run,
                                        RunGroup group) {
  std::vector<const SuiteRun*> out;
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == group && r.workload == run.workload &&
        r.world_size == run.world_size)
      out.push_back(&r);
  }
  return out;
}

std::string ms(double v) {
  return format_number(v) + " ms";
}

// "12.3 ± 0.4 ms".
std::string step_cell(const SuiteRun* run) {
  if (!run) return "did not run";
  return format_number(median_ms(*run)) + " ± " + format_number(stddev_ms(*run)) + " ms";
}

struct Comparison {
  std::string faster;  // "DP", "DDP", "tie", "cannot rank", or "" when one side is missing
  std::string by;
  // The faster design's factor (slower step over faster step): the median over the rounds
  // and their range; `rounds` is how many rounds had both designs measured.
  double factor = 1, factor_lo = 1, factor_hi = 1;
  size_t rounds = 0;
};

// Note [Factors from rounds]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A design factor is the ratio of two median steps, each measured once in its own process on
// a machine other processes share: one draw. The suite runs the designs again in alternated
// rounds (Note [Design rounds], bench/suite/suite_spec.cpp), and the verdict takes, per round,
// DP's median step over DDP's. The winner is the design faster in every round, by the median
// factor, shown with the rounds' range ("1.25x, 1.22-1.46x over 3 rounds"); when the rounds
// disagree on the winner, or the median factor is inside the runs' own relative noise, it is
// a tie and the row says why. A suite of one round (quick, or design_rounds 1) falls back to
// the one pair and says it has no spread.
struct RoundPair {
  const SuiteRun* dp = nullptr;
  const SuiteRun* ddp = nullptr;
};

// Round `round` (0: the matrix) of `mode` at (w, n), measured, or null.
const SuiteRun* round_run(const SuiteRecord& suite, const std::string& w, const std::string& mode, int n,
                          int64_t round) {
  if (round == 0) return scaling_run(suite, w, mode, n);
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == RunGroup::Rounds && r.workload == w && r.mode == mode &&
        r.world_size == n && r.repeat == round)
      return &r;
  }
  return nullptr;
}

// DP's median step over DDP's in each round with both measured, round 0 first.
std::vector<double> round_factors(const SuiteRecord& suite, const std::string& w, int n) {
  std::vector<double> out;
  int64_t last_round = 0;
  for (const SuiteRun& r : suite.runs)
    if (r.group == RunGroup::Rounds && r.workload == w && r.world_size == n && r.repeat)
      last_round = std::max(last_round, *r.repeat);
  for (int64_t k = 0; k <= last_round; ++k) {
    const SuiteRun* dp = round_run(suite, w, kDp, n, k);
    const SuiteRun* ddp = round_run(suite, w, kDdp, n, k);
    if (dp && ddp && median_ms(*dp) > 0 && median_ms(*ddp) > 0)
      out.push_back(median_ms(*dp) / median_ms(*ddp));
  }
  return out;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Note [Factors from rounds]: the comparison over two or more rounds.
Comparison compare_rounds(const SuiteRun& dp, const SuiteRun& ddp,
                          const std::vector<double>& dp_over_ddp) {
  Comparison c;
  c.rounds = dp_over_ddp.size();
  const auto [lo, hi] = std::minmax_element(dp_over_ddp.begin(), dp_over_ddp.end());
  const double med = median_of(dp_over_ddp);
  // The runs' own relative noise (round 0's): a factor closer to 1 than this is no factor.
  const double noise = std::max(stddev_ms(dp) / median_ms(dp), stddev_ms(ddp) / median_ms(ddp));
  if (*lo < 1 && *hi > 1) {
    c.faster = "tie";
    c.by = fmt::format("the rounds disagree: DP's step over DDP's {:.2f}-{:.2f} over {} rounds",
                       *lo, *hi, c.rounds);
    return c;
  }
  if (std::fabs(med - 1) <= noise) {
    c.faster = "tie";
    c.by = fmt::format("{:.1f}% apart over {} rounds, inside the noise ({:.1f}%)",
                       (std::max(med, 1 / med) - 1) * 100, c.rounds, noise * 100);
    return c;
  }
  const bool ddp_faster = med > 1;  // DP's step is the longer one
  c.faster = ddp_faster ? "DDP" : "DP";
  c.factor = ddp_faster ? med : 1 / med;
  c.factor_lo = ddp_faster ? *lo : 1 / *hi;
  c.factor_hi = ddp_faster ? *hi : 1 / *lo;
  c.by = fmt::format("{:.2f}x ({:.2f}-{:.2f}x over {} rounds)", c.factor, c.factor_lo, c.factor_hi,
                     c.rounds);
  return c;
}

// A suite of fewer measured steps than this is quick: its ties are "cannot rank".
constexpr double kRankingSteps = 10;

// The suite's measured steps per run when it is too short to rank designs inside its noise.
std::optional<double> quick_steps(const SuiteRecord& suite) {
  const auto steps = suite.suite.steps;
  if (suite.suite.quick.value_or(false) || (steps && *steps < kRankingSteps))
    return static_cast<double>(steps.value_or(0));
  return std::nullopt;
}

Comparison compare_designs(const SuiteRun* dp, const SuiteRun* ddp,
                           std::optional<double> quick_steps,
                           const std::vector<double>& dp_over_ddp) {
  if (!dp || !ddp) return {"", "-"};
  const double a = median_ms(*dp), b = median_ms(*ddp);
  const double sa = stddev_ms(*dp), sb = stddev_ms(*ddp);
  if (a <= 0 || b <= 0) return {"", "-"};
  if (dp_over_ddp.size() >= 2) return compare_rounds(*dp, *ddp, dp_over_ddp);
  const double pct = (std::max(a, b) / std::min(a, b) - 1) * 100;
  Comparison c;
  c.rounds = 1;
  if (within_noise(a, sa, b, sb) && quick_steps) {
    c.faster = "cannot rank";
    c.by = fmt::format("{:.1f}% apart, inside the noise ({:.3g} ms) of {:g} steps", pct,
                       std::max(sa, sb), *quick_steps);
  } else if (within_noise(a, sa, b, sb)) {
    c.faster = "tie";
    c.by = fmt::format("{:.1f}% apart, inside the noise ({:.3g} ms)", pct, std::max(sa, sb));
  } else {
    c.faster = a < b ? "DP" : "DDP";
    c.factor = c.factor_lo = c.factor_hi = std::max(a, b) / std::min(a, b);
    c.by = fmt::format("{:.1f}% shorter step (one round: no spread)", pct);
  }
  return c;
}

// DP's device-0 memory premium: device 0's peak minus the largest other device's.
std::string dp_memory_cell(const SuiteRun* dp) {
  if (!dp) return "-";
  const auto memory = metric(dp, &RunMetrics::memory);
  if (!memory || memory->size() < 2) return "n/a (one shared allocator)";
  const double first = static_cast<double>(memory->front().peak_bytes);
  double others = 0;
  for (size_t i = 1; i < memory->size(); ++i)
    others = std::max(others, static_cast<double>((*memory)[i].peak_bytes));
  return "+" + format_bytes(std::max(0.0, first - others)) + " on device 0 (" +
         format_bytes(first) + " vs " + format_bytes(others) + ")";
}

std::string ddp_memory_cell(const SuiteRun* ddp) {
  if (!ddp) return "-";
  const auto ranks = metric(ddp, &RunMetrics::rank_peak_memory_bytes);
  if (ranks && !ranks->empty()) {
    const auto [lo, hi] = std::minmax_element(ranks->begin(), ranks->end());
    const double l = static_cast<double>(*lo), h = static_cast<double>(*hi);
    return format_bytes(l) + (h > l ? " to " + format_bytes(h) : "") + " per rank";
  }
  return format_bytes(run_peak_memory(*ddp)) + " per rank";
}

std::string overlap_cell(const SuiteRun* ddp) {
  if (!ddp) return "-";
  return format_percent(metric(ddp, &RunMetrics::overlap_ratio)) + " of " +
         ms(metric(ddp, &RunMetrics::comm_ms).value_or(0)) + " hidden";
}

double bucket_cap_mb(const SuiteRun& run) {
  return run_bucket_cap_mb(run).value_or(25.0);
}

// "; auto chose 8.8 MB (45.1 ms)" when the suite has a --bucket-cap-mb auto run there.
std::string autotune_note(const SuiteRecord& suite, const SuiteRun& ddp) {
  for (const SuiteRun* r : companions(suite, ddp, RunGroup::BucketAutotune)) {
    const auto& tuned = r->metrics->bucket_autotune;
    if (tuned && tuned->chosen_mb)
      return fmt::format("; auto chose {:g} MB ({})", *tuned->chosen_mb, ms(median_ms(*r)));
  }
  return "";
}

// The measured cap with the shortest median step among the bucket sweep and the default run.
std::string best_bucket_cell(const SuiteRecord& suite, const SuiteRun* ddp) {
  if (!ddp) return "-";
  std::vector<const SuiteRun*> candidates = {ddp};
  for (const SuiteRun* r : companions(suite, *ddp, RunGroup::BucketSweep)) candidates.push_back(r);
  const std::string tuned = autotune_note(suite, *ddp);
  if (candidates.size() == 1) return "not swept" + tuned;
  const SuiteRun* best = *std::min_element(
      candidates.begin(), candidates.end(),
      [](const SuiteRun* a, const SuiteRun* b) { return median_ms(*a) < median_ms(*b); });
  if (best == ddp)
    return fmt::format("{:g} MB, the default ({})", bucket_cap_mb(*ddp), ms(median_ms(*ddp))) +
           tuned;
  return fmt::format("{:g} MB ({} vs {} at {:g} MB)", bucket_cap_mb(*best), ms(median_ms(*best)),
                     ms(median_ms(*ddp)), bucket_cap_mb(*ddp)) +
         tuned;
}

}  // namespace

PhaseGroups group_phases(const SuiteRun& run) {
  PhaseGroups g;
  if (!run.metrics || !run.metrics->phases_median_ms) return g;
  static const std::map<std::string_view, double PhaseGroups::*> kGroup = {
      {"forward", &PhaseGroups::compute_ms},     {"loss", &PhaseGroups::compute_ms},
      {"backward", &PhaseGroups::compute_ms},    {"backward_compute", &PhaseGroups::compute_ms},
      {"scatter", &PhaseGroups::traffic_ms},     {"replicate", &PhaseGroups::traffic_ms},
      {"gather", &PhaseGroups::traffic_ms},      {"reduce", &PhaseGroups::reduce_ms},
      {"comm_exposed", &PhaseGroups::reduce_ms}, {"buffer_broadcast", &PhaseGroups::sync_ms},
      {"sync_bn", &PhaseGroups::sync_ms},        {"data", &PhaseGroups::data_ms},
      {"optimizer", &PhaseGroups::optimizer_ms}};
  for (const PhaseMedian& p : *run.metrics->phases_median_ms) {
    const auto it = kGroup.find(p.phase);
    if (it != kGroup.end()) g.*(it->second) += p.median_ms;
  }
  return g;
}

bool within_noise(double median_a, double stddev_a, double median_b, double stddev_b) {
  return std::fabs(median_a - median_b) <= std::max(stddev_a, stddev_b);
}

std::string bottleneck_kind(const BottleneckInputs& in) {
  const SuiteRun* winner = in.dp && in.ddp
                               ? (median_ms(*in.dp) < median_ms(*in.ddp) ? in.dp : in.ddp)
                               : (in.dp ? in.dp : in.ddp);
  if (!winner) return "";
  const auto share = [](const SuiteRun& run, double part) {
    const double step = median_ms(run);
    return step > 0 ? part / step : 0.0;
  };
  if (share(*winner, group_phases(*winner).data_ms) >= kShare) return "data";
  const double best_eff = std::max(weak_efficiency(in.dp), weak_efficiency(in.ddp));
  if (in.device == "cpu" && in.cpu_cores > 0 && in.world_size >= in.cpu_cores &&
      in.world_size > 1 && best_eff < kMachineEfficiency)
    return "machine";
  if (in.ddp && share(*in.ddp, group_phases(*in.ddp).reduce_ms) >= kShare)
    return "ddp-exposed-comm";
  if (in.dp) {
    const PhaseGroups g = group_phases(*in.dp);
    if (share(*in.dp, g.traffic_ms + g.reduce_ms) >= kShare) return "dp-device0-traffic";
  }
  return "compute";
}

namespace {

// One phase group's difference between DP and DDP, with the sentence that states it.
struct GroupDiff {
  double delta_ms = 0;
  std::string text;
};

std::vector<GroupDiff> group_diffs(const SuiteRun& dp, const SuiteRun& ddp) {
  const PhaseGroups a = group_phases(dp), b = group_phases(ddp);
  const double ddp_comm = metric(&ddp, &RunMetrics::comm_ms).value_or(0);
  std::vector<GroupDiff> d = {
      {a.compute_ms - b.compute_ms,
       fmt::format("compute: DP {} (forward, loss, backward), DDP {} (forward, backward)",
                   ms(a.compute_ms), ms(b.compute_ms))},
      {a.traffic_ms,
       fmt::format("DP spends {} in scatter + replicate + gather on device 0; DDP has no such "
                   "phase",
                   ms(a.traffic_ms))},
      {a.reduce_ms - b.reduce_ms,
       fmt::format("gradients: DP reduce_adds for {} after backward; DDP leaves {} of its {} of "
                   "AllReduce exposed after backward",
                   ms(a.reduce_ms), format_number(b.reduce_ms), ms(ddp_comm))},
      {a.sync_ms - b.sync_ms,
       fmt::format("buffer and BatchNorm sync: DP {}, DDP {}", ms(a.sync_ms), ms(b.sync_ms))},
      {a.data_ms - b.data_ms,
       fmt::format("data loading: DP {}, DDP {}", ms(a.data_ms), ms(b.data_ms))},
      {a.optimizer_ms - b.optimizer_ms,
       fmt::format("optimizer: DP {} (device 0 only), DDP {} (every rank)", ms(a.optimizer_ms),
                   ms(b.optimizer_ms))}};
  std::stable_sort(d.begin(), d.end(), [](const GroupDiff& x, const GroupDiff& y) {
    return std::fabs(x.delta_ms) > std::fabs(y.delta_ms);
  });
  d.resize(3);
  return d;
}

// Sorted world sizes > 1 at which the workload has a DP or DDP scaling run.
std::vector<int> parallel_world_sizes(const SuiteRecord& suite, const std::string& w) {
  std::set<int> sizes;
  for (const SuiteRun& r : suite.runs) {
    if (r.group == RunGroup::Scaling && r.workload == w && suite.design_of(r).parallel &&
        r.world_size > 1)
      sizes.insert(static_cast<int>(r.world_size));
  }
  return {sizes.begin(), sizes.end()};
}

std::string bottleneck_paragraph(const std::string& w, const BottleneckInputs& in) {
  const std::string kind = bottleneck_kind(in);
  const std::string at = fmt::format("{} at world size {}: ", w, in.world_size);
  const SuiteRun* dp = in.dp;
  const SuiteRun* ddp = in.ddp;
  if (kind.empty()) return at + "no DP or DDP run succeeded, so there is nothing to explain.";
  if (kind == "data") {
    const SuiteRun& r = dp ? *dp : *ddp;
    return at + fmt::format("data loading. Waiting for the next batch takes {} of the {} step.",
                            ms(group_phases(r).data_ms), ms(median_ms(r)));
  }
  if (kind == "machine") {
    return at + fmt::format(
                    "the machine. {} ranks on {} CPU cores leave no core for communication: "
                    "every collective and every copy competes with compute for the same cores, "
                    "so neither design gets near linear scaling (best weak-scaling efficiency "
                    "{}).",
                    in.world_size, in.cpu_cores,
                    format_percent(std::max(weak_efficiency(dp), weak_efficiency(ddp))));
  }
  if (kind == "ddp-exposed-comm") {
    return at + fmt::format(
                    "DDP's exposed communication. {} of its {} step is AllReduce left "
                    "after backward (overlap {}); more compute per bucket or fewer bytes "
                    "(a comm hook) would hide it.",
                    ms(group_phases(*ddp).reduce_ms), ms(median_ms(*ddp)),
                    format_percent(metric(ddp, &RunMetrics::overlap_ratio)));
  }
  if (kind == "dp-device0-traffic") {
    const PhaseGroups g = group_phases(*dp);
    return at + fmt::format(
                    "DP's device-0 traffic. Scatter, replicate, gather and reduce_add "
                    "take {} of its {} step, all through device 0, and grow with the "
                    "device count.",
                    ms(g.traffic_ms + g.reduce_ms), ms(median_ms(*dp)));
  }
  const SuiteRun& r = ddp ? *ddp : *dp;
  return at + fmt::format(
                  "compute. Forward and backward take {} of the {} step; "
                  "communication is not what limits it.",
                  ms(group_phases(r).compute_ms), ms(median_ms(r)));
}

// What might help an input-bound run, from its loader's record.
std::string input_advice(const SuiteRun& run, int cores) {
  const RunMetrics& m = *run.metrics;
  if (!m.loader) return "";
  const LoaderSummary& l = *m.loader;
  std::vector<std::string> help;
  if (cores > 0 && l.workers < cores)
    help.push_back(
        fmt::format("more loader workers (--num-workers, now {} of {} cores)", l.workers, cores));
  if (l.pin_memory == "off") help.push_back("--pin-memory (page-locked, asynchronous copies)");
  if (l.source == "imagefolder" && !l.normalize_on_device && l.pin_memory != "off" &&
      l.pin_memory.rfind("not applicable", 0) != 0)
    help.push_back("--normalize-on-device (4x fewer bytes to copy)");
  std::string out = help.empty() ? "" : " What may help: " + fmt::format("{}", help.front());
  for (size_t i = 1; i < help.size(); ++i) out += (i + 1 == help.size() ? " or " : ", ") + help[i];
  if (!out.empty()) out += ".";
  if (l.samples_per_s > 0)
    out += fmt::format(" The loader can give {:.0f} samples/s; training asks for {:.0f}.",
                       l.samples_per_s, m.samples_per_s);
  return out;
}

// Note [Input-bound rule]: the paragraph of a run that is input-bound on some rank, else "".
std::string input_bound_paragraph(const SuiteRun& run, int cores) {
  if (!run.ok() || !run.metrics || !run.metrics->per_rank_data_wait_ms) return "";
  const std::vector<double>& waits = *run.metrics->per_rank_data_wait_ms;
  if (waits.empty()) return "";
  const auto worst = std::max_element(waits.begin(), waits.end());
  const double step = median_ms(run), wait = *worst;
  if (step <= 0 || wait / step < kInputShare) return "";
  return fmt::format(
      "{} is input-bound on rank {}: it waits {} for its next batch in its {} step ({}); with "
      "input free the step would take {}.{}",
      printable(run.id), worst - waits.begin(), ms(wait), ms(step), format_percent(wait / step),
      ms(step - wait), input_advice(run, cores));
}

// Note [Speed of light]: per workload at its largest world size, how much of its bound each
// design achieves and where the largest gap is.
std::string speed_of_light_paragraph(const SuiteRecord& suite, const std::string& w, int n) {
  std::vector<std::string> parts;
  for (const std::string& mode : {kDdp, kDp}) {
    const SuiteRun* run = scaling_run(suite, w, mode, n);
    if (!run || !run->metrics || !run->metrics->speed_of_light) continue;
    const SpeedOfLight& s = *run->metrics->speed_of_light;
    const auto gap = std::find_if(s.phases.begin(), s.phases.end(),
                                  [&](const BoundPhase& p) { return p.group == s.largest_gap; });
    // A record whose phases do not hold the largest gap's group says the group alone.
    const std::string gap_times =
        gap == s.phases.end()
            ? ""
            : fmt::format(" ({} measured, {} bound)", ms(gap->measured_ms), ms(gap->bound_ms));
    parts.push_back(fmt::format("{} reaches {} of its bound ({} of {}); its largest gap is {}{}",
                                suite.design_named(mode).label, format_percent(s.achieved),
                                ms(s.bound_ms), ms(median_ms(*run)), s.largest_gap, gap_times));
  }
  if (parts.empty()) return "";
  std::string out = fmt::format("{} at world size {}: ", w, n);
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out + " (the bound: docs/metrics.md, \"Speed of light\").";
}

// Note [Load is not a design property]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// DDP's ranks run the same model on equal shares of the batch, so a rank that holds the
// buckets back (Note [Bucket blame]) in a run with no --inject-fault was slowed by the
// machine: another process, a shared or throttled core, a slower disk for its shard. That is
// a finding about the box, not about DDP: the verdict says so wherever it names the rank,
// and a design factor measured beside it carries that load.
// "load on the machine, not DDP (its backward_compute ran 3.2 ms slower than the other ranks'
// with no fault injected)" for such a run, else "".
std::string outside_load(const SuiteRun& run) {
  if (!run.ok() || !run.metrics || !run.metrics->bucket_blame) return "";
  const BucketBlame& b = *run.metrics->bucket_blame;
  if (!b.holder || run.has_arg("--inject-fault")) return "";
  const std::string what =
      b.holder_phase ? fmt::format("its {} ran {} slower than the other ranks'", *b.holder_phase,
                                   ms(b.holder_phase_excess_ms.value_or(0)))
                     : std::string("it was late outside its timed phases");
  return fmt::format("load on the machine, not DDP ({} with no fault injected)", what);
}

// Note [Bucket blame]: the paragraph of a DDP run in which a rank holds the step back, else "".
std::string bucket_blame_paragraph(const SuiteRun& run) {
  if (!run.ok() || !run.metrics || !run.metrics->bucket_blame) return "";
  const BucketBlame& b = *run.metrics->bucket_blame;
  if (!b.holder) return "";
  const std::string load = outside_load(run);
  return fmt::format("{}: {}.{}", printable(run.id), printable(b.finding),
                     load.empty() ? "" : " Every rank does the same work: " + load + ".");
}

// Note [Verdict findings]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The verdict's prose is read per workload, the question a reader brings, so it is grouped
// under a heading per workload in the suite's order (suite.workloads, then any other workload
// a run names), and inside a group always in one order, from the answer to its evidence: the
// bottleneck, the speed of light, then per run (in record order) input-bound, then bucket
// blame, and last the critical path of DP and DDP. A workload with nothing to say has no
// heading.
std::vector<ParagraphGroup> findings_by_workload(const SuiteRecord& suite) {
  const std::string& device = suite.suite.device;
  const int cores = static_cast<int>(suite.context.cpu_cores);
  std::vector<ParagraphGroup> groups;
  for (const std::string& w : suite.workloads()) {
    ParagraphGroup g{w, {}};
    const auto add = [&g](std::string p) {
      if (!p.empty()) g.paragraphs.push_back(std::move(p));
    };
    if (const auto sizes = parallel_world_sizes(suite, w); !sizes.empty()) {
      const int n = sizes.back();
      add(bottleneck_paragraph(w, {scaling_run(suite, w, kDp, n),
                                   scaling_run(suite, w, kDdp, n), n, device, cores}));
      add(speed_of_light_paragraph(suite, w, n));
    }
    for (const SuiteRun& run : suite.runs)
      if (run.workload == w) add(input_bound_paragraph(run, cores));
    for (const SuiteRun& run : suite.runs)
      if (run.workload == w) add(bucket_blame_paragraph(run));
    for (std::string& p : critical_path_paragraphs(suite, w)) add(std::move(p));
    if (!g.paragraphs.empty()) groups.push_back(std::move(g));
  }
  return groups;
}

std::vector<std::string> verdict_notes(const SuiteRecord& suite) {
  std::vector<std::string> notes;
  if (const auto steps = quick_steps(suite)) {
    notes.push_back(fmt::format(
        "Quick suite: {:g} measured steps per run, too few to rank designs whose difference is "
        "inside their noise: those rows say \"cannot rank\" rather than a tie. Run the full "
        "suite (at least {:g} steps) before drawing conclusions.",
        *steps, kRankingSteps));
  }
  notes.push_back(
      "The faster design is the one faster in every alternated round (suite key "
      "design_rounds), by the median factor over the rounds and their range; rounds that "
      "disagree, or a factor inside the runs' own step-time noise, make a tie. With one round, a "
      "difference no larger than the larger step-time standard deviation of the two runs is a "
      "tie (docs/metrics.md, \"Verdict\").");
  return notes;
}

}  // namespace

namespace {

// "Data: mlp-small on synthetic data; gpt-tiny on /d/shakespeare (...)": what each workload's
// scaling runs trained on, so that every answer below names its dataset.
std::string data_note(const SuiteRecord& suite) {
  std::vector<std::pair<std::string, std::set<std::string>>> by_workload;
  bool all_synthetic = true;
  for (const std::string& w : suite.workloads()) {
    std::set<std::string> datasets;
    for (const SuiteRun& r : suite.runs)
      if (r.group == RunGroup::Scaling && r.workload == w && r.measured())
        datasets.insert(run_dataset(r));
    if (datasets.empty()) continue;
    all_synthetic = all_synthetic && datasets == std::set<std::string>{"synthetic data"};
    by_workload.emplace_back(w, std::move(datasets));
  }
  if (by_workload.empty()) return "";
  if (all_synthetic) return "Data: every workload on synthetic data.";
  std::string out;
  for (const auto& [w, datasets] : by_workload) {
    std::string joined;
    for (const std::string& d : datasets) joined += (joined.empty() ? "" : " and ") + d;
    out += (out.empty() ? "" : "; ") + printable(w + " on " + joined);
  }
  return "Data: " + out + ".";
}

}  // namespace

ReportSection build_verdict(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "verdict";
  s.heading = "Verdict";
  s.notes = verdict_notes(suite);
  if (std::string data = data_note(suite); !data.empty()) s.notes.insert(s.notes.begin(), data);
  SectionTable t{"verdict-table", "DP against DDP, scaling runs at each world size", {}};
  t.table.header = {"workload",          "world size", "faster",       "by",
                    "DP step",           "DDP step",   "DP samples/s", "DDP samples/s",
                    "DP memory premium", "DDP memory", "DDP overlap",  "best bucket cap"};
  for (const std::string& w : suite.workloads()) {
    for (int n : parallel_world_sizes(suite, w)) {
      const SuiteRun* dp = scaling_run(suite, w, kDp, n);
      const SuiteRun* ddp = scaling_run(suite, w, kDdp, n);
      if (!dp && !ddp) continue;
      const Comparison c = compare_designs(dp, ddp, quick_steps(suite), round_factors(suite, w, n));
      t.table.rows.push_back(
          {w, std::to_string(n), c.faster.empty() ? "-" : c.faster, c.by, step_cell(dp),
           step_cell(ddp),
           format_number(dp ? std::optional(dp->metrics->samples_per_s) : std::nullopt),
           format_number(ddp ? std::optional(ddp->metrics->samples_per_s) : std::nullopt),
           dp_memory_cell(dp), ddp_memory_cell(ddp), overlap_cell(ddp),
           best_bucket_cell(suite, ddp)});
      t.table.bad.push_back(false);
      if (dp && ddp) {
        std::string why = fmt::format("{} at world size {}, {}: ", w, n,
                                      c.faster == "tie"           ? "a tie"
                                      : c.faster == "cannot rank" ? "cannot rank"
                                                                  : c.faster + " faster");
        const auto diffs = group_diffs(*dp, *ddp);
        for (size_t i = 0; i < diffs.size(); ++i)
          why += (i ? "; " : "") + diffs[i].text +
                 fmt::format(" (DP - DDP = {:+.3g} ms)", diffs[i].delta_ms);
        s.notes.push_back(why + ".");
      }
    }
  }
  if (t.table.rows.empty()) s.notes.push_back("No DP or DDP run at world size > 1 succeeded.");
  s.groups = findings_by_workload(suite);
  s.charts.push_back(build_critical_path_chart(suite));
  s.tables.push_back(std::move(t));
  return s;
}

namespace {

// "DDP is 1.22-1.46x faster than DP at 8 devices (median 1.25x over 3 alternated rounds)",
// or the tie or "cannot rank" it is (Note [Factors from rounds]).
std::string design_clause(const Comparison& c, int n, std::optional<double> quick) {
  if (c.faster == "tie")
    return fmt::format("DP and DDP tie at {} devices ({})", n,
                       c.rounds >= 2 ? c.by : "inside the noise");
  if (c.faster == "cannot rank")
    return fmt::format("DP and DDP cannot be ranked at {} devices in {:g} steps", n,
                       quick.value_or(0));
  const std::string other = c.faster == "DP" ? "DDP" : "DP";
  if (c.rounds < 2)
    return fmt::format("{} is {:.2f}x faster than {} at {} devices (one round, no spread)",
                       c.faster, c.factor, other, n);
  const std::string range = fmt::format("{:.2f}-{:.2f}x", c.factor_lo, c.factor_hi);
  return fmt::format(
      "{} is {} faster than {} at {} devices (median {:.2f}x over {} alternated "
      "rounds)",
      c.faster,
      range == fmt::format("{0:.2f}-{0:.2f}x", c.factor_lo) ? fmt::format("{:.2f}x", c.factor)
                                                            : range,
      other, n, c.factor, c.rounds);
}

}  // namespace

std::vector<std::string> first_screen_sentences(const SuiteRecord& suite) {
  std::vector<std::string> out;
  const auto quick = quick_steps(suite);
  for (const std::string& w : suite.workloads()) {
    const auto sizes = parallel_world_sizes(suite, w);
    if (sizes.empty()) continue;
    const int n = sizes.back();
    const SuiteRun* dp = scaling_run(suite, w, kDp, n);
    const SuiteRun* ddp = scaling_run(suite, w, kDdp, n);
    if (!dp || !ddp || !dp->ok() || !ddp->ok()) continue;
    const Comparison c = compare_designs(dp, ddp, quick, round_factors(suite, w, n));
    if (c.faster.empty()) continue;
    std::string sentence = printable(w) + ": " + design_clause(c, n, quick);
    const SuiteRun* best = c.faster == "DP" ? dp : ddp;
    if (const auto sol = metric(best, &RunMetrics::speed_of_light)) {
      sentence +=
          fmt::format("; {} reaches {} of its bound, the largest gap in {}",
                      best == dp ? "DP" : "DDP", format_percent(sol->achieved), sol->largest_gap);
    }
    if (const auto blame = metric(ddp, &RunMetrics::bucket_blame); blame && blame->holder) {
      sentence += fmt::format("; rank {} holds DDP's buckets back", *blame->holder);
      if (const std::string load = outside_load(*ddp); !load.empty()) {
        sentence += ": " + load;
        // The factor was measured with that load on DDP's side.
        if (c.faster == "DP") sentence += ", so part of DP's lead is the machine's";
      }
    }
    out.push_back(sentence + ".");
  }
  return out;
}

std::string cpu_box_sentence(const SuiteRecord& suite) {
  if (suite.suite.device != "cpu") return "";
  int64_t devices = 1;
  for (const int64_t n : suite.suite.world_sizes) devices = std::max(devices, n);
  const int64_t cores = suite.context.cpu_cores;
  const std::string share =
      cores > 0 ? fmt::format("{} logical devices share {} CPU core{}", devices, cores,
                              cores == 1 ? "" : "s")
                : fmt::format("{} logical devices share this machine's CPU cores", devices);
  return fmt::format(
      "This box: {}. What this suite measures is each design's own work on them: its compute, "
      "its copies and its collectives, all competing for the same cores. What carries over to "
      "GPUs: each design's phases, the bytes it moves and how they grow with the device count, "
      "what a flag or hook changes in bytes and memory, and that every design computes what one "
      "device does. What does not: the winner and its factor, and overlap, which depend on "
      "compute speed against link speed, a ratio GPUs change by orders of magnitude "
      "(docs/metrics.md, \"What a CPU run tells about GPUs\"; `ddpbench project` projects to "
      "GPUs).",
      share);
}

}  // namespace ddpb::reports
