// render_markdown (declared in reports/html_report.h): the HTML report's layout in GitHub
// Markdown, charts as separate SVG files.
#include <algorithm>
#include <string_view>

#include "reports/html_report.h"
#include "reports/report_util.h"
#include "reports/suite_view.h"
#include "reports/svg_chart.h"

namespace ddpb::reports {
namespace {

// Markdown text: a backslash before every character Markdown gives a meaning inside a line
// ('<' and '&' would let record text become HTML, '|' would end a table cell, '*', '_', '`',
// '[' and '~' would format), so the text reads as written both rendered and raw; line
// breaks become spaces, since they would end the row.
std::string md_cell(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  s = printable(s);  // no raw control characters in report.md (issue 25, S2)
  std::string out;
  for (char c : s) {
    if (std::string_view("\\`*_[]<>|~&").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// One table row: "| a | b |".
std::string md_row(const std::vector<std::string>& cells) {
  std::string out = "|";
  for (const auto& c : cells) {
    out += ' ';
    out += md_cell(c);
    out += " |";
  }
  return out + "\n";
}

// The first three columns (names, status) left-aligned, the numbers right-aligned.
std::string md_table(const TextTable& t) {
  std::string out = md_row(t.header) + "|";
  for (size_t i = 0; i < t.header.size(); ++i) out += i < 3 ? " --- |" : " ---: |";
  out += "\n";
  for (const auto& row : t.rows) out += md_row(row);
  return out + "\n";
}

// A chart's Markdown: its heading and caption, and a link to its SVG file (added to `r.svgs`).
std::string md_chart(const ChartView& c, const std::string& svg_prefix, MarkdownReport& r) {
  std::string md = "### " + md_cell(c.heading) + "\n\n";
  if (!c.caption.empty()) md += md_cell(c.caption) + "\n\n";
  if (c.svgs.empty()) return md + "_no data: " + md_cell(c.no_data) + "_\n\n";
  const std::string file = svg_prefix + c.name + ".svg";
  r.svgs.push_back({file, svg::stack_vertical(c.svgs).text});
  return md + "![" + c.name + "](" + file + ")\n\n";
}

std::string md_section(const ReportSection& s, const std::string& svg_prefix, MarkdownReport& r) {
  std::string md = "## " + md_cell(s.heading) + "\n\n";
  for (const auto& n : s.notes) md += "- " + md_cell(n) + "\n";
  if (!s.notes.empty()) md += "\n";
  for (const auto& t : s.tables) {
    if (!t.caption.empty()) md += md_cell(t.caption) + "\n\n";
    md += md_table(t.table);
  }
  for (const auto& c : s.charts) md += md_chart(c, svg_prefix, r);
  for (const auto& p : s.paragraphs) md += md_cell(p) + "\n\n";
  for (const auto& g : s.groups) {
    md += "### " + md_cell(g.heading) + "\n\n";
    for (const auto& p : g.paragraphs) md += md_cell(p) + "\n\n";
  }
  return md;
}

}  // namespace

MarkdownReport render_markdown(const nlohmann::json& suite, const std::string& svg_prefix) {
  const SuiteView v = build_suite_view(suite);
  MarkdownReport r;
  std::string& md = r.markdown;
  md = "# " + md_cell(v.title) + "\n\n";
  if (v.banner.loud) {
    md += "> **" + md_cell(v.banner.headline) + "**\n";
  } else {
    md += "> " + md_cell(v.banner.headline) + "\n";
  }
  for (const auto& d : v.banner.details) md += ">\n> - " + md_cell(d) + "\n";
  md += "\n";
  for (const auto& s : v.sections) md += md_section(s, svg_prefix, r);
  md += "## Summary\n\n" + md_table(v.summary);
  md += "## Charts\n\n";
  for (const auto& c : v.charts) md += md_chart(c, svg_prefix, r);
  md += "## Failed runs\n\n" + (v.failed.rows.empty() ? "None.\n\n" : md_table(v.failed));
  md += "## Suite configuration\n\n" + md_table(v.config);
  md += "## Context\n\n" + md_table(v.context);
  return r;
}

MarkdownReport render_sections_markdown(const std::string& title,
                                        const std::vector<ReportSection>& sections,
                                        const std::string& svg_prefix) {
  MarkdownReport r;
  r.markdown = "# " + md_cell(title) + "\n\n";
  for (const auto& s : sections) r.markdown += md_section(s, svg_prefix, r);
  return r;
}

}  // namespace ddpb::reports
