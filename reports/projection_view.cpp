#include "reports/projection_view.h"

#include <fmt/core.h>

#include <cmath>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

// The projection's two models are of DDP and of DP (bench/project/projection.h).
const std::string kProjectedDdp = "ddp", kProjectedDp = "dp";

const std::optional<ProjectedDesign>& design_of(const ProjectedPoint& p, const std::string& design) {
  return design == kProjectedDdp ? p.ddp : p.dp;
}

std::optional<double> field_of(const ProjectedPoint& p, const std::string& design,
                               double ProjectedDesign::*field) {
  const auto& d = design_of(p, design);
  return d ? std::optional(*d.*field) : std::nullopt;
}

std::string faster_cell(const ProjectedPoint& p) {
  if (!p.ddp || !p.dp) return p.ddp ? "DDP (DP: one node only)" : "-";
  return p.ddp->step_ms < p.dp->step_ms ? "DDP" : (p.dp->step_ms < p.ddp->step_ms ? "DP" : "tie");
}

// A design's step, marked where its projection of the workload is unvalidated.
std::string step_cell(const ProjectedPoint& p, const std::string& design, bool unvalidated) {
  const auto step = field_of(p, design, &ProjectedDesign::step_ms);
  return format_duration(step) + (step && unvalidated ? " (unvalidated)" : "");
}

void add_rows(const ProjectedWorkload& w, const std::optional<ProjectionValidation>& v,
              TextTable& t) {
  using D = ProjectedDesign;
  const bool ddp_unvalidated = unvalidated(w.workload, kProjectedDdp, v);
  const bool dp_unvalidated = unvalidated(w.workload, kProjectedDp, v);
  for (const ProjectedPoint& p : w.points) {
    t.rows.push_back({w.workload, fmt::format("{}", p.devices),
                      step_cell(p, kProjectedDdp, ddp_unvalidated),
                      format_duration(field_of(p, kProjectedDdp, &D::exposed_ms)),
                      format_percent(field_of(p, kProjectedDdp, &D::efficiency)),
                      step_cell(p, kProjectedDp, dp_unvalidated),
                      format_duration(field_of(p, kProjectedDp, &D::comm_ms)),
                      format_percent(field_of(p, kProjectedDp, &D::efficiency)), faster_cell(p)});
    t.bad.push_back(false);
  }
}

// Fixed decimals, so never an exponent: 3 or 4 significant digits below 1000 of the unit.
std::string fixed(double v, const char* unit) {
  const double a = std::fabs(v);
  const int decimals = a < 100 ? 2 : (a < 1000 ? 1 : 0);
  return fmt::format("{:.{}f} {}", v, decimals, unit);
}

std::string rate_clause(const ComputeRateInfo& r) {
  if (!r.flops_per_s) return "compute " + r.source;
  return fmt::format("compute at {} per device ({})", format_flops(*r.flops_per_s), r.source);
}

// Efficiency against N: projected dashed, measured solid, a design in one colour.
svg::Svg efficiency_chart(const ProjectedWorkload& w) {
  svg::LineChart chart{w.workload + ": scaling efficiency", "devices", "efficiency", {}};
  chart.x_log = true;
  size_t index = 0;
  for (const std::string& design : {kProjectedDdp, kProjectedDp}) {
    const std::string label = design == kProjectedDdp ? "DDP" : "DP";
    const std::string color = svg::palette_color(index++);
    svg::Series projected{label + " projected", {}, true, color};
    svg::Series measured{label + " measured", {}, false, color};
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
                       c->faster == kProjectedDdp ? "DDP" : "DP", c->devices);
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

bool missed(const ValidationRun& r, const ProjectionValidation& v) {
  return v.tolerance && std::fabs(r.error) > *v.tolerance;
}

void add_validation(const ProjectionValidation& v, ReportSection& s) {
  SectionTable t{"projection-validation",
                 "Validation: each run's median step predicted from its workload's world-size-1 "
                 "runs on the measured topology",
                 {}};
  t.table.header = {"run", "devices", "measured", "predicted", "error"};
  if (v.tolerance) t.table.header.push_back(fmt::format("within ±{:.0f}%", *v.tolerance * 100));
  for (const ValidationRun& r : v.runs) {
    t.table.rows.push_back({r.run, fmt::format("{}", r.devices), format_duration(r.measured_ms),
                            format_duration(r.predicted_ms),
                            fmt::format("{:+.1f}%", r.error * 100)});
    if (v.tolerance) t.table.rows.back().push_back(missed(r, v) ? "no: unvalidated" : "yes");
    t.table.bad.push_back(missed(r, v));
  }
  s.notes.push_back(fmt::format(
      "Prediction error, median of |predicted / measured - 1|: DDP {}, DP {}.",
      format_percent(v.median_abs_error.ddp.value), format_percent(v.median_abs_error.dp.value)));
  if (v.tolerance) {
    s.notes.push_back(fmt::format(
        "A design whose prediction missed one of a workload's runs by more than ±{:.0f}% is "
        "unvalidated for that workload: its rows in the projection table say so.",
        *v.tolerance * 100));
  }
  if (v.oversubscribed) s.notes.push_back(*v.oversubscribed);
  s.tables.push_back(std::move(t));
}

}  // namespace

std::string format_duration(std::optional<double> ms) {
  if (!ms || !std::isfinite(*ms)) return "-";
  const double a = std::fabs(*ms);
  if (a == 0) return "0 ms";
  // The unit is chosen on the value as printed: 999.96 ms reads "1.00 s", not "1000.0 ms".
  if (a < 0.9995) return fixed(*ms * 1e3, "µs");
  if (a < 999.95) return fixed(*ms, "ms");
  return fixed(*ms / 1e3, "s");
}

std::string format_flops(double flops_per_s) {
  static const std::pair<double, const char*> kUnits[] = {
      {1e15, "PFLOP/s"}, {1e12, "TFLOP/s"}, {1e9, "GFLOP/s"}, {1e6, "MFLOP/s"}};
  for (const auto& [scale, unit] : kUnits) {
    if (std::fabs(flops_per_s) >= scale) return fixed(flops_per_s / scale, unit);
  }
  return fixed(flops_per_s, "FLOP/s");
}

std::string compute_rate_line(const ProjectedWorkload& w) {
  if (!w.compute_rate) return "";
  const auto& r = *w.compute_rate;
  if (r.ddp && r.dp && r.ddp->source == r.dp->source && r.ddp->flops_per_s == r.dp->flops_per_s)
    return rate_clause(*r.ddp);
  if (r.ddp && r.dp) return "DDP " + rate_clause(*r.ddp) + "; DP " + rate_clause(*r.dp);
  return r.ddp ? rate_clause(*r.ddp) : (r.dp ? rate_clause(*r.dp) : "");
}

bool unvalidated(const std::string& workload, const std::string& design,
                 const std::optional<ProjectionValidation>& validation) {
  if (!validation) return false;
  for (const ValidationRun& r : validation->runs) {
    if (r.workload == workload && r.mode == design && missed(r, *validation)) return true;
  }
  return false;
}

std::string unvalidated_line(const ProjectedWorkload& w,
                             const std::optional<ProjectionValidation>& validation) {
  if (!validation || !validation->tolerance) return "";
  std::string out;
  for (const std::string& design : {kProjectedDdp, kProjectedDp}) {
    std::string misses;
    for (const ValidationRun& r : validation->runs) {
      if (r.workload != w.workload || r.mode != design || !missed(r, *validation)) continue;
      misses += fmt::format("{}{} devices {:+.1f}%", misses.empty() ? "" : ", ", r.devices,
                            r.error * 100);
    }
    if (misses.empty()) continue;
    out += fmt::format(
        "{}{}'s projection is unvalidated (its validation missed by more than "
        "±{:.0f}%: {})",
        out.empty() ? "" : "; ", design == kProjectedDdp ? "DDP" : "DP",
        *validation->tolerance * 100, misses);
  }
  return out;
}

ReportSection build_projection_section(const std::optional<ProjectionRecord>& projection) {
  ReportSection s;
  s.id = "projection";
  s.heading = "Projection";
  if (!projection) {
    s.notes.push_back("No projection in this record.");
    return s;
  }
  const auto& device = projection->topology.device;
  s.notes.push_back(fmt::format(
      "A model calibrated on the measured runs (docs/metrics.md, \"Projection\"), on topology "
      "{}{}: {}.",
      projection->topology.name.empty() ? "?" : projection->topology.name,
      device ? " of " + device->name + " devices" : std::string(" of the measured devices"),
      projection->topology.source.empty() ? "?" : projection->topology.source));
  SectionTable t{"projection-table",
                 "Projected median step time and weak-scaling efficiency (against the design's own "
                 "projected step at one device)",
                 {}};
  t.table.header = {"workload",
                    "devices",
                    "DDP step",
                    "DDP exposed",
                    "DDP efficiency",
                    "DP step",
                    "DP device-0 traffic",
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
    add_rows(w, projection->validation, t.table);
    chart.svgs.push_back(efficiency_chart(w));
    if (const std::string rate = compute_rate_line(w); !rate.empty())
      s.notes.push_back(w.workload + ": " + rate + ".");
    s.paragraphs.push_back(findings(w));
    if (const std::string u = unvalidated_line(w, projection->validation); !u.empty())
      s.paragraphs.push_back(w.workload + ": " + u + ".");
  }
  if (chart.svgs.empty()) chart.no_data = "the projection has no workloads";
  s.tables.push_back(std::move(t));
  if (projection->validation) add_validation(*projection->validation, s);
  s.charts.push_back(std::move(chart));
  return s;
}

}  // namespace ddpb::reports
