// The suite report (docs/suite-format.md): one HTML page, or Markdown with the charts as SVG
// files. Both are laid out from one SuiteView (reports/suite_view.h), so they show the same
// tables and charts.
//
// Contract: the input may be any JSON (a partial, failed or schema-violating suite renders; a
// chart without data says "no data: <why>"); nothing here throws on record contents. The HTML
// is self-contained (inline CSS and SVG, no scripts, no external URLs: the only "http" in it is
// the SVG namespace) and XHTML-compatible (every element closed, void elements as <br />), and
// every string from the record is escaped. Output is deterministic.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/suite_view.h"

namespace ddpb::reports {

// One HTML5 page: title, completeness banner, summary table, the charts (elements with ids
// chart-throughput, chart-scaling, chart-phases, chart-buckets, chart-bucket-sweep,
// chart-overlap, chart-blame), failed runs, suite configuration and context.
std::string render_html(const nlohmann::json& suite);

struct MarkdownReport {
  std::string markdown;
  // (file name, SVG text) per chart with data. The name is `svg_prefix` + "<chart>.svg", exactly
  // as the Markdown links it, so the caller writes each file at that path relative to the
  // Markdown file.
  std::vector<std::pair<std::string, std::string>> svgs;
};
// The same report as Markdown (GitHub-flavoured tables); charts are linked as
// ![throughput](<svg_prefix>throughput.svg).
MarkdownReport render_markdown(const nlohmann::json& suite, const std::string& svg_prefix);

// Writes the report to `out`: Markdown (with its SVG files beside it) when `out` ends in .md,
// HTML otherwise. Each file is written atomically, so a reader never sees half a report.
void write_suite_report(const nlohmann::json& suite, const std::string& out);

// A page of report sections alone (`ddpbench project -o`), laid out as in the suite report,
// written like write_suite_report (HTML, or Markdown with SVG files beside it).
std::string render_sections_html(const std::string& title,
                                 const std::vector<ReportSection>& sections);
MarkdownReport render_sections_markdown(const std::string& title,
                                        const std::vector<ReportSection>& sections,
                                        const std::string& svg_prefix);
void write_sections_report(const std::string& title, const std::vector<ReportSection>& sections,
                           const std::string& out);

}  // namespace ddpb::reports
