#include "reports/suite_charts.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

using nlohmann::json;
using Runs = std::vector<const json*>;

// Modes in the order every chart lists them, then any other mode the record names.
int mode_rank(const std::string& mode) {
  if (mode == "single") return 0;
  if (mode == "dp") return 1;
  if (mode == "ddp") return 2;
  return 3;
}

// Ok runs of `group` and `workload` ("" = any workload).
Runs select(const json& suite, const std::string& group, const std::string& workload = "") {
  Runs out;
  for (const json* r : suite_runs(suite)) {
    if (run_ok(*r) && string_at(*r, {"group"}) == group &&
        (workload.empty() || string_at(*r, {"workload"}) == workload))
      out.push_back(r);
  }
  return out;
}

// The default-configuration DDP run that a variant (bucket sweep, overlap off) is measured
// against: the scaling-group DDP run of the same workload and world size, without a variant.
const json* default_ddp_run(const json& suite, const json& variant_run) {
  for (const json* r : select(suite, "scaling", string_at(variant_run, {"workload"}))) {
    if (string_at(*r, {"mode"}) == "ddp" && run_world_size(*r) == run_world_size(variant_run) &&
        string_at(*r, {"variant"}).empty())
      return r;
  }
  return nullptr;
}

// Series per mode of (world size, value), sorted by world size.
std::vector<svg::Series> series_by_mode(const Runs& runs,
                                        const std::function<std::optional<double>(const json&)>& y,
                                        const std::string& name_prefix = "") {
  std::map<std::pair<int, std::string>, std::vector<std::pair<double, double>>> by_mode;
  for (const json* r : runs) {
    const auto v = y(*r);
    const std::string mode = string_at(*r, {"mode"});
    if (v) by_mode[{mode_rank(mode), mode}].push_back({run_world_size(*r), *v});
  }
  std::vector<svg::Series> out;
  for (auto& [key, points] : by_mode) {
    std::sort(points.begin(), points.end());
    out.push_back({name_prefix + key.second, points});
  }
  return out;
}

ChartView throughput_chart(const json& suite) {
  ChartView c{"chart-throughput",
              "throughput",
              "Throughput against world size",
              "Samples/s of the scaling runs (per-device batch fixed, so the global batch grows "
              "with N). Dashed: N × the single-device samples/s, perfect weak scaling.",
              {},
              ""};
  for (const std::string& w : suite_workloads(suite)) {
    const Runs runs = select(suite, "scaling", w);
    svg::LineChart chart{w + ": samples/s", "world size (devices)", "samples/s", {}};
    chart.series = series_by_mode(runs, [](const json& r) {
      return number_at(r, {"metrics", "samples_per_s"});
    });
    if (chart.series.empty()) continue;
    std::optional<double> t1;
    int max_ws = 1;
    for (const json* r : runs) {
      if (string_at(*r, {"mode"}) == "single" && run_world_size(*r) == 1)
        t1 = number_at(*r, {"metrics", "samples_per_s"});
      max_ws = std::max(max_ws, run_world_size(*r));
    }
    if (t1 && max_ws > 1) {
      chart.series.push_back({"ideal (N × single)", {{1, *t1}, {max_ws, *t1 * max_ws}}, true});
    }
    c.svgs.push_back(svg::render_line_chart(chart));
  }
  if (c.svgs.empty()) c.no_data = "no successful scaling run has samples/s";
  return c;
}

ChartView scaling_chart(const json& suite) {
  ChartView c{"chart-scaling",
              "scaling",
              "Weak scaling efficiency",
              "T(N) / (N × T(1)) with T in samples/s and T(1) the single-device run at the "
              "per-device batch; 1.0 (dashed) is perfect scaling.",
              {},
              ""};
  svg::LineChart chart{"weak scaling efficiency", "world size (devices)", "efficiency", {}};
  int lo = 0, hi = 0;
  for (const std::string& w : suite_workloads(suite)) {
    Runs runs;
    for (const json* r : select(suite, "scaling", w)) {
      if (string_at(*r, {"mode"}) != "single") runs.push_back(r);
    }
    for (auto& s : series_by_mode(
             runs,
             [](const json& r) {
               return number_at(r, {"scaling", "weak_efficiency"});
             },
             w + " ")) {
      lo = lo ? std::min<int>(lo, s.points.front().first) : s.points.front().first;
      hi = std::max<int>(hi, s.points.back().first);
      chart.series.push_back(std::move(s));
    }
  }
  if (chart.series.empty()) {
    c.no_data = "no successful DP or DDP scaling run has scaling.weak_efficiency";
    return c;
  }
  chart.series.push_back({"ideal", {{lo, 1.0}, {std::max(hi, lo + 1), 1.0}}, true});
  c.svgs.push_back(svg::render_line_chart(chart));
  return c;
}

ChartView phases_chart(const json& suite) {
  ChartView c{"chart-phases",
              "phases",
              "Step time by phase, DP against DDP",
              "Median of each phase (ms), stacked; the sum of phase medians need not equal the "
              "median step time. DP's reduce and DDP's comm_exposed are the communication the "
              "step waits for.",
              {},
              ""};
  for (const std::string& w : suite_workloads(suite)) {
    std::map<int, svg::BarGroup> groups;  // by world size
    std::vector<std::string> phases;      // union, in first-seen order: colours match across bars
    for (const json* r : select(suite, "scaling", w)) {
      const std::string mode = string_at(*r, {"mode"});
      const json* list = find_at(*r, {"metrics", "phases_median_ms"});
      if ((mode != "dp" && mode != "ddp") || !list || !list->is_array()) continue;
      svg::Bar bar{mode, {}};
      for (const auto& p : *list) {
        const std::string phase = string_at(p, {"phase"});
        const auto ms = number_at(p, {"median_ms"});
        if (phase.empty() || !ms) continue;
        auto it = std::find(phases.begin(), phases.end(), phase);
        if (it == phases.end()) it = phases.insert(phases.end(), phase);
        bar.segments.push_back({static_cast<size_t>(it - phases.begin()), *ms});
      }
      svg::BarGroup& g = groups[run_world_size(*r)];
      g.label = "w" + std::to_string(run_world_size(*r));
      g.bars.push_back(std::move(bar));
    }
    if (groups.empty()) continue;
    svg::BarChart chart{w + ": median phase times", "ms", phases, {}};
    for (auto& [ws, g] : groups) {
      std::stable_sort(g.bars.begin(), g.bars.end(), [](const svg::Bar& a, const svg::Bar& b) {
        return mode_rank(a.label) < mode_rank(b.label);
      });
      chart.groups.push_back(std::move(g));
    }
    c.svgs.push_back(svg::render_bar_chart(chart));
  }
  if (c.svgs.empty()) c.no_data = "no successful DP or DDP scaling run has phases_median_ms";
  return c;
}

ChartView buckets_chart(const json& suite) {
  ChartView c{"chart-buckets", "buckets", "DDP buckets in one step", "", {}, ""};
  // The largest-world-size DDP scaling run of the first workload that has bucket timings.
  const json* pick = nullptr;
  for (const std::string& w : suite_workloads(suite)) {
    for (const json* r : select(suite, "scaling", w)) {
      const json* b = find_at(*r, {"metrics", "buckets"});
      if (string_at(*r, {"mode"}) == "ddp" && b && b->is_array() && !b->empty() &&
          (!pick || run_world_size(*r) > run_world_size(*pick)))
        pick = r;
    }
    if (pick) break;
  }
  if (!pick) {
    c.no_data = "no successful DDP scaling run has per-bucket timings";
    return c;
  }
  svg::Timeline t{string_at(*pick, {"id"}) + ": buckets of one measured step",
                  "ms from the start of the step",
                  {"ready → launch (in order)", "launch → start (queued)", "AllReduce"},
                  "",
                  {}};
  std::vector<const json*> buckets;
  for (const auto& b : *find_at(*pick, {"metrics", "buckets"})) buckets.push_back(&b);
  std::stable_sort(buckets.begin(), buckets.end(), [](const json* a, const json* b) {
    return number_at(*a, {"bucket"}).value_or(0) < number_at(*b, {"bucket"}).value_or(0);
  });
  for (const json* b : buckets) {
    const auto ready = number_at(*b, {"ready_ms"}), launch = number_at(*b, {"launch_ms"});
    const auto start = number_at(*b, {"start_ms"}), done = number_at(*b, {"complete_ms"});
    const json* index = find_at(*b, {"bucket"});
    svg::TimelineRow row{"bucket " + (index ? safe_dump(*index) : std::string("?")) + " (" +
                             format_bytes(number_at(*b, {"bytes"})) + ")",
                         {},
                         {}};
    if (ready && launch) row.spans.push_back({*ready, *launch, 0});
    const auto coll_start = start && launch && *start > *launch ? start : launch;
    if (launch && coll_start && *coll_start > *launch)
      row.spans.push_back({*launch, *coll_start, 1});
    if (coll_start && done) row.spans.push_back({*coll_start, *done, 2});
    t.rows.push_back(std::move(row));
  }
  c.caption = "Run " + string_at(*pick, {"id"}) +
              ", the median measured step: when each bucket's gradients were all ready, when "
              "its AllReduce was launched (strictly in bucket order) and when it completed. "
              "Communication " +
              format_number(number_at(*pick, {"metrics", "comm_ms"})) + " ms, exposed " +
              format_number(number_at(*pick, {"metrics", "comm_exposed_ms"})) + " ms, overlap " +
              format_percent(number_at(*pick, {"metrics", "overlap_ratio"})) + ".";
  c.svgs.push_back(svg::render_timeline(t));
  return c;
}

// The --bucket-cap-mb auto run of the sweep's workload and world size, if any: the medians
// its search measured in the warm-up, and its choice at the measured steps' median.
void add_autotune_series(const json& suite, const json& sweep_run, svg::LineChart& chart) {
  for (const json* r : select(suite, "bucket_autotune")) {
    if (string_at(*r, {"workload"}) != string_at(sweep_run, {"workload"}) ||
        run_world_size(*r) != run_world_size(sweep_run))
      continue;
    std::map<double, double> searched;
    if (const json* cs = find_at(*r, {"metrics", "bucket_autotune", "candidates"});
        cs && cs->is_array()) {
      for (const json& c : *cs) {
        const auto cap = number_at(c, {"cap_mb"}), t = number_at(c, {"median_ms"});
        if (cap && t && *cap > 0) searched[*cap] = *t;
      }
    }
    svg::Series search{"autotune search (warm-up)", {searched.begin(), searched.end()}, false};
    chart.series.push_back(std::move(search));
    const auto chosen = number_at(*r, {"metrics", "bucket_autotune", "chosen_mb"});
    const auto step = number_at(*r, {"metrics", "step_time_ms", "median"});
    if (chosen && step) chart.series.push_back({"autotune choice", {{*chosen, *step}}, false});
    return;
  }
}

ChartView bucket_sweep_chart(const json& suite) {
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
  std::map<std::pair<std::string, int>, std::map<double, const json*>> sweeps;
  for (const json* r : select(suite, "bucket_sweep")) {
    if (auto cap = run_bucket_cap_mb(*r))
      sweeps[{string_at(*r, {"workload"}), run_world_size(*r)}][*cap] = r;
  }
  for (auto& [key, by_cap] : sweeps) {
    if (const json* d = default_ddp_run(suite, *by_cap.begin()->second)) {
      if (auto cap = run_bucket_cap_mb(*d)) by_cap.emplace(*cap, d);  // a sweep run at 25 MB wins
    }
    svg::LineChart chart{key.first + " w" + std::to_string(key.second) + ": bucket cap sweep",
                         "bucket cap (MB)",
                         "ms",
                         {}};
    chart.x_log = true;
    chart.series = {{"median step time", {}}, {"communication", {}}, {"exposed communication", {}}};
    for (const auto& [cap, r] : by_cap) {
      if (auto v = number_at(*r, {"metrics", "step_time_ms", "median"}))
        chart.series[0].points.push_back({cap, *v});
      if (auto v = number_at(*r, {"metrics", "comm_ms"}))
        chart.series[1].points.push_back({cap, *v});
      if (auto v = number_at(*r, {"metrics", "comm_exposed_ms"}))
        chart.series[2].points.push_back({cap, *v});
    }
    add_autotune_series(suite, *by_cap.begin()->second, chart);
    c.svgs.push_back(svg::render_line_chart(chart));
  }
  if (c.svgs.empty()) c.no_data = "no successful bucket_sweep run with a known bucket cap";
  return c;
}

ChartView overlap_chart(const json& suite) {
  ChartView c{"chart-overlap",
              "overlap",
              "Overlap on against off",
              "The overlap-group run (--no-overlap: every AllReduce waits for the end of "
              "backward) against the default DDP run of the same workload and world size.",
              {},
              ""};
  std::vector<std::string> unmatched;
  for (const json* off : select(suite, "overlap")) {
    const json* on = default_ddp_run(suite, *off);
    if (!on) {
      unmatched.push_back(string_at(*off, {"id"}));
      continue;
    }
    svg::BarChart chart{string_at(*off, {"workload"}) + " w" +
                            std::to_string(run_world_size(*off)) + ": overlap on vs off",
                        "ms",
                        {"overlap on (" + string_at(*on, {"id"}) + ")",
                         "overlap off (" + string_at(*off, {"id"}) + ")"},
                        {}};
    struct Metric {
      const char* label;
      std::optional<double> (*get)(const json&);
    };
    static const Metric kMetrics[] = {{"communication",
                                       [](const json& r) {
                                         return number_at(r, {"metrics", "comm_ms"});
                                       }},
                                      {"exposed comm",
                                       [](const json& r) {
                                         return number_at(r, {"metrics", "comm_exposed_ms"});
                                       }},
                                      {"median step", [](const json& r) {
                                         return number_at(r, {"metrics", "step_time_ms", "median"});
                                       }}};
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

}  // namespace

std::vector<ChartView> build_suite_charts(const json& suite) {
  return {throughput_chart(suite), scaling_chart(suite),      phases_chart(suite),
          buckets_chart(suite),    bucket_sweep_chart(suite), overlap_chart(suite)};
}

}  // namespace ddpb::reports
