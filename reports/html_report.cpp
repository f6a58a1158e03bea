#include "reports/html_report.h"

#include <cctype>
#include <filesystem>

#include "reports/json_io.h"

#include "reports/report_util.h"
#include "reports/suite_view.h"
#include "reports/svg_chart.h"

namespace ddpb::reports {
namespace {

using svg::escape_xml;

// Inline so the file is self-contained; no url(), no web fonts.
constexpr const char* kCss = R"css(
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #ccc; }
h3 { font-size: 16px; margin-bottom: 4px; }
.meta, .caption, footer { color: #555; font-size: 13px; }
.banner { padding: 12px 16px; border-radius: 4px; margin: 16px 0; }
.banner.ok { background: #e6f4e6; border: 1px solid #59a14f; }
.banner.loud { background: #c62828; color: #fff; font-size: 18px; border: 3px solid #7f0000; }
.banner ul { margin: 6px 0 0 0; font-size: 14px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fde0e0; }
table.kv td:last-child { word-break: break-all; max-width: 900px; }
.nodata { color: #666; font-style: italic; }
.chart svg { display: block; margin: 8px 0; max-width: 100%; height: auto; }
.findings { margin: 16px 0 0 0; padding-left: 12px; border-left: 3px solid #ccc; }
.findings h3 { margin-top: 0; }
)css";

// A cell that is a number (or "-" for missing) is right-aligned.
bool numeric(const std::string& cell) {
  if (cell == "-") return true;
  return !cell.empty() &&
         (std::isdigit(static_cast<unsigned char>(cell[0])) ||
          (cell.size() > 1 && cell[0] == '-' && std::isdigit(static_cast<unsigned char>(cell[1]))));
}

// `kv`: a key/value table, left-aligned throughout (versions like 0.3.21 are not numbers).
std::string html_table(const TextTable& t, const std::string& id, bool kv = false) {
  std::string out = "<table id=\"" + id + "\"" + (kv ? " class=\"kv\"" : "") + "><thead><tr>";
  for (const auto& h : t.header) out += "<th>" + escape_xml(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    out += (i < t.bad.size() && t.bad[i]) ? "<tr class=\"bad\">" : "<tr>";
    for (const auto& cell : t.rows[i])
      out += (!kv && numeric(cell) ? "<td class=\"num\">" : "<td>") + escape_xml(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

std::string html_banner(const Banner& b) {
  std::string out = std::string("<div id=\"banner\" class=\"banner ") + (b.loud ? "loud" : "ok") +
                    "\"><strong>" + escape_xml(b.headline) + "</strong>";
  if (!b.details.empty()) {
    out += "<ul>";
    for (const auto& d : b.details) out += "<li>" + escape_xml(d) + "</li>";
    out += "</ul>";
  }
  return out + "</div>\n";
}

std::string html_chart(const ChartView& c) {
  std::string out =
      "<section class=\"chart\" id=\"" + c.id + "\"><h3>" + escape_xml(c.heading) + "</h3>";
  if (!c.caption.empty()) out += "<p class=\"caption\">" + escape_xml(c.caption) + "</p>";
  if (c.svgs.empty()) {
    out += "<p class=\"nodata\">no data: " + escape_xml(c.no_data) + "</p>";
  } else {
    for (const auto& s : c.svgs) out += s.text + "\n";
  }
  return out + "</section>\n";
}

std::string html_section(const ReportSection& s) {
  std::string out = "<section id=\"" + s.id + "\"><h2>" + escape_xml(s.heading) + "</h2>\n";
  if (!s.notes.empty()) {
    out += "<ul class=\"notes\">";
    for (const auto& n : s.notes) out += "<li>" + escape_xml(n) + "</li>";
    out += "</ul>\n";
  }
  for (const auto& t : s.tables) {
    if (!t.caption.empty()) out += "<p class=\"caption\">" + escape_xml(t.caption) + "</p>";
    out += html_table(t.table, t.id);
  }
  for (const auto& c : s.charts) out += html_chart(c);
  for (const auto& p : s.paragraphs) out += "<p>" + escape_xml(p) + "</p>\n";
  for (const auto& g : s.groups) {
    out += "<div class=\"findings\"><h3>" + escape_xml(g.heading) + "</h3>\n";
    for (const auto& p : g.paragraphs) out += "<p>" + escape_xml(p) + "</p>\n";
    out += "</div>\n";
  }
  return out + "</section>\n";
}

std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\" />"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />"
         "<title>" +
         escape_xml(title) + "</title><style>" + kCss + "</style></head>\n<body>\n<h1>" +
         escape_xml(title) + "</h1>\n";
}

// Writes Markdown (with its SVG files beside it) when `out` ends in .md, else HTML.
template <typename Markdown, typename Html>
void write_report(const std::string& out, Markdown markdown, Html html) {
  const std::filesystem::path path(out);
  if (path.extension() == ".md") {
    const MarkdownReport report = markdown(path.stem().string() + "-");
    for (const auto& [name, svg] : report.svgs) {
      write_text_atomic((path.parent_path() / name).string(), svg);
    }
    write_text_atomic(out, report.markdown);
  } else {
    write_text_atomic(out, html());
  }
}

}  // namespace

std::string render_sections_html(const std::string& title,
                                 const std::vector<ReportSection>& sections) {
  std::string out = page_head(title);
  for (const auto& s : sections) out += html_section(s);
  out += "<footer>Written by ddpbench.</footer>\n";
  return out + "</body></html>\n";
}

void write_sections_report(const std::string& title, const std::vector<ReportSection>& sections,
                           const std::string& out) {
  write_report(
      out,
      [&](const std::string& prefix) { return render_sections_markdown(title, sections, prefix); },
      [&] { return render_sections_html(title, sections); });
}

std::string render_html(const nlohmann::json& suite) {
  const SuiteView v = build_suite_view(suite);
  std::string out = page_head(v.title);
  std::string meta;
  for (const std::string& m : v.meta) meta += (meta.empty() ? "" : " · ") + m;
  out += "<p class=\"meta\">" + escape_xml(meta) + "</p>\n";
  out += html_banner(v.banner);
  for (const auto& s : v.sections) out += html_section(s);
  out += "<h2>Summary</h2>\n" + html_table(v.summary, "summary");
  out += "<h2>Charts</h2>\n";
  for (const auto& c : v.charts) out += html_chart(c);
  out += "<h2>Failed runs</h2>\n<div id=\"failed-runs\">";
  out += v.failed.rows.empty() ? "<p>None.</p>\n" : html_table(v.failed, "failed-table");
  out += "</div>\n<h2>Suite configuration</h2>\n" + html_table(v.config, "config", /*kv=*/true);
  out += "<h2>Context</h2>\n" + html_table(v.context, "context", /*kv=*/true);
  out += "<footer>Written by ddpbench from suite.json (docs/suite-format.md).</footer>\n";
  return out + "</body></html>\n";
}

void write_suite_report(const nlohmann::json& suite, const std::string& out) {
  write_report(
      out, [&](const std::string& prefix) { return render_markdown(suite, prefix); },
      [&] { return render_html(suite); });
}

}  // namespace ddpb::reports
