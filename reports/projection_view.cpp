#include "reports/projection_view.h"

#include <fmt/core.h>
#include "base/text.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

std::optional<double> field_of(const ProjectedPoint& p, const std::string& design,
                               double ProjectedDesign::*field) {
  const ProjectedDesign* d = p.design(design);
  return d ? std::optional(d->*field) : std::nullopt;
}

// Why `design` has no projection at a point: a design with a device limit runs on one node.
std::string absent_reason(const ProjectedWorkload& w, const DesignInfo& design) {
  const DesignLimits* limits = find_named(w.limits, design.name);
  return design.label + (limits && limits->max_devices ? ": one node only" : ": not projected");
}

// The design with the shortest step at `p` (the earlier on a tie, as Note [Crossover] in
// bench/project/projection.cpp), "tie" when another matches it, and which designs are absent.
std::string faster_cell(const ProjectedWorkload& w, const ProjectedPoint& p,
                        const std::vector<DesignInfo>& designs) {
  const DesignInfo* fastest = nullptr;
  bool tie = false;
  std::string absent;
  for (const DesignInfo& d : designs) {
    const ProjectedDesign* r = p.design(d.name);
    if (!r) {
      absent += (absent.empty() ? "" : ", ") + absent_reason(w, d);
    } else if (!fastest || r->step_ms < p.design(fastest->name)->step_ms) {
      fastest = &d, tie = false;
    } else if (r->step_ms == p.design(fastest->name)->step_ms) {
      tie = true;
    }
  }
  if (!fastest || designs.size() < 2) return "-";
  if (!absent.empty()) return fastest->label + " (" + absent + ")";
  return tie ? "tie" : fastest->label;
}

// A design's step, marked where its projection of the workload is unvalidated.
std::string step_cell(const ProjectedPoint& p, const std::string& design, bool unvalidated) {
  const auto step = field_of(p, design, &ProjectedDesign::step_ms);
  return format_duration(step) + (step && unvalidated ? " (unvalidated)" : "");
}

// A design overlapping backward shows what of its communication the step waits for; any
// other, all of it.
double ProjectedDesign::*communication_field(const DesignInfo& d) {
  return d.overlaps_backward ? &ProjectedDesign::exposed_ms : &ProjectedDesign::comm_ms;
}

std::vector<std::string> table_header(const std::vector<DesignInfo>& designs) {
  std::vector<std::string> header = {"workload", "devices"};
  for (const DesignInfo& d : designs) {
    header.push_back(d.label + " step");
    header.push_back(d.label + (d.overlaps_backward ? " exposed" : " communication"));
    header.push_back(d.label + " efficiency");
  }
  if (designs.size() >= 2) header.push_back("faster");
  return header;
}

void add_rows(const ProjectedWorkload& w, const std::vector<DesignInfo>& designs,
              const std::optional<ProjectionValidation>& v, TextTable& t) {
  std::vector<bool> missed;
  for (const DesignInfo& d : designs) missed.push_back(unvalidated(w.workload, d.name, v));
  for (const ProjectedPoint& p : w.points) {
    std::vector<std::string> row = {w.workload, fmt::format("{}", p.devices)};
    for (size_t i = 0; i < designs.size(); ++i) {
      const std::string& name = designs[i].name;
      row.push_back(step_cell(p, name, missed[i]));
      row.push_back(format_duration(field_of(p, name, communication_field(designs[i]))));
      row.push_back(format_percent(field_of(p, name, &ProjectedDesign::efficiency)));
    }
    if (designs.size() >= 2) row.push_back(faster_cell(w, p, designs));
    t.rows.push_back(std::move(row));
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
svg::Svg efficiency_chart(const ProjectedWorkload& w, const std::vector<DesignInfo>& designs) {
  svg::LineChart chart{w.workload + ": scaling efficiency", "devices", "efficiency", {}};
  chart.x_log = true;
  size_t index = 0;
  for (const DesignInfo& design : designs) {
    const std::string color = svg::palette_color(index++);
    svg::Series projected{design.label + " projected", {}, true, color};
    svg::Series measured{design.label + " measured", {}, false, color};
    for (const ProjectedPoint& p : w.points) {
      if (const auto e = field_of(p, design.name, &ProjectedDesign::efficiency))
        projected.points.push_back({static_cast<double>(p.devices), *e});
    }
    for (const MeasuredPoint& m : w.measured) {
      if (m.mode == design.name && m.efficiency)
        measured.points.push_back({static_cast<double>(m.devices), *m.efficiency});
    }
    for (auto* s : {&projected, &measured}) {
      if (!s->points.empty()) chart.series.push_back(std::move(*s));
    }
  }
  return svg::render_line_chart(chart);
}

// "A and B", "A, B and C".
std::string joined_labels(const std::vector<const DesignInfo*>& designs) {
  std::vector<std::string> labels;
  for (const DesignInfo* d : designs) labels.push_back(d->label);
  return join_list(labels);
}

// What the scans of one design found (DesignLimits), in clauses.
void add_limit_clauses(const DesignInfo& d, const DesignLimits& l, std::vector<std::string>& out) {
  if (const auto n = l.max_devices_at_90pct) {
    out.push_back(*n > 1 ? fmt::format("{} keeps >= 90% efficiency up to {} devices", d.label, *n)
                         : d.label + " falls below 90% efficiency from its second device");
  }
  if (!l.max_devices) return;
  const auto stop = l.stops_gaining_at ? l.stops_gaining_at->value : std::nullopt;
  if (stop) {
    out.push_back(*stop > 1 ? fmt::format("{} stops gaining after {} devices", d.label, *stop)
                            : d.label + " gains nothing from a second device");
  } else if (*l.max_devices > 1) {
    out.push_back(
        fmt::format("{} keeps gaining up to {} devices (one node)", d.label, *l.max_devices));
  } else {
    out.push_back(d.label + " runs on one device only here (one node of one device)");
  }
}

std::string findings(const ProjectionRecord& p, const ProjectedWorkload& w,
                     const std::vector<DesignInfo>& designs) {
  std::vector<const DesignInfo*> projected;  // the designs with limits: those projected here
  for (const DesignInfo& d : designs)
    if (find_named(w.limits, d.name)) projected.push_back(&d);
  std::vector<std::string> clauses;
  if (const auto& c = w.crossover.value) {
    clauses.push_back(fmt::format("{} becomes the faster design at {} devices",
                                  p.design_named(c->faster).label, c->devices));
  } else if (!w.points.empty() && projected.size() >= 2) {
    clauses.push_back(fmt::format("no crossover between {} where {} run", joined_labels(projected),
                                  projected.size() == 2 ? "both" : "they"));
  }
  for (const DesignInfo* d : projected)
    add_limit_clauses(*d, *find_named(w.limits, d->name), clauses);
  std::string out = w.workload + ": ";
  for (size_t i = 0; i < clauses.size(); ++i) out += (i ? "; " : "") + clauses[i];
  return out + (clauses.empty() ? "nothing projected." : ".");
}

bool missed(const ValidationRun& r, const ProjectionValidation& v) {
  return v.tolerance && std::fabs(r.error) > *v.tolerance;
}

void add_validation(const ProjectionValidation& v, const std::vector<DesignInfo>& designs,
                    ReportSection& s) {
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
  std::string errors;
  for (const DesignInfo& d : designs) {
    if (const Nullable<double>* e = find_named(v.median_abs_error, d.name))
      errors +=
          fmt::format("{}{} {}", errors.empty() ? "" : ", ", d.label, format_percent(e->value));
  }
  if (!errors.empty())
    s.notes.push_back("Prediction error, median of |predicted / measured - 1|: " + errors + ".");
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

std::vector<DesignInfo> designs_shown(const ProjectionRecord& p) {
  std::vector<DesignInfo> out = p.designs;
  const auto add = [&](const std::string& name) {
    if (!find_design(out, name)) out.push_back(p.design_named(name));
  };
  for (const ProjectedWorkload& w : p.workloads) {
    for (const auto& [name, run] : w.basis.designs) add(name);
    for (const ProjectedPoint& point : w.points)
      for (const auto& [name, design] : point.designs) add(name);
  }
  return out;
}

std::string compute_rate_line(const ProjectionRecord& p, const ProjectedWorkload& w) {
  if (!w.compute_rate) return "";
  std::vector<std::pair<const DesignInfo*, const ComputeRateInfo*>> rates;
  const std::vector<DesignInfo> designs = designs_shown(p);
  for (const DesignInfo& d : designs)
    if (const ComputeRateInfo* r = find_named(*w.compute_rate, d.name)) rates.emplace_back(&d, r);
  if (rates.empty()) return "";
  const ComputeRateInfo& first = *rates.front().second;
  const bool agree = std::all_of(rates.begin(), rates.end(), [&](const auto& r) {
    return r.second->source == first.source && r.second->flops_per_s == first.flops_per_s;
  });
  if (agree) return rate_clause(first);
  std::string out;
  for (const auto& [design, rate] : rates)
    out += (out.empty() ? "" : "; ") + design->label + " " + rate_clause(*rate);
  return out;
}

bool unvalidated(const std::string& workload, const std::string& design,
                 const std::optional<ProjectionValidation>& validation) {
  if (!validation) return false;
  for (const ValidationRun& r : validation->runs) {
    if (r.workload == workload && r.mode == design && missed(r, *validation)) return true;
  }
  return false;
}

std::string unvalidated_line(const ProjectionRecord& p, const ProjectedWorkload& w) {
  const auto& validation = p.validation;
  if (!validation || !validation->tolerance) return "";
  std::string out;
  for (const DesignInfo& design : designs_shown(p)) {
    std::string misses;
    for (const ValidationRun& r : validation->runs) {
      if (r.workload != w.workload || r.mode != design.name || !missed(r, *validation)) continue;
      misses += fmt::format("{}{} devices {:+.1f}%", misses.empty() ? "" : ", ", r.devices,
                            r.error * 100);
    }
    if (misses.empty()) continue;
    out += fmt::format(
        "{}{}'s projection is unvalidated (its validation missed by more than "
        "±{:.0f}%: {})",
        out.empty() ? "" : "; ", design.label, *validation->tolerance * 100, misses);
  }
  return out;
}

namespace {

// A parameter count in the unit that keeps it short: "470.5K", "124.4M", "2.1G".
std::string format_parameters(double n) {
  if (n >= 1e9) return fmt::format("{:.1f}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

}  // namespace

std::string memory_fit_line(const ProjectionRecord& p, const ProjectedWorkload& w) {
  std::vector<std::string> peaks, fits;
  const ProjectedPoint* last = w.points.empty() ? nullptr : &w.points.back();
  for (const DesignInfo& d : designs_shown(p)) {
    const ProjectedDesign* at = last ? last->design(d.name) : nullptr;
    if (at && at->memory_bytes)
      peaks.push_back(fmt::format("{} {}", d.label, format_bytes(*at->memory_bytes)));
    const MemoryFit* fit = w.fits ? find_named(*w.fits, d.name) : nullptr;
    if (!fit) continue;
    std::string f = fmt::format("{} fits {} parameters", d.label,
                                format_parameters(static_cast<double>(fit->max_parameters)));
    if (fit->largest_preset) f += " (largest preset: " + *fit->largest_preset + ")";
    fits.push_back(std::move(f));
  }
  std::string out;
  if (!peaks.empty())
    out = fmt::format("{}: memory per device at {} devices: {}.", w.workload, last->devices,
                      join_list(peaks));
  if (!fits.empty() && p.scale.device_memory_bytes)
    out += fmt::format("{}On a device of {} at {} devices, {}.", out.empty() ? "" : " ",
                       format_bytes(*p.scale.device_memory_bytes), w.fits->front().second.devices,
                       join_list(fits));
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
  const std::vector<DesignInfo> designs = designs_shown(*projection);
  SectionTable t{"projection-table",
                 "Projected median step time and weak-scaling efficiency (against the design's own "
                 "projected step at one device)",
                 {}};
  t.table.header = table_header(designs);
  ChartView chart{"chart-projection",
                  "projection",
                  "Projected scaling efficiency",
                  "Weak-scaling efficiency against the device count: measured runs solid, the "
                  "projection dashed.",
                  {},
                  ""};
  for (const ProjectedWorkload& w : projection->workloads) {
    add_rows(w, designs, projection->validation, t.table);
    chart.svgs.push_back(efficiency_chart(w, designs));
    if (const std::string rate = compute_rate_line(*projection, w); !rate.empty())
      s.notes.push_back(w.workload + ": " + rate + ".");
    s.paragraphs.push_back(findings(*projection, w, designs));
    if (const std::string u = unvalidated_line(*projection, w); !u.empty())
      s.paragraphs.push_back(w.workload + ": " + u + ".");
    if (std::string m = memory_fit_line(*projection, w); !m.empty())
      s.paragraphs.push_back(std::move(m));
  }
  if (chart.svgs.empty()) chart.no_data = "the projection has no workloads";
  s.tables.push_back(std::move(t));
  if (projection->validation) add_validation(*projection->validation, designs, s);
  s.charts.push_back(std::move(chart));
  return s;
}

}  // namespace ddpb::reports
