#include "reports/projection_view.h"

#include <fmt/core.h>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

using nlohmann::json;

std::string ms_cell(const json& point, const char* design, const char* key) {
  return format_number(number_at(point, {design, key}));
}

std::string faster_cell(const json& point) {
  const auto ddp = number_at(point, {"ddp", "step_ms"});
  const auto dp = number_at(point, {"dp", "step_ms"});
  if (!ddp || !dp) return ddp ? "DDP (DP: one node only)" : "-";
  return *ddp < *dp ? "DDP" : (*dp < *ddp ? "DP" : "tie");
}

void add_rows(const json& w, TextTable& t) {
  const json* points = find_at(w, {"points"});
  if (!points || !points->is_array()) return;
  for (const auto& p : *points) {
    t.rows.push_back({string_at(w, {"workload"}),
                      fmt::format("{:g}", number_at(p, {"devices"}).value_or(0)),
                      ms_cell(p, "ddp", "step_ms"), ms_cell(p, "ddp", "exposed_ms"),
                      format_percent(number_at(p, {"ddp", "efficiency"})),
                      ms_cell(p, "dp", "step_ms"), ms_cell(p, "dp", "comm_ms"),
                      format_percent(number_at(p, {"dp", "efficiency"})), faster_cell(p)});
    t.bad.push_back(false);
  }
}

// Efficiency against N: projected dashed, measured solid.
svg::Svg efficiency_chart(const json& w) {
  svg::LineChart chart{
      string_at(w, {"workload"}) + ": scaling efficiency", "devices", "efficiency", {}};
  chart.x_log = true;
  for (const char* design : {"ddp", "dp"}) {
    svg::Series projected{
        std::string(design == std::string("ddp") ? "DDP" : "DP") + " projected", {}, true};
    svg::Series measured{
        std::string(design == std::string("ddp") ? "DDP" : "DP") + " measured", {}, false};
    if (const json* points = find_at(w, {"points"}); points && points->is_array()) {
      for (const auto& p : *points) {
        const auto n = number_at(p, {"devices"});
        const auto e = number_at(p, {design, "efficiency"});
        if (n && e) projected.points.push_back({*n, *e});
      }
    }
    if (const json* m = find_at(w, {"measured"}); m && m->is_array()) {
      for (const auto& p : *m) {
        const auto n = number_at(p, {"devices"});
        const auto e = number_at(p, {"efficiency"});
        if (string_at(p, {"mode"}) == design && n && e) measured.points.push_back({*n, *e});
      }
    }
    for (auto* s : {&projected, &measured}) {
      if (!s->points.empty()) chart.series.push_back(std::move(*s));
    }
  }
  return svg::render_line_chart(chart);
}

std::string findings(const json& w) {
  std::string out = string_at(w, {"workload"}) + ": ";
  if (const json* c = find_at(w, {"crossover"}); c && c->is_object()) {
    out += fmt::format("{} becomes the faster design at {:g} devices; ",
                       string_at(*c, {"faster"}) == "ddp" ? "DDP" : "DP",
                       number_at(*c, {"devices"}).value_or(0));
  } else if (find_at(w, {"points"})) {
    out += "no crossover between DP and DDP where both run; ";
  }
  if (const auto n = number_at(w, {"ddp_max_devices_at_90pct"}))
    out += fmt::format("DDP keeps >= 90% efficiency up to {:g} devices; ", *n);
  if (find_at(w, {"dp_max_devices"})) {
    const auto stop = number_at(w, {"dp_stops_gaining_at"});
    out += stop ? fmt::format("DP stops gaining after {:g} devices.", *stop)
                : fmt::format("DP keeps gaining up to {:g} devices (one node).",
                              number_at(w, {"dp_max_devices"}).value_or(0));
  }
  return out;
}

void add_validation(const json& v, ReportSection& s) {
  SectionTable t{"projection-validation",
                 "Validation: each run's median step predicted from its workload's world-size-1 "
                 "runs on the measured topology",
                 {}};
  t.table.header = {"run", "devices", "measured ms", "predicted ms", "error"};
  if (const json* runs = find_at(v, {"runs"}); runs && runs->is_array()) {
    for (const auto& r : *runs) {
      const auto e = number_at(r, {"error"});
      t.table.rows.push_back({string_at(r, {"run"}),
                              fmt::format("{:g}", number_at(r, {"devices"}).value_or(0)),
                              format_number(number_at(r, {"measured_ms"})),
                              format_number(number_at(r, {"predicted_ms"})),
                              e ? fmt::format("{:+.1f}%", *e * 100) : "-"});
      t.table.bad.push_back(false);
    }
  }
  s.notes.push_back(
      fmt::format("Prediction error, median of |predicted / measured - 1|: DDP {}, DP {}.",
                  format_percent(number_at(v, {"median_abs_error", "ddp"})),
                  format_percent(number_at(v, {"median_abs_error", "dp"}))));
  if (const json* note = find_at(v, {"oversubscribed"}); note && note->is_string())
    s.notes.push_back(note->get<std::string>());
  s.tables.push_back(std::move(t));
}

}  // namespace

ReportSection build_projection_section(const json& projection) {
  ReportSection s;
  s.id = "projection";
  s.heading = "Projection";
  if (!projection.is_object() || !find_at(projection, {"workloads"})) {
    s.notes.push_back("No projection in this record.");
    return s;
  }
  s.notes.push_back(fmt::format(
      "A model calibrated on the measured runs (docs/metrics.md, \"Projection\"), on topology "
      "{}: {}.",
      string_at(projection, {"topology", "name"}, "?"),
      string_at(projection, {"topology", "source"}, "?")));
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
  for (const auto& w : projection["workloads"]) {
    add_rows(w, t.table);
    chart.svgs.push_back(efficiency_chart(w));
    s.paragraphs.push_back(findings(w));
  }
  if (chart.svgs.empty()) chart.no_data = "the projection has no workloads";
  s.tables.push_back(std::move(t));
  if (const json* v = find_at(projection, {"validation"}); v && v->is_object())
    add_validation(*v, s);
  s.charts.push_back(std::move(chart));
  return s;
}

}  // namespace ddpb::reports
