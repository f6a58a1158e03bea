#include "reports/verdict.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

using nlohmann::json;

// Note [Verdict shares]
// The bottleneck rules compare a phase group's share of its run's median step with one
// threshold, kShare: a fifth of the step is where removing the group entirely would speed the
// step up by 25%, large enough to name and small enough that the named group is the one worth
// attacking first. The machine rule is about efficiency instead: below kMachineEfficiency of
// ideal weak scaling, with at least as many CPU ranks as cores, no design can scale.
constexpr double kShare = 0.2;
constexpr double kMachineEfficiency = 0.8;

double median_ms(const json& run) {
  return number_at(run, {"metrics", "step_time_ms", "median"}).value_or(0);
}

// The ok scaling-group run of `mode` for workload `w` at world size `n` (no variant).
const json* scaling_run(const json& suite, const std::string& w, const std::string& mode, int n) {
  for (const json* r : suite_runs(suite)) {
    if (run_ok(*r) && string_at(*r, {"group"}) == "scaling" && string_at(*r, {"workload"}) == w &&
        string_at(*r, {"mode"}) == mode && run_world_size(*r) == n &&
        string_at(*r, {"variant"}).empty())
      return r;
  }
  return nullptr;
}

std::string ms(double v) {
  return format_number(v) + " ms";
}

// "12.3 ± 0.4 ms".
std::string step_cell(const json* run) {
  if (!run) return "did not run";
  return format_number(median_ms(*run)) + " ± " +
         format_number(number_at(*run, {"metrics", "step_time_ms", "stddev"})) + " ms";
}

struct Comparison {
  std::string faster;  // "DP", "DDP", "tie", or "" when one side is missing
  std::string by;
};

Comparison compare_designs(const json* dp, const json* ddp) {
  if (!dp || !ddp) return {"", "-"};
  const double a = median_ms(*dp), b = median_ms(*ddp);
  const double sa = number_at(*dp, {"metrics", "step_time_ms", "stddev"}).value_or(0);
  const double sb = number_at(*ddp, {"metrics", "step_time_ms", "stddev"}).value_or(0);
  if (a <= 0 || b <= 0) return {"", "-"};
  const double pct = (std::max(a, b) / std::min(a, b) - 1) * 100;
  if (within_noise(a, sa, b, sb))
    return {"tie",
            fmt::format("{:.1f}% apart, inside the noise ({:.3g} ms)", pct, std::max(sa, sb))};
  return {a < b ? "DP" : "DDP", fmt::format("{:.1f}% shorter step", pct)};
}

// DP's device-0 memory premium: device 0's peak minus the largest other device's.
std::string dp_memory_cell(const json* dp) {
  if (!dp) return "-";
  const json* mem = find_at(*dp, {"metrics", "memory"});
  if (!mem || !mem->is_array() || mem->size() < 2) return "n/a (one shared allocator)";
  const auto first = number_at((*mem)[0], {"peak_bytes"});
  double others = 0;
  for (size_t i = 1; i < mem->size(); ++i)
    others = std::max(others, number_at((*mem)[i], {"peak_bytes"}).value_or(0));
  if (!first) return "-";
  return "+" + format_bytes(std::max(0.0, *first - others)) + " on device 0 (" +
         format_bytes(*first) + " vs " + format_bytes(others) + ")";
}

std::string ddp_memory_cell(const json* ddp) {
  if (!ddp) return "-";
  const json* ranks = find_at(*ddp, {"metrics", "rank_peak_memory_bytes"});
  if (ranks && ranks->is_array() && !ranks->empty()) {
    double lo = 0, hi = 0;
    bool first = true;
    for (const auto& v : *ranks) {
      if (!v.is_number()) continue;
      const double x = v.get<double>();
      lo = first ? x : std::min(lo, x);
      hi = first ? x : std::max(hi, x);
      first = false;
    }
    if (!first) return format_bytes(lo) + (hi > lo ? " to " + format_bytes(hi) : "") + " per rank";
  }
  return format_bytes(run_peak_memory(*ddp)) + " per rank";
}

std::string overlap_cell(const json* ddp) {
  if (!ddp) return "-";
  return format_percent(number_at(*ddp, {"metrics", "overlap_ratio"})) + " of " +
         ms(number_at(*ddp, {"metrics", "comm_ms"}).value_or(0)) + " hidden";
}

double bucket_cap_mb(const json& run) {
  return run_bucket_cap_mb(run).value_or(25.0);
}

// "; auto chose 8.8 MB (45.1 ms)" when the suite has a --bucket-cap-mb auto run there.
std::string autotune_note(const json& suite, const json& ddp) {
  for (const json* r : suite_runs(suite)) {
    if (!run_ok(*r) || string_at(*r, {"group"}) != "bucket_autotune" ||
        string_at(*r, {"workload"}) != string_at(ddp, {"workload"}) ||
        run_world_size(*r) != run_world_size(ddp))
      continue;
    if (auto chosen = number_at(*r, {"metrics", "bucket_autotune", "chosen_mb"}))
      return fmt::format("; auto chose {:g} MB ({})", *chosen, ms(median_ms(*r)));
  }
  return "";
}

// The measured cap with the shortest median step among the bucket sweep and the default run.
std::string best_bucket_cell(const json& suite, const json* ddp) {
  if (!ddp) return "-";
  std::vector<const json*> candidates = {ddp};
  for (const json* r : suite_runs(suite)) {
    if (run_ok(*r) && string_at(*r, {"group"}) == "bucket_sweep" &&
        string_at(*r, {"workload"}) == string_at(*ddp, {"workload"}) &&
        run_world_size(*r) == run_world_size(*ddp))
      candidates.push_back(r);
  }
  const std::string tuned = autotune_note(suite, *ddp);
  if (candidates.size() == 1) return "not swept" + tuned;
  const json* best =
      *std::min_element(candidates.begin(), candidates.end(),
                        [](const json* a, const json* b) { return median_ms(*a) < median_ms(*b); });
  if (best == ddp)
    return fmt::format("{:g} MB, the default ({})", bucket_cap_mb(*ddp), ms(median_ms(*ddp))) +
           tuned;
  return fmt::format("{:g} MB ({} vs {} at {:g} MB)", bucket_cap_mb(*best), ms(median_ms(*best)),
                     ms(median_ms(*ddp)), bucket_cap_mb(*ddp)) +
         tuned;
}

}  // namespace

PhaseGroups group_phases(const json& run) {
  PhaseGroups g;
  const json* phases = find_at(run, {"metrics", "phases_median_ms"});
  if (!phases || !phases->is_array()) return g;
  static const std::map<std::string_view, double PhaseGroups::*> kGroup = {
      {"forward", &PhaseGroups::compute_ms},     {"loss", &PhaseGroups::compute_ms},
      {"backward", &PhaseGroups::compute_ms},    {"backward_compute", &PhaseGroups::compute_ms},
      {"scatter", &PhaseGroups::traffic_ms},     {"replicate", &PhaseGroups::traffic_ms},
      {"gather", &PhaseGroups::traffic_ms},      {"reduce", &PhaseGroups::reduce_ms},
      {"comm_exposed", &PhaseGroups::reduce_ms}, {"buffer_broadcast", &PhaseGroups::sync_ms},
      {"sync_bn", &PhaseGroups::sync_ms},        {"data", &PhaseGroups::data_ms},
      {"optimizer", &PhaseGroups::optimizer_ms}};
  for (const auto& p : *phases) {
    const auto it = kGroup.find(string_at(p, {"phase"}));
    if (it != kGroup.end()) g.*(it->second) += number_at(p, {"median_ms"}).value_or(0);
  }
  return g;
}

bool within_noise(double median_a, double stddev_a, double median_b, double stddev_b) {
  return std::fabs(median_a - median_b) <= std::max(stddev_a, stddev_b);
}

std::string bottleneck_kind(const BottleneckInputs& in) {
  const json* winner = in.dp && in.ddp ? (median_ms(*in.dp) < median_ms(*in.ddp) ? in.dp : in.ddp)
                                       : (in.dp ? in.dp : in.ddp);
  if (!winner) return "";
  const auto share = [](const json& run, double part) {
    const double step = median_ms(run);
    return step > 0 ? part / step : 0.0;
  };
  if (share(*winner, group_phases(*winner).data_ms) >= kShare) return "data";
  double best_eff = 0;
  for (const json* r : {in.dp, in.ddp}) {
    if (r) best_eff = std::max(best_eff, number_at(*r, {"scaling", "weak_efficiency"}).value_or(0));
  }
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

std::vector<GroupDiff> group_diffs(const json& dp, const json& ddp) {
  const PhaseGroups a = group_phases(dp), b = group_phases(ddp);
  const double ddp_comm = number_at(ddp, {"metrics", "comm_ms"}).value_or(0);
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
std::vector<int> parallel_world_sizes(const json& suite, const std::string& w) {
  std::set<int> sizes;
  for (const json* r : suite_runs(suite)) {
    const std::string mode = string_at(*r, {"mode"});
    if (string_at(*r, {"group"}) == "scaling" && string_at(*r, {"workload"}) == w &&
        (mode == "dp" || mode == "ddp") && run_world_size(*r) > 1)
      sizes.insert(run_world_size(*r));
  }
  return {sizes.begin(), sizes.end()};
}

std::string bottleneck_paragraph(const std::string& w, const BottleneckInputs& in) {
  const std::string kind = bottleneck_kind(in);
  const std::string at = fmt::format("{} at world size {}: ", w, in.world_size);
  const json* dp = in.dp;
  const json* ddp = in.ddp;
  if (kind.empty()) return at + "no DP or DDP run succeeded, so there is nothing to explain.";
  if (kind == "data") {
    const json& r = dp ? *dp : *ddp;
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
                    format_percent(std::max(
                        dp ? number_at(*dp, {"scaling", "weak_efficiency"}).value_or(0) : 0.0,
                        ddp ? number_at(*ddp, {"scaling", "weak_efficiency"}).value_or(0) : 0.0)));
  }
  if (kind == "ddp-exposed-comm") {
    return at + fmt::format(
                    "DDP's exposed communication. {} of its {} step is AllReduce left "
                    "after backward (overlap {}); more compute per bucket or fewer bytes "
                    "(a comm hook) would hide it.",
                    ms(group_phases(*ddp).reduce_ms), ms(median_ms(*ddp)),
                    format_percent(number_at(*ddp, {"metrics", "overlap_ratio"})));
  }
  if (kind == "dp-device0-traffic") {
    const PhaseGroups g = group_phases(*dp);
    return at + fmt::format(
                    "DP's device-0 traffic. Scatter, replicate, gather and reduce_add "
                    "take {} of its {} step, all through device 0, and grow with the "
                    "device count.",
                    ms(g.traffic_ms + g.reduce_ms), ms(median_ms(*dp)));
  }
  const json& r = ddp ? *ddp : *dp;
  return at + fmt::format(
                  "compute. Forward and backward take {} of the {} step; "
                  "communication is not what limits it.",
                  ms(group_phases(r).compute_ms), ms(median_ms(r)));
}

std::vector<std::string> verdict_notes(const json& suite) {
  std::vector<std::string> notes;
  const json* quick = find_at(suite, {"suite", "quick"});
  const auto steps = number_at(suite, {"suite", "steps"});
  if ((quick && quick->is_boolean() && quick->get<bool>()) || (steps && *steps < 10)) {
    notes.push_back(
        fmt::format("Quick suite: {:g} measured steps per run, so these numbers are "
                    "noisy; run the full suite before drawing conclusions.",
                    steps.value_or(0)));
  }
  notes.push_back(
      "A difference no larger than the larger step-time standard deviation of the "
      "two runs is called a tie (docs/metrics.md, \"Verdict\").");
  return notes;
}

}  // namespace

ReportSection build_verdict(const json& suite) {
  ReportSection s;
  s.id = "verdict";
  s.heading = "Verdict";
  s.notes = verdict_notes(suite);
  SectionTable t{"verdict-table", "DP against DDP, scaling runs at each world size", {}};
  t.table.header = {"workload",          "world size", "faster",       "by",
                    "DP step",           "DDP step",   "DP samples/s", "DDP samples/s",
                    "DP memory premium", "DDP memory", "DDP overlap",  "best bucket cap"};
  const std::string device = string_at(suite, {"suite", "device"});
  const int cores = static_cast<int>(number_at(suite, {"context", "cpu_cores"}).value_or(0));
  for (const std::string& w : suite_workloads(suite)) {
    const auto sizes = parallel_world_sizes(suite, w);
    for (int n : sizes) {
      const json* dp = scaling_run(suite, w, "dp", n);
      const json* ddp = scaling_run(suite, w, "ddp", n);
      if (!dp && !ddp) continue;
      const Comparison c = compare_designs(dp, ddp);
      t.table.rows.push_back(
          {w, std::to_string(n), c.faster.empty() ? "-" : c.faster, c.by, step_cell(dp),
           step_cell(ddp),
           format_number(dp ? number_at(*dp, {"metrics", "samples_per_s"}) : std::nullopt),
           format_number(ddp ? number_at(*ddp, {"metrics", "samples_per_s"}) : std::nullopt),
           dp_memory_cell(dp), ddp_memory_cell(ddp), overlap_cell(ddp),
           best_bucket_cell(suite, ddp)});
      t.table.bad.push_back(false);
      if (dp && ddp) {
        std::string why = fmt::format("{} at world size {}, {}: ", w, n,
                                      c.faster == "tie" ? "a tie" : c.faster + " faster");
        const auto diffs = group_diffs(*dp, *ddp);
        for (size_t i = 0; i < diffs.size(); ++i)
          why += (i ? "; " : "") + diffs[i].text +
                 fmt::format(" (DP - DDP = {:+.3g} ms)", diffs[i].delta_ms);
        s.notes.push_back(why + ".");
      }
    }
    if (!sizes.empty()) {
      const int n = sizes.back();
      s.paragraphs.push_back(bottleneck_paragraph(
          w, {scaling_run(suite, w, "dp", n), scaling_run(suite, w, "ddp", n), n, device, cores}));
    }
  }
  if (t.table.rows.empty()) s.notes.push_back("No DP or DDP run at world size > 1 succeeded.");
  s.tables.push_back(std::move(t));
  return s;
}

}  // namespace ddpb::reports
