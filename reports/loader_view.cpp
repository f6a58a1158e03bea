#include "reports/loader_view.h"

#include <fmt/core.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "reports/report_util.h"

namespace ddpb::reports {
namespace {

bool pinned(const LoaderSummary& l) {
  return l.pin_memory == "on";
}

void add_row(const SuiteRun& run, TextTable& t) {
  const RunMetrics& m = *run.metrics;
  const LoaderSummary& l = *m.loader;
  t.rows.push_back({printable(run.id), printable(l.data.value_or("synthetic")),
                    std::to_string(l.workers), printable(l.pin_memory),
                    format_number(l.data_wait_ms_median), format_percent(l.data_wait_share),
                    format_number(l.samples_per_s), format_number(m.samples_per_s),
                    std::to_string(l.skipped_samples)});
  t.bad.push_back(l.samples_per_s > 0 && l.samples_per_s < m.samples_per_s);
}

// Samples/s against the worker count: the loader's capacity and the training's demand, one
// pair of lines per pin-memory setting.
svg::Svg loader_chart(const std::string& workload, const std::vector<const SuiteRun*>& runs) {
  svg::LineChart chart;
  chart.title = workload + ": what the loader gives and training takes";
  chart.x_label = "loader workers";
  chart.y_label = "samples/s";
  std::map<bool, std::pair<svg::Series, svg::Series>> by_pin;
  for (const SuiteRun* r : runs) {
    const LoaderSummary& l = *r->metrics->loader;
    auto& [loader, training] = by_pin[pinned(l)];
    const std::string pin = pinned(l) ? " (pinned)" : "";
    loader.name = "loader can give" + pin;
    training.name = "training takes" + pin;
    training.dashed = true;
    loader.points.emplace_back(static_cast<double>(l.workers), l.samples_per_s);
    training.points.emplace_back(static_cast<double>(l.workers), r->metrics->samples_per_s);
  }
  for (auto& [pin, lines] : by_pin) {
    chart.series.push_back(std::move(lines.first));
    chart.series.push_back(std::move(lines.second));
  }
  return svg::render_line_chart(chart);
}

}  // namespace

std::string dataset_name(const LoaderSummary& l) {
  if (!l.data) return "synthetic data";
  std::string text = *l.data;
  if (!l.files || l.files->empty()) return text;
  int64_t tokens = 0, images = 0;
  for (const DataFileRecord& f : *l.files)
    tokens += f.tokens.value_or(0), images += f.images.value_or(0);
  const size_t n = l.files->size();
  text += l.source == "imagefolder"
              ? fmt::format(" ({} images in {} class folder{}", images, n, n == 1 ? "" : "s")
              : fmt::format(" ({} tokens in {} shard{}", tokens, n, n == 1 ? "" : "s");
  if (l.split) text += ", split " + *l.split;
  return text + ")";
}

std::string run_dataset(const SuiteRun& run) {
  if (run.metrics && run.metrics->loader) return dataset_name(*run.metrics->loader);
  const std::string& data = run.run_config().data;
  return data.empty() ? "synthetic data" : data;
}

ReportSection build_loader_section(const SuiteRecord& suite) {
  ReportSection s;
  s.id = "loader";
  s.heading = "Input pipeline";
  SectionTable t{"loader-table",
                 "Training on files at each loader worker count: the median wait for the next "
                 "batch and its share of the step, what the loader can give (its workers' "
                 "samples per second of decode time) and what training takes; a row in red is "
                 "input-bound (the loader gives less than training takes).",
                 {}};
  t.table.header = {"run",         "data",         "workers",        "pin memory", "data wait ms",
                    "of the step", "loader gives", "training takes", "skipped"};
  ChartView chart{"chart-loader",
                  "loader",
                  "Loader capacity against training demand",
                  "Samples per second the loader can give (solid) and training takes (dashed), "
                  "against the number of loader workers.",
                  {},
                  ""};
  std::map<std::string, std::vector<const SuiteRun*>> by_workload;
  for (const SuiteRun& r : suite.runs) {
    if (r.group != RunGroup::Loader || !r.measured() || !r.metrics->loader) continue;
    add_row(r, t.table);
    by_workload[r.workload].push_back(&r);
  }
  if (t.table.rows.empty()) {
    s.notes.push_back(
        "No loader runs (group \"loader\": a suite file's loader_workers) in this "
        "record.");
    return s;
  }
  for (const auto& [w, runs] : by_workload) {
    std::set<std::string> datasets;
    for (const SuiteRun* r : runs) datasets.insert(dataset_name(*r->metrics->loader));
    for (const std::string& d : datasets)
      s.notes.push_back(fmt::format("{} measured on {}.", w, printable(d)));
    chart.svgs.push_back(loader_chart(w, runs));
  }
  s.notes.push_back(
      "A relative path is in the results folder: data/imagefolder holds the JPEGs the suite "
      "makes when neither \"loader_data\" nor \"data\" names an image folder.");
  s.tables.push_back(std::move(t));
  s.charts.push_back(std::move(chart));
  return s;
}

}  // namespace ddpb::reports
