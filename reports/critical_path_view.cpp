#include "reports/critical_path_view.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "reports/phase_style.h"
#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

// Note [Phase colours]: what a span is drawn as. A phase by its name, as in the step anatomy;
// a bucket's collective, a wait and host time by what they are; a span of any other label by
// its kind ("data" as the data phase, other compute as forward, other communication as a
// collective).
std::string span_style(const PathSpan& s) {
  if (phase_order(s.label) < phase_names().size()) return s.label;
  if (s.kind == "wait") return std::string(kWaitSpan);
  if (s.kind == "host") return std::string(kHostSpan);
  if (s.kind == "data") return "data";
  if (s.kind == "compute") return "forward";
  return std::string(kCollectiveSpan);
}

struct DesignRun {
  std::string design;  // the design's label: "DP"
  std::string unit;    // its noun: "device" or "rank"
  const SuiteRun* run;
};

// Per workload, each parallel design's scaling run at the largest world size above 1 that has
// a critical path.
std::vector<std::pair<std::string, std::vector<DesignRun>>> runs_with_paths(const SuiteRecord& s) {
  std::vector<std::pair<std::string, std::vector<DesignRun>>> out;
  for (const std::string& w : s.workloads()) {
    std::vector<DesignRun> designs;
    for (const DesignInfo* d : s.parallel_designs()) {
      const SuiteRun* best = nullptr;
      for (const SuiteRun& r : s.runs) {
        if (r.group != RunGroup::Scaling || r.mode != d->name || r.workload != w ||
            r.world_size < 2 || !r.measured() || !r.metrics->critical_path)
          continue;
        if (!best || r.world_size > best->world_size) best = &r;
      }
      if (best) designs.push_back({d->label, d->noun, best});
    }
    if (!designs.empty()) out.emplace_back(w, std::move(designs));
  }
  return out;
}

std::string share(double ms, double step_ms) {
  return format_percent(step_ms > 0 ? ms / step_ms : 0);
}

// The legend of one chart: the styles its spans use, in the table's order.
std::vector<std::string> legend_of(const CriticalPath& c) {
  std::vector<std::string> styles;
  for (const auto* spans : {&c.lanes, &c.path}) {
    for (const PathSpan& s : *spans) {
      const std::string style = span_style(s);
      if (std::find(styles.begin(), styles.end(), style) == styles.end()) styles.push_back(style);
    }
  }
  std::stable_sort(styles.begin(), styles.end(), [](const std::string& a, const std::string& b) {
    return phase_order(a) < phase_order(b);
  });
  return styles;
}

svg::Svg gantt(const std::string& workload, const DesignRun& d) {
  const CriticalPath& c = *d.run->metrics->critical_path;
  svg::Timeline t;
  t.title = fmt::format("{}, {} at {} {}s: median step {} ms", printable(workload), d.design,
                        d.run->world_size, d.unit, format_number(c.step_ms));
  t.x_label = "ms from the step's start (each " + std::string(d.unit) + "'s own clock)";
  t.kinds = legend_of(c);
  for (const std::string& k : t.kinds) t.colors.push_back(phase_color(k));
  t.width = 900;
  const auto kind_of = [&](const PathSpan& s) {
    return static_cast<size_t>(std::find(t.kinds.begin(), t.kinds.end(), span_style(s)) -
                               t.kinds.begin());
  };
  std::map<std::string, svg::TimelineRow> rows;
  std::vector<std::string> order;
  for (const PathSpan& s : c.lanes) {
    const bool bucket = s.label.rfind("bucket ", 0) == 0;
    const std::string label = fmt::format("{} {}{}", d.unit, s.rank, bucket ? " collectives" : "");
    if (!rows.count(label)) order.push_back(label), rows[label].label = label;
    rows[label].spans.push_back({s.start_ms, s.end_ms, kind_of(s)});
  }
  for (const std::string& label : order) t.rows.push_back(std::move(rows[label]));
  svg::TimelineRow path{"critical path", {}, {}};
  for (const PathSpan& s : c.path) path.spans.push_back({s.start_ms, s.end_ms, kind_of(s)});
  t.rows.push_back(std::move(path));
  return svg::render_timeline(t);
}

}  // namespace

std::vector<std::string> critical_path_paragraphs(const SuiteRecord& suite,
                                                  const std::string& workload) {
  std::vector<std::string> out;
  for (const auto& [w, designs] : runs_with_paths(suite)) {
    if (w != workload) continue;
    for (const DesignRun& d : designs) {
      const CriticalPath& c = *d.run->metrics->critical_path;
      const std::string waited =
          c.waited_for ? fmt::format("waiting for {} {}", d.unit, *c.waited_for) : "waiting";
      out.push_back(
          fmt::format("Critical path, {} {} at {} {}s: the median step's {} ms are compute {}, "
                      "communication {}, data {}, {} {}, host {}.",
                      printable(w), d.design, d.run->world_size, d.unit, format_number(c.step_ms),
                      share(c.compute_ms, c.step_ms), share(c.communication_ms, c.step_ms),
                      share(c.data_ms, c.step_ms), waited, share(c.wait_ms, c.step_ms),
                      share(c.host_ms, c.step_ms)));
    }
  }
  return out;
}

ChartView build_critical_path_chart(const SuiteRecord& suite) {
  ChartView v{"chart-critical-path",
              "critical_path",
              "Critical path of the median step",
              "A chart per parallel design: each rank's (or device's) intervals of the median "
              "step, and under them the chain that ends at the step's end, coloured by phase in "
              "the step anatomy's colours, and besides the phases: a bucket's collective, "
              "waiting for another rank or device, and host time outside every phase. Ranks "
              "that are processes show their phase medians; one process's devices their work "
              "(Note [Critical path]).",
              {},
              ""};
  for (const auto& [w, designs] : runs_with_paths(suite))
    for (const DesignRun& d : designs) v.svgs.push_back(gantt(w, d));
  if (v.svgs.empty())
    v.no_data = "no parallel design's scaling run above one device has metrics.critical_path";
  return v;
}

}  // namespace ddpb::reports
