// What a suite report shows, computed once from suite.json and laid out twice (html_report.cpp,
// markdown_report.cpp), so the HTML and the Markdown never disagree. Every cell is plain text;
// the layouts escape it for their format.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/suite_record.h"
#include "reports/svg_chart.h"

namespace ddpb::reports {

struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as header
  std::vector<bool> bad;                       // per row: highlight (failed run, wrong result)
};

// The completeness banner. `loud` when the suite is incomplete, a run failed or is missing, a
// correctness check failed, or the record does not match its schema: a benchmark that
// computes the wrong thing must say so at the top, not in a table cell.
struct Banner {
  bool loud = false;
  std::string headline;
  std::vector<std::string> details;
};

// One chart slot with a stable id ("chart-throughput"). Either `svgs` (one per workload or per
// compared pair) or `no_data` (why there is nothing to draw) is set.
struct ChartView {
  std::string id;    // HTML element id
  std::string name;  // Markdown SVG file stem ("throughput")
  std::string heading;
  std::string caption;  // how to read it
  std::vector<svg::Svg> svgs;
  std::string no_data;
};

// A prose section of the report (the verdict, the projection): bullet notes, then tables (each
// with its HTML id and a caption), charts, paragraphs, and paragraphs under headings of their
// own, in that order.
struct SectionTable {
  std::string id;
  std::string caption;
  TextTable table;
};
// Paragraphs under one heading: the verdict's findings about one workload.
struct ParagraphGroup {
  std::string heading;
  std::vector<std::string> paragraphs;
};
struct ReportSection {
  std::string id;
  std::string heading;
  std::vector<std::string> notes;
  std::vector<SectionTable> tables;
  std::vector<ChartView> charts;
  std::vector<std::string> paragraphs;
  std::vector<ParagraphGroup> groups;
};

struct SuiteView {
  std::string title;
  std::vector<std::string> meta;  // date, host, version, commit, device: the line under the title
  Banner banner;
  std::vector<ReportSection> sections;  // the verdict, the projection, the comm hooks
  TextTable summary;
  std::vector<ChartView> charts;
  TextTable failed;  // failed, pending and interrupted runs and failed PyTorch runs
  TextTable config;  // the resolved suite matrix and the GEMM peak, flattened
  TextTable context;
};

// Reads `suite` once into a SuiteRecord, which every part of the view reads; the JSON itself
// goes to the schema check (the banner says when the file does not match) and to the
// configuration and context tables, which show every key as the file holds it.
SuiteView build_suite_view(const nlohmann::json& suite);

// The table of every run (the report's "Runs" section); `ddpbench suite` prints some of its
// columns at the end (terminal_summary), so the terminal and the report never disagree.
TextTable summary_table(const SuiteRecord& suite);

// `columns` of `table` (by header name, in that order) as aligned plain text, a line per row:
// the suite's last screen.
std::string terminal_summary(const TextTable& table, const std::vector<std::string>& columns);

// Nested objects as dotted keys ("versions.gloo"), arrays of scalars joined with ", ", other
// arrays as compact JSON; `prefix` goes in front of every key.
void flatten_into(const nlohmann::json& value, const std::string& prefix, TextTable& table);

}  // namespace ddpb::reports
