#include "reports/comm_hooks_view.h"

#include <fmt/core.h>

#include <optional>
#include <string>
#include <vector>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

struct HookRun {
  std::string name;  // "fp32" or the hook
  const SuiteRun* run;
};

// The fp32 run a hook run compares with: the same design, workload and world size, group
// scaling.
const SuiteRun* fp32_run(const SuiteRecord& suite, const SuiteRun& hook_run) {
  for (const SuiteRun& r : suite.runs) {
    if (r.group == RunGroup::Scaling && r.mode == hook_run.mode && r.variant.empty() &&
        r.workload == hook_run.workload && r.world_size == hook_run.world_size && r.measured())
      return &r;
  }
  return nullptr;
}

// The hook its configuration names; a hand-made record without one, from its variant.
std::string hook_name(const SuiteRun& run) {
  if (run.config) return run.config->comm_hook;
  const auto at = run.variant.rfind("-hook");
  return at == std::string::npos ? run.variant : run.variant.substr(0, at);
}

std::optional<double> final_loss(const SuiteRun& run) {
  const auto& losses = run.metrics->loss_per_step;
  if (!losses || losses->empty()) return std::nullopt;
  return losses->back();
}

std::optional<double> bytes_per_step(const SuiteRun& run) {
  const auto& b = run.metrics->comm_bytes_per_step;
  return b ? std::optional(static_cast<double>(*b)) : std::nullopt;
}

// "308x less (-99.7%)", relative to the fp32 bytes.
std::string saving(std::optional<double> bytes, std::optional<double> fp32) {
  if (!bytes || !fp32 || *bytes <= 0 || *fp32 <= 0) return "-";
  return fmt::format("{}x less ({})", format_number(*fp32 / *bytes),
                     format_percent(*bytes / *fp32 - 1.0));
}

std::string relative(std::optional<double> v, std::optional<double> base) {
  if (!v || !base || *base <= 0) return "-";
  return fmt::format("{}{}", *v >= *base ? "+" : "", format_percent(*v / *base - 1.0));
}

void add_rows(const std::vector<HookRun>& runs, TextTable& t) {
  const SuiteRun& base = *runs.front().run;
  const auto base_bytes = bytes_per_step(base);
  const double base_ms = base.metrics->step_time_ms.median;
  for (const HookRun& h : runs) {
    const bool is_base = h.run == &base;
    const auto bytes = bytes_per_step(*h.run);
    const StepTimeStats& st = h.run->metrics->step_time_ms;
    t.rows.push_back({h.run->workload, std::to_string(h.run->world_size), h.name,
                      format_bytes(bytes), is_base ? "baseline" : saving(bytes, base_bytes),
                      format_number(st.median) + " ± " + format_number(st.stddev),
                      is_base ? "baseline" : relative(st.median, base_ms),
                      format_number(final_loss(*h.run))});
    t.bad.push_back(false);
  }
}

svg::Svg loss_chart(const std::string& workload, const std::vector<HookRun>& runs) {
  svg::LineChart chart;
  chart.title = workload + ": training loss per step";
  chart.x_label = "step (warm-up included)";
  chart.y_label = "loss";
  chart.y_from_zero = false;
  // A lossless hook's curve lies on fp32's: fp32 (first) is drawn widest and each hook narrower
  // on top, so no curve hides another.
  chart.overlaid = true;
  for (const HookRun& h : runs) {
    svg::Series s{h.name, {}, false};
    if (const auto& losses = h.run->metrics->loss_per_step) {
      for (size_t i = 0; i < losses->size(); ++i)
        s.points.emplace_back(static_cast<double>(i + 1), (*losses)[i]);
    }
    chart.series.push_back(std::move(s));
  }
  return svg::render_line_chart(chart);
}

// Per workload and world size: the fp32 run first, then its hooks in record order.
std::vector<std::vector<HookRun>> hook_groups(const SuiteRecord& suite) {
  std::vector<std::vector<HookRun>> groups;
  for (const SuiteRun& r : suite.runs) {
    if (r.group != RunGroup::CommHook || !r.measured()) continue;
    const SuiteRun* base = fp32_run(suite, r);
    if (!base) continue;
    auto it = groups.begin();
    while (it != groups.end() && it->front().run != base) ++it;
    if (it == groups.end()) {
      groups.push_back({{"fp32", base}});
      it = groups.end() - 1;
    }
    it->push_back({hook_name(r), &r});
  }
  return groups;
}

}  // namespace

ReportSection build_comm_hooks_section(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "comm-hooks";
  s.heading = "Comm hooks";
  SectionTable t{"comm-hooks-table",
                 "Each hook against the fp32 AllReduce at the same world size: the bytes its "
                 "collectives carry in one step (PowerSGD: the uncompressed 1-D tensors, P and "
                 "Q), the step time median ± stddev, and the loss after the last step.",
                 {}};
  t.table.header = {"workload", "N",       "hook",    "bytes/step",
                    "saved",    "step ms", "vs fp32", "final loss"};
  ChartView chart{"chart-comm-hook-loss",
                  "comm_hook_loss",
                  "Loss with each comm hook",
                  "The training loss of every step with each hook, fp32 included: a lossy hook "
                  "that changes what is learned shows here, not in the step time. fp32 is the "
                  "widest line and each hook is drawn narrower on top of the ones before it, so "
                  "a curve that matches fp32's shows as a line inside fp32's.",
                  {},
                  ""};
  for (const auto& group : hook_groups(suite)) {
    add_rows(group, t.table);
    if (group.front().run->metrics->loss_per_step)
      chart.svgs.push_back(loss_chart(group.front().run->workload, group));
  }
  if (chart.svgs.empty()) chart.no_data = "the runs have no metrics.loss_per_step";
  if (t.table.rows.empty()) {
    s.notes.push_back("No comm hook runs (with their fp32 DDP runs) in this record.");
    return s;
  }
  s.notes.push_back(
      "PowerSGD runs compress from the first measured step (--powersgd-start-iter = the warm-up, "
      "at least 2); the loss curves include the warm-up.");
  s.tables.push_back(std::move(t));
  s.charts.push_back(std::move(chart));
  return s;
}

}  // namespace ddpb::reports
