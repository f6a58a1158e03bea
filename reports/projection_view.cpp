#include "reports/projection_view.h"

#include <fmt/core.h>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

const std::optional<ProjectedDesign>& design_of(const ProjectedPoint& p, ModeName design) {
  return design == ModeName::Ddp ? p.ddp : p.dp;
}

std::optional<double> field_of(const ProjectedPoint& p, ModeName design,
                               double ProjectedDesign::*field) {
  const auto& d = design_of(p, design);
  return d ? std::optional(*d.*field) : std::nullopt;
}

std::string faster_cell(const ProjectedPoint& p) {
  if (!p.ddp || !p.dp) return p.ddp ? "DDP (DP: one node only)" : "-";
  return p.ddp->step_ms < p.dp->step_ms ? "DDP" : (p.dp->step_ms < p.ddp->step_ms ? "DP" : "tie");
}

void add_rows(const ProjectedWorkload& w, TextTable& t) {
  using D = ProjectedDesign;
  for (const ProjectedPoint& p : w.points) {
    t.rows.push_back({w.workload, fmt::format("{}", p.devices),
                      format_number(field_of(p, ModeName::Ddp, &D::step_ms)),
                      format_number(field_of(p, ModeName::Ddp, &D::exposed_ms)),
                      format_percent(field_of(p, ModeName::Ddp, &D::efficiency)),
                      format_number(field_of(p, ModeName::Dp, &D::step_ms)),
                      format_number(field_of(p, ModeName::Dp, &D::comm_ms)),
                      format_percent(field_of(p, ModeName::Dp, &D::efficiency)), faster_cell(p)});
    t.bad.push_back(false);
  }
}

// Efficiency against N: projected dashed, measured solid.
svg::Svg efficiency_chart(const ProjectedWorkload& w) {
  svg::LineChart chart{w.workload + ": scaling efficiency", "devices", "efficiency", {}};
  chart.x_log = true;
  for (const ModeName design : {ModeName::Ddp, ModeName::Dp}) {
    const std::string label = design == ModeName::Ddp ? "DDP" : "DP";
    svg::Series projected{label + " projected", {}, true};
    svg::Series measured{label + " measured", {}, false};
    for (const ProjectedPoint& p : w.points) {
      if (const auto e = field_of(p, design, &ProjectedDesign::efficiency))
        projected.points.push_back({static_cast<double>(p.devices), *e});
    }
    for (const MeasuredPoint& m : w.measured) {
      if (m.mode == design && m.efficiency)
        measured.points.push_back({static_cast<double>(m.devices), *m.efficiency});
    }
    for (auto* s : {&projected, &measured}) {
      if (!s->points.empty()) chart.series.push_back(std::move(*s));
    }
  }
  return svg::render_line_chart(chart);
}

std::string findings(const ProjectedWorkload& w) {
  std::string out = w.workload + ": ";
  if (const auto& c = w.crossover.value) {
    out += fmt::format("{} becomes the faster design at {} devices; ",
                       c->faster == ModeName::Ddp ? "DDP" : "DP", c->devices);
  } else if (!w.points.empty()) {
    out += "no crossover between DP and DDP where both run; ";
  }
  if (const auto n = w.ddp_max_devices_at_90pct) {
    out += *n > 1 ? fmt::format("DDP keeps >= 90% efficiency up to {} devices; ", *n)
                  : std::string("DDP falls below 90% efficiency from its second device; ");
  }
  if (w.dp_max_devices) {
    const auto stop = w.dp_stops_gaining_at ? w.dp_stops_gaining_at->value : std::nullopt;
    if (stop) {
      out += *stop > 1 ? fmt::format("DP stops gaining after {} devices.", *stop)
                       : std::string("DP gains nothing from a second device.");
    } else if (*w.dp_max_devices > 1) {
      out += fmt::format("DP keeps gaining up to {} devices (one node).", *w.dp_max_devices);
    } else {
      out += "DP runs on one device only here (one node of one device).";
    }
  }
  return out;
}

void add_validation(const ProjectionValidation& v, ReportSection& s) {
  SectionTable t{"projection-validation",
                 "Validation: each run's median step predicted from its workload's world-size-1 "
                 "runs on the measured topology",
                 {}};
  t.table.header = {"run", "devices", "measured ms", "predicted ms", "error"};
  for (const ValidationRun& r : v.runs) {
    t.table.rows.push_back({r.run, fmt::format("{}", r.devices), format_number(r.measured_ms),
                            format_number(r.predicted_ms), fmt::format("{:+.1f}%", r.error * 100)});
    t.table.bad.push_back(false);
  }
  s.notes.push_back(fmt::format(
      "Prediction error, median of |predicted / measured - 1|: DDP {}, DP {}.",
      format_percent(v.median_abs_error.ddp.value), format_percent(v.median_abs_error.dp.value)));
  if (v.oversubscribed) s.notes.push_back(*v.oversubscribed);
  s.tables.push_back(std::move(t));
}

}  // namespace

ReportSection build_projection_section(const std::optional<ProjectionRecord>& projection) {
  ReportSection s;
  s.id = "projection";
  s.heading = "Projection";
  if (!projection) {
    s.notes.push_back("No projection in this record.");
    return s;
  }
  s.notes.push_back(fmt::format(
      "A model calibrated on the measured runs (docs/metrics.md, \"Projection\"), on topology "
      "{}: {}.",
      projection->topology.name.empty() ? "?" : projection->topology.name,
      projection->topology.source.empty() ? "?" : projection->topology.source));
  SectionTable t{"projection-table", "Projected median step time and weak-scaling efficiency", {}};
  t.table.header = {"workload",
                    "devices",
                    "DDP step ms",
                    "DDP exposed ms",
                    "DDP efficiency",
                    "DP step ms",
                    "DP device-0 traffic ms",
                    "DP efficiency",
                    "faster"};
  ChartView chart{"chart-projection",
                  "projection",
                  "Projected scaling efficiency",
                  "Weak-scaling efficiency against the device count: measured runs solid, the "
                  "projection dashed.",
                  {},
                  ""};
  for (const ProjectedWorkload& w : projection->workloads) {
    add_rows(w, t.table);
    chart.svgs.push_back(efficiency_chart(w));
    s.paragraphs.push_back(findings(w));
  }
  if (chart.svgs.empty()) chart.no_data = "the projection has no workloads";
  s.tables.push_back(std::move(t));
  if (projection->validation) add_validation(*projection->validation, s);
  s.charts.push_back(std::move(chart));
  return s;
}

}  // namespace ddpb::reports
