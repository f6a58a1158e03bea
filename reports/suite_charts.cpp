#include "reports/suite_charts.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "reports/phase_style.h"
#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

using Runs = std::vector<const SuiteRun*>;

// Designs in the order every chart lists them: the record's (the design table's) order, then
// any design it does not describe.
int mode_rank(const SuiteRecord& suite, std::string_view name) {
  for (size_t i = 0; i < suite.designs.size(); ++i)
    if (suite.designs[i].name == name) return static_cast<int>(i);
  return static_cast<int>(suite.designs.size());
}

// Ok runs (with metrics) of `group` and `workload` ("" = any workload).
Runs select(const SuiteRecord& suite, RunGroup group, const std::string& workload = "") {
  Runs out;
  for (const SuiteRun& r : suite.runs) {
    if (r.measured() && r.group == group && (workload.empty() || r.workload == workload))
      out.push_back(&r);
  }
  return out;
}

// The default-configuration run that a variant (bucket sweep, overlap off) is measured
// against: the scaling-group run of the same design, workload and world size, without a
// variant.
const SuiteRun* default_ddp_run(const SuiteRecord& suite, const SuiteRun& variant_run) {
  for (const SuiteRun* r : select(suite, RunGroup::Scaling, variant_run.workload)) {
    if (r->mode == variant_run.mode && r->world_size == variant_run.world_size &&
        r->variant.empty())
      return r;
  }
  return nullptr;
}

// Series per mode of (world size, value), sorted by world size.
std::vector<svg::Series> series_by_mode(
    const SuiteRecord& suite, const Runs& runs,
    const std::function<std::optional<double>(const SuiteRun&)>& y,
    const std::string& name_prefix = "") {
  std::map<std::pair<int, std::string>, std::vector<std::pair<double, double>>> by_mode;
  for (const SuiteRun* r : runs) {
    if (const auto v = y(*r))
      by_mode[{mode_rank(suite, r->mode), r->mode}].push_back(
          {static_cast<double>(r->world_size), *v});
  }
  std::vector<svg::Series> out;
  for (auto& [key, points] : by_mode) {
    std::sort(points.begin(), points.end());
    out.push_back({name_prefix + key.second, std::move(points)});
  }
  return out;
}

// A metric a run may lack, as an optional.
std::optional<double> step_median(const SuiteRun& r) {
  return r.metrics->step_time_ms.median;
}

ChartView throughput_chart(const SuiteRecord& suite) {
  ChartView c{"chart-throughput",
              "throughput",
              "Throughput against world size",
              "Samples/s of the scaling runs (per-device batch fixed, so the global batch grows "
              "with N). Dashed: N × the single-device samples/s, perfect weak scaling.",
              {},
              ""};
  for (const std::string& w : suite.workloads()) {
    const Runs runs = select(suite, RunGroup::Scaling, w);
    svg::LineChart chart{w + ": samples/s", "world size (devices)", "samples/s", {}};
    chart.series = series_by_mode(
        suite, runs, [](const SuiteRun& r) { return std::optional(r.metrics->samples_per_s); });
    if (chart.series.empty()) continue;
    std::optional<double> t1;
    int max_ws = 1;
    for (const SuiteRun* r : runs) {
      if (!suite.design_of(*r).parallel && r->world_size == 1) t1 = r->metrics->samples_per_s;
      max_ws = std::max(max_ws, static_cast<int>(r->world_size));
    }
    if (t1 && max_ws > 1) {
      chart.series.push_back({"ideal (N × single)", {{1, *t1}, {max_ws, *t1 * max_ws}}, true});
    }
    c.svgs.push_back(svg::render_line_chart(chart));
  }
  if (c.svgs.empty()) c.no_data = "no successful scaling run has samples/s";
  return c;
}

ChartView scaling_chart(const SuiteRecord& suite) {
  ChartView c{"chart-scaling",
              "scaling",
              "Weak scaling efficiency",
              "T(N) / (N × T(1)) with T in samples/s and T(1) the single-device run at the "
              "per-device batch; 1.0 (dashed) is perfect scaling. At world size 1, a parallel "
              "design does the single-device run's work and its own bookkeeping, so a value "
              "above 1.0 there is the two runs' noise, not a speed-up.",
              {},
              ""};
  svg::LineChart chart{"weak scaling efficiency", "world size (devices)", "efficiency", {}};
  int lo = 0, hi = 0;
  for (const std::string& w : suite.workloads()) {
    Runs runs;
    for (const SuiteRun* r : select(suite, RunGroup::Scaling, w)) {
      if (suite.design_of(*r).parallel) runs.push_back(r);
    }
    const auto efficiency = [](const SuiteRun& r) {
      return r.scaling ? r.scaling->weak_efficiency : std::nullopt;
    };
    for (auto& s : series_by_mode(suite, runs, efficiency, w + " ")) {
      lo = lo ? std::min<int>(lo, s.points.front().first) : s.points.front().first;
      hi = std::max<int>(hi, s.points.back().first);
      chart.series.push_back(std::move(s));
    }
  }
  if (chart.series.empty()) {
    c.no_data = "no successful parallel design's scaling run has scaling.weak_efficiency";
    return c;
  }
  chart.series.push_back({"ideal", {{lo, 1.0}, {std::max(hi, lo + 1), 1.0}}, true});
  c.svgs.push_back(svg::render_line_chart(chart));
  return c;
}

// The parallel designs' scaling runs of workload `w` with phase medians.
Runs phase_runs(const SuiteRecord& suite, const std::string& w) {
  Runs out;
  for (const SuiteRun* r : select(suite, RunGroup::Scaling, w))
    if (suite.design_of(*r).parallel && r->metrics->phases_median_ms) out.push_back(r);
  return out;
}

ChartView phases_chart(const SuiteRecord& suite) {
  ChartView c{"chart-phases",
              "phases",
              "Step time by phase, design against design",
              "Median of each phase (ms), stacked, a bar per parallel design; the sum of phase "
              "medians need not equal the median step time. The phases of kind communication "
              "(DP's reduce, DDP's comm_exposed) are the communication the step waits for. A "
              "phase has the same colour in every chart of the report, the critical path's "
              "included.",
              {},
              ""};
  for (const std::string& w : suite.workloads()) {
    const Runs runs = phase_runs(suite, w);
    // Note [Phase colours]: the legend in the vocabulary's order, each phase its own colour.
    std::vector<std::string> phases;
    for (const SuiteRun* r : runs) {
      for (const PhaseMedian& p : *r->metrics->phases_median_ms)
        if (!p.phase.empty() && std::find(phases.begin(), phases.end(), p.phase) == phases.end())
          phases.push_back(p.phase);
    }
    std::stable_sort(phases.begin(), phases.end(), [](const std::string& a, const std::string& b) {
      return phase_order(a) < phase_order(b);
    });
    std::map<int, svg::BarGroup> groups;  // by world size
    for (const SuiteRun* r : runs) {
      svg::Bar bar{r->mode, {}};
      for (const PhaseMedian& p : *r->metrics->phases_median_ms) {
        const auto it = std::find(phases.begin(), phases.end(), p.phase);
        if (it != phases.end())
          bar.segments.push_back({static_cast<size_t>(it - phases.begin()), p.median_ms});
      }
      const int n = static_cast<int>(r->world_size);
      groups.try_emplace(n, svg::BarGroup{fmt::format("w{}", n), {}})
          .first->second.bars.push_back(std::move(bar));
    }
    if (groups.empty()) continue;
    svg::BarChart chart{w + ": median phase times", "ms", phases, {}};
    for (const std::string& p : phases) chart.colors.push_back(phase_color(p));
    for (auto& [ws, g] : groups) {
      std::stable_sort(g.bars.begin(), g.bars.end(), [&](const svg::Bar& a, const svg::Bar& b) {
        return mode_rank(suite, a.label) < mode_rank(suite, b.label);
      });
      chart.groups.push_back(std::move(g));
    }
    c.svgs.push_back(svg::render_bar_chart(chart));
  }
  if (c.svgs.empty())
    c.no_data = "no successful parallel design's scaling run has phases_median_ms";
  return c;
}

ChartView buckets_chart(const SuiteRecord& suite) {
  ChartView c{"chart-buckets", "buckets", "DDP buckets in one step", "", {}, ""};
  // The largest-world-size scaling run of a design with buckets, of the first workload that
  // has bucket timings; the heading names its design.
  const SuiteRun* pick = nullptr;
  for (const std::string& w : suite.workloads()) {
    for (const SuiteRun* r : select(suite, RunGroup::Scaling, w)) {
      const auto& b = r->metrics->buckets;
      if (suite.design_of(*r).has_buckets && b && !b->empty() &&
          (!pick || r->world_size > pick->world_size))
        pick = r;
    }
    if (pick) break;
  }
  if (!pick) {
    c.no_data = "no successful scaling run of a design with buckets has per-bucket timings";
    return c;
  }
  c.heading = suite.design_of(*pick).label + " buckets in one step";
  svg::Timeline t{pick->id + ": buckets of one measured step",
                  "ms from the start of the step",
                  {"ready → launch (in order)", "launch → start (queued)", "AllReduce"},
                  "",
                  {}};
  // Note [Phase colours]: waiting for earlier buckets is waiting; the AllReduce is the
  // collective the critical-path charts draw in the same colour.
  t.colors = {phase_color(kWaitSpan), "#d7b5a6", phase_color(kCollectiveSpan)};
  std::vector<BucketTiming> buckets = *pick->metrics->buckets;
  std::stable_sort(
      buckets.begin(), buckets.end(),
      [](const BucketTiming& a, const BucketTiming& b) { return a.bucket < b.bucket; });
  for (const BucketTiming& b : buckets) {
    const auto bytes =
        b.bytes ? std::optional(static_cast<double>(*b.bytes)) : std::optional<double>();
    svg::TimelineRow row{
        "bucket " + std::to_string(b.bucket) + " (" + format_bytes(bytes) + ")", {}, {}};
    row.spans.push_back({b.ready_ms, b.launch_ms, 0});
    const double coll_start = b.start_ms && *b.start_ms > b.launch_ms ? *b.start_ms : b.launch_ms;
    if (coll_start > b.launch_ms) row.spans.push_back({b.launch_ms, coll_start, 1});
    row.spans.push_back({coll_start, b.complete_ms, 2});
    t.rows.push_back(std::move(row));
  }
  const RunMetrics& m = *pick->metrics;
  c.caption = "Run " + pick->id +
              ", the median measured step: when each bucket's gradients were all ready, when "
              "its AllReduce was launched (strictly in bucket order) and when it completed. "
              "Communication " +
              format_number(m.comm_ms) + " ms, exposed " + format_number(m.comm_exposed_ms) +
              " ms, overlap " + format_percent(m.overlap_ratio) + ".";
  c.svgs.push_back(svg::render_timeline(t));
  return c;
}

// The --bucket-cap-mb auto run of the sweep's workload and world size, if any: the medians
// its search measured in the warm-up, and its choice at the measured steps' median.
void add_autotune_series(const SuiteRecord& suite, const SuiteRun& sweep_run,
                         svg::LineChart& chart) {
  for (const SuiteRun* r : select(suite, RunGroup::BucketAutotune)) {
    if (r->workload != sweep_run.workload || r->world_size != sweep_run.world_size) continue;
    const auto& tuned = r->metrics->bucket_autotune;
    std::map<double, double> searched;
    if (tuned) {
      for (const AutotuneCandidate& c : tuned->candidates) {
        if (c.cap_mb > 0) searched[c.cap_mb] = c.median_ms;
      }
    }
    svg::Series search{"autotune search (warm-up)", {searched.begin(), searched.end()}, false};
    chart.series.push_back(std::move(search));
    if (tuned && tuned->chosen_mb)
      chart.series.push_back({"autotune choice", {{*tuned->chosen_mb, *step_median(*r)}}, false});
    return;
  }
}

ChartView bucket_sweep_chart(const SuiteRecord& suite) {
  ChartView c{"chart-bucket-sweep",
              "bucket-sweep",
              "Bucket size sweep",
              "DDP step time and communication against --bucket-cap-mb (log scale): the "
              "bucket_sweep runs plus the default-bucket DDP run of the same workload and world "
              "size. Small buckets pay per-collective latency; large ones start communicating "
              "late and expose more of it. With a --bucket-cap-mb auto run: the caps its "
              "warm-up search measured and its choice's measured step time.",
              {},
              ""};
  std::map<std::pair<std::string, int64_t>, std::map<double, const SuiteRun*>> sweeps;
  for (const SuiteRun* r : select(suite, RunGroup::BucketSweep)) {
    if (auto cap = run_bucket_cap_mb(*r)) sweeps[{r->workload, r->world_size}][*cap] = r;
  }
  for (auto& [key, by_cap] : sweeps) {
    if (const SuiteRun* d = default_ddp_run(suite, *by_cap.begin()->second)) {
      if (auto cap = run_bucket_cap_mb(*d)) by_cap.emplace(*cap, d);  // a sweep run at 25 MB wins
    }
    svg::LineChart chart{key.first + " w" + std::to_string(key.second) + ": bucket cap sweep",
                         "bucket cap (MB)",
                         "ms",
                         {}};
    chart.x_log = true;
    chart.series = {{"median step time", {}}, {"communication", {}}, {"exposed communication", {}}};
    for (const auto& [cap, r] : by_cap) {
      chart.series[0].points.push_back({cap, *step_median(*r)});
      if (const auto v = r->metrics->comm_ms) chart.series[1].points.push_back({cap, *v});
      if (const auto v = r->metrics->comm_exposed_ms) chart.series[2].points.push_back({cap, *v});
    }
    add_autotune_series(suite, *by_cap.begin()->second, chart);
    c.svgs.push_back(svg::render_line_chart(chart));
  }
  if (c.svgs.empty()) c.no_data = "no successful bucket_sweep run with a known bucket cap";
  return c;
}

ChartView overlap_chart(const SuiteRecord& suite) {
  ChartView c{"chart-overlap",
              "overlap",
              "Overlap on against off",
              "The overlap-group run (--no-overlap: every AllReduce waits for the end of "
              "backward) against the default DDP run of the same workload and world size.",
              {},
              ""};
  std::vector<std::string> unmatched;
  for (const SuiteRun* off : select(suite, RunGroup::Overlap)) {
    const SuiteRun* on = default_ddp_run(suite, *off);
    if (!on) {
      unmatched.push_back(off->id);
      continue;
    }
    svg::BarChart chart{
        off->workload + " w" + std::to_string(off->world_size) + ": overlap on vs off",
        "ms",
        {"overlap on", "overlap off"},  // the runs are in the title and the caption
        {}};
    chart.title += " (" + on->id + " and " + off->id + ")";
    struct Metric {
      const char* label;
      std::optional<double> (*get)(const SuiteRun&);
    };
    static const Metric kMetrics[] = {
        {"communication", [](const SuiteRun& r) { return r.metrics->comm_ms; }},
        {"exposed comm", [](const SuiteRun& r) { return r.metrics->comm_exposed_ms; }},
        {"median step", step_median}};
    for (const Metric& m : kMetrics) {
      // A missing value draws no bar (NaN is skipped), rather than a misleading zero.
      const double nan = std::numeric_limits<double>::quiet_NaN();
      chart.groups.push_back(
          {m.label,
           {{"on", {{0, m.get(*on).value_or(nan)}}}, {"off", {{1, m.get(*off).value_or(nan)}}}}});
    }
    c.svgs.push_back(svg::render_bar_chart(chart));
  }
  if (c.svgs.empty()) {
    c.no_data = unmatched.empty() ? "no successful overlap-group run"
                                  : "no default DDP run to compare with for " + unmatched[0];
  }
  return c;
}

// Note [Bucket blame]: per DDP run, the wait each rank caused its peers.
ChartView blame_chart(const SuiteRecord& suite) {
  ChartView c{"chart-blame",
              "blame",
              "Which rank holds DDP's buckets back",
              "Per rank, the time its buckets became ready after every other rank's (summed over "
              "the buckets, per measured step): the wait it caused. Delays within the noise count "
              "for no one.",
              {},
              ""};
  svg::BarChart chart{"wait caused per step", "ms", {"wait caused"}, {}};
  for (const SuiteRun& r : suite.runs) {
    if (!r.ok() || !r.metrics || !r.metrics->bucket_blame) continue;
    if (r.group != RunGroup::Scaling && r.group != RunGroup::Explicit) continue;
    svg::BarGroup g{r.id, {}};
    for (const RankBlame& rank : r.metrics->bucket_blame->per_rank)
      g.bars.push_back({"r" + std::to_string(rank.rank), {{0, rank.delay_ms_per_step}}});
    chart.groups.push_back(std::move(g));
  }
  if (chart.groups.empty()) {
    c.no_data = "no successful DDP run at world size > 1 has bucket_blame";
  } else {
    chart.width = std::max(640, 120 * static_cast<int>(chart.groups.size()));
    c.svgs.push_back(svg::render_bar_chart(chart));
  }
  return c;
}

}  // namespace

std::vector<ChartView> build_suite_charts(const SuiteRecord& suite) {
  return {throughput_chart(suite), scaling_chart(suite),      phases_chart(suite),
          buckets_chart(suite),    bucket_sweep_chart(suite), overlap_chart(suite),
          blame_chart(suite)};
}

}  // namespace ddpb::reports
