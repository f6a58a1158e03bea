#include "reports/critical_path_view.h"

#include <fmt/core.h>

#include <map>
#include <tuple>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

const std::vector<std::string> kKinds = {"compute", "communication", "data", "wait", "host"};

size_t kind_index(const std::string& kind) {
  for (size_t i = 0; i < kKinds.size(); ++i)
    if (kKinds[i] == kind) return i;
  return kKinds.size() - 1;
}

struct DesignRun {
  const char* design;  // "DP" or "DDP"
  const char* unit;    // "device" or "rank"
  const SuiteRun* run;
};

// Per workload, the DP and DDP scaling runs at the largest world size above 1 that have a
// critical path.
std::vector<std::pair<std::string, std::vector<DesignRun>>> runs_with_paths(const SuiteRecord& s) {
  std::vector<std::pair<std::string, std::vector<DesignRun>>> out;
  for (const std::string& w : s.workloads()) {
    std::vector<DesignRun> designs;
    for (const auto& [mode, design, unit] :
         {std::tuple{ModeName::Dp, "DP", "device"}, std::tuple{ModeName::Ddp, "DDP", "rank"}}) {
      const SuiteRun* best = nullptr;
      for (const SuiteRun& r : s.runs) {
        if (r.group != RunGroup::Scaling || r.mode != mode || r.workload != w || r.world_size < 2 ||
            !r.measured() || !r.metrics->critical_path)
          continue;
        if (!best || r.world_size > best->world_size) best = &r;
      }
      if (best) designs.push_back({design, unit, best});
    }
    if (!designs.empty()) out.emplace_back(w, std::move(designs));
  }
  return out;
}

std::string share(double ms, double step_ms) {
  return format_percent(step_ms > 0 ? ms / step_ms : 0);
}

svg::Svg gantt(const std::string& workload, const DesignRun& d) {
  const CriticalPath& c = *d.run->metrics->critical_path;
  svg::Timeline t;
  t.title = fmt::format("{}, {} at {} {}s: median step {} ms", printable(workload), d.design,
                        d.run->world_size, d.unit, format_number(c.step_ms));
  t.x_label = "ms from the step's start (each " + std::string(d.unit) + "'s own clock)";
  t.kinds = kKinds;
  t.width = 900;
  std::map<std::string, svg::TimelineRow> rows;
  std::vector<std::string> order;
  for (const PathSpan& s : c.lanes) {
    const bool bucket = s.label.rfind("bucket ", 0) == 0;
    const std::string label = fmt::format("{} {}{}", d.unit, s.rank, bucket ? " collectives" : "");
    if (!rows.count(label)) order.push_back(label), rows[label].label = label;
    rows[label].spans.push_back({s.start_ms, s.end_ms, kind_index(s.kind)});
  }
  for (const std::string& label : order) t.rows.push_back(std::move(rows[label]));
  svg::TimelineRow path{"critical path", {}, {}};
  for (const PathSpan& s : c.path) path.spans.push_back({s.start_ms, s.end_ms, kind_index(s.kind)});
  t.rows.push_back(std::move(path));
  return svg::render_timeline(t);
}

}  // namespace

std::vector<std::string> critical_path_paragraphs(const SuiteRecord& suite) {
  std::vector<std::string> out;
  for (const auto& [w, designs] : runs_with_paths(suite)) {
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
              "Each rank's (DP: device's) intervals of the median step, and under them the chain "
              "that ends at the step's end, coloured by what it is: compute, communication, data, "
              "waiting for another rank or device, or host time outside every phase. DDP's other "
              "ranks show their phase medians; DP's replicas their work (Note [Critical path]).",
              {},
              ""};
  for (const auto& [w, designs] : runs_with_paths(suite))
    for (const DesignRun& d : designs) v.svgs.push_back(gantt(w, d));
  if (v.svgs.empty())
    v.no_data = "no DP or DDP scaling run above one device has metrics.critical_path";
  return v;
}

}  // namespace ddpb::reports
