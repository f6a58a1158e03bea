// The suite schema, suite files on disk, the SVG primitives and the HTML/Markdown reports, on
// the synthetic suite of suite_fixture.h; and, when Chromium is installed, a real render of
// the HTML to a PNG that must not be blank.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "reports/html_report.h"
#include "reports/json_io.h"
#include "reports/phase_style.h"
#include "reports/schema_validator.h"
#include "reports/suite_view.h"
#include "reports/svg_chart.h"
#include "suite_fixture.h"
#include "xml_check.h"

namespace {

using ddpb::reports::ReportError;
using ddpb::testing::make_suite;
using ddpb::testing::run_by_id;
using ddpb::testing::ScratchDir;
using ddpb::testing::xml_problem;
using nlohmann::json;
using Strings = std::vector<std::string>;

constexpr const char* kDdpW2 = "mlp-small/ddp/w2";
const Strings kChartIds = {"chart-throughput",    "chart-scaling",    "chart-phases",
                           "chart-critical-path", "chart-projection", "chart-buckets",
                           "chart-bucket-sweep",  "chart-overlap",    "chart-blame"};

Strings suite_errors(const json& doc) {
  Strings out;
  for (const auto& e : ddpb::reports::validate_suite_record(doc)) out.push_back(e.str());
  return out;
}

// The <section> of one chart, from its id to its closing tag.
std::string section(const std::string& html, const std::string& id) {
  const size_t start = html.find("id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</section>", start) - start);
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

// --- schema -----------------------------------------------------------------------------------

TEST(SuiteSchema, FixtureWithEveryGroupValidates) {
  EXPECT_EQ(suite_errors(make_suite()), Strings{});
  // A suite still running: complete false, a pending run without metrics.
  json running = make_suite();
  running["complete"] = false;
  json& r = run_by_id(running, "mlp-small/dp/w4");
  r["status"] = "pending";
  r.erase("metrics");
  EXPECT_EQ(suite_errors(running), Strings{});
}

TEST(SuiteSchema, RejectsUnknownTopLevelKeyBadStatusAndMissingRunFields) {
  json doc = make_suite();
  doc["surprise"] = 1;
  EXPECT_EQ(suite_errors(doc), Strings{"/surprise: unexpected key"});

  doc = make_suite();
  doc["runs"][0]["status"] = "done";
  EXPECT_EQ(
      suite_errors(doc),
      Strings{R"(/runs/0/status: "done" is not one of ["ok","failed","pending","interrupted"])"});

  doc = make_suite();
  doc["runs"][1].erase("group");
  doc["runs"][2]["world_size"] = 0;
  doc["runs"][2]["metrics"]["step_time_ms"]["median"] = "fast";
  // Document order, which is nlohmann's key order (sorted).
  EXPECT_EQ(suite_errors(doc), (Strings{"/runs/1: missing required key 'group'",
                                        "/runs/2/metrics/step_time_ms/median: expected number, "
                                        "got string",
                                        "/runs/2/world_size: 0 is below the minimum 1"}));

  doc = make_suite();
  doc["kind"] = "run";
  EXPECT_EQ(suite_errors(doc), Strings{R"(/kind: expected "suite", got "run")"});
}

// Note [Designs in records]: a run names a row of the suite's designs, which no schema can
// say; a run of a design the record does not describe would fall out of the verdict unseen.
TEST(SuiteSchema, EveryRunNamesARowOfTheDesigns) {
  json doc = make_suite();
  doc["runs"][1]["mode"] = "fsdp";
  EXPECT_EQ(suite_errors(doc), Strings{R"(/runs/1/mode: "fsdp" names no row of "designs")"});
  doc = make_suite();
  doc["designs"].erase(2);  // ddp's row
  EXPECT_FALSE(suite_errors(doc).empty());
}

TEST(SuiteSchema, RunEntriesStayOpenForOptionalFields) {
  // Fields the doc lists as optional, and ones a later writer may add, do not break old readers.
  json doc = make_suite();
  doc["runs"][0]["log"] = "logs/x.log";
  doc["runs"][0]["metrics"]["new_counter"] = 3;
  EXPECT_EQ(suite_errors(doc), Strings{});
}

// --- suite files ------------------------------------------------------------------------------

TEST(SuiteFile, TruncatedMalformedAndInvalidFilesNameTheFileAndTheProblem) {
  ScratchDir dir("suite_file");
  const std::string text = make_suite().dump(2);
  struct Case {
    std::string name, content;
    Strings needles;
  };
  for (const Case& c :
       {Case{"truncated.json", text.substr(0, text.size() / 2), {"not valid JSON", "truncated"}},
        Case{"malformed.json", "{\"kind\": \"suite\",, }", {"not valid JSON"}},
        Case{"empty.json", "", {"not valid JSON"}},
        Case{"array.json", "[1, 2]", {"neither a run nor a suite record"}},
        // Note [JSON depth]: 20,000 levels once passed `validate` and then crashed the renderers.
        Case{"deep.json",
             std::string(20000, '[') + std::string(20000, ']'),
             {"nests arrays and objects more than 100 levels deep"}},
        Case{"deep_in_a_record.json",
             R"({"kind": "suite", "schema_version": 2, "x": )" + std::string(150, '{') +
                 std::string(150, '}') + "}",
             {"more than 100 levels deep"}},
        Case{"invalid.json",
             R"({"kind": "suite", "schema_version": 2})",
             {"suite-record schema", "missing required key 'designs'"}},
        // docs/records.md "Versions": a record of another version is refused in one line.
        Case{"version1.json",
             R"({"kind": "suite", "schema_version": 1, "runs": []})",
             {"schema version 1", "reads version 2 only"}}}) {
    const std::string path = dir / c.name;
    std::ofstream(path) << c.content;
    try {
      ddpb::reports::read_record_file(path);
      ADD_FAILURE() << c.name << " was accepted";
    } catch (const ReportError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      for (const auto& n : c.needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
    }
  }
  // A syntax error in the middle is not called truncated.
  std::ofstream(dir / "middle.json") << "{\"a\": ]  \n  \n}";
  try {
    ddpb::reports::read_json(dir / "middle.json");
    ADD_FAILURE() << "accepted";
  } catch (const ReportError& e) {
    EXPECT_EQ(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "suite.json") << text;
  EXPECT_EQ(ddpb::reports::read_record_file(dir / "suite.json"), make_suite());
}

// --- SVG primitives ---------------------------------------------------------------------------

TEST(Svg, EscapesEveryTextAndStaysWellFormed) {
  namespace svg = ddpb::reports::svg;
  EXPECT_EQ(svg::escape_xml("a<b>&\"c'\x01"), "a&lt;b&gt;&amp;&quot;c&#39;?");
  const std::string evil = "<script>alert('x')</script> & co";
  svg::LineChart line{
      evil, evil, evil, {{evil, {{1, 2}, {2, 4}, {4, 7}}}, {"ideal", {{1, 2}, {4, 8}}, true}}};
  svg::BarChart bars{evil, evil, {evil, "b"}, {{evil, {{evil, {{0, 1.0}, {1, 2.0}}}}}}};
  svg::Timeline timeline{evil, evil, {evil}, evil, {{evil, {{0, 1, 0}}, {0.5}}}};
  for (const svg::Svg& s : {svg::render_line_chart(line), svg::render_bar_chart(bars),
                            svg::render_timeline(timeline)}) {
    EXPECT_EQ(xml_problem(s.text), "") << s.text;
    EXPECT_EQ(s.text.find("<script"), std::string::npos);
    EXPECT_NE(s.text.find("&lt;script&gt;"), std::string::npos);
    EXPECT_EQ(s.text.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
    EXPECT_GT(s.width, 0);
    EXPECT_GT(s.height, 0);
  }
  EXPECT_EQ(svg::render_line_chart(line).text, svg::render_line_chart(line).text);
  const svg::Svg both =
      svg::stack_vertical({svg::render_line_chart(line), svg::render_bar_chart(bars)});
  EXPECT_EQ(xml_problem(both.text), "");
  EXPECT_EQ(count(both.text, "<svg"), 3u);
}

TEST(Svg, NothingDrawableSaysNoDataInsteadOfFailing) {
  namespace svg = ddpb::reports::svg;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const svg::Svg& s : {svg::render_line_chart({"t", "x", "y", {{"s", {{nan, 1}, {1, nan}}}}}),
                            svg::render_line_chart({"t", "x", "y", {}}),
                            svg::render_bar_chart({"t", "y", {"a"}, {{"g", {{"b", {{0, -1.0}}}}}}}),
                            svg::render_timeline({"t", "x", {"k"}, "", {}})}) {
    EXPECT_NE(s.text.find("no data"), std::string::npos) << s.text;
    EXPECT_EQ(xml_problem(s.text), "");
  }
  // A log axis drops non-positive x instead of taking log(0).
  svg::LineChart log{"t", "x", "y", {{"s", {{0, 1}, {0.25, 2}, {25, 3}}}}};
  log.x_log = true;
  EXPECT_EQ(svg::render_line_chart(log).text.find("nan"), std::string::npos);
  EXPECT_EQ(svg::format_tick(12000), "12000");
  EXPECT_EQ(svg::format_tick(2.5e9), "2.5G");
  EXPECT_EQ(svg::format_tick(0.25), "0.25");
}

// The <text> elements of an SVG at baseline `y` ("" = any): (x, anchor, text), text unescaped
// of nothing (the tests use plain labels).
struct SvgText {
  double x = 0, y = 0;
  std::string anchor, text;
};
std::vector<SvgText> svg_texts(const std::string& svg) {
  std::vector<SvgText> out;
  const std::regex re(R"re(<text x="([-0-9.]+)" y="([-0-9.]+)"([^>]*)>([^<]*)</text>)re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it) {
    const std::string attrs = (*it)[3];
    const size_t a = attrs.find("text-anchor=\"");
    out.push_back(
        {std::stod((*it)[1]), std::stod((*it)[2]),
         a == std::string::npos ? "start" : attrs.substr(a + 13, attrs.find('"', a + 13) - a - 13),
         (*it)[4]});
  }
  return out;
}

// The horizontal extent [left, right] of a text at `font_px`, from svg::text_width.
std::pair<double, double> extent(const SvgText& t, double font_px = 12, bool bold = false) {
  const double w = ddpb::reports::svg::text_width(t.text, font_px, bold);
  if (t.anchor == "middle") return {t.x - w / 2, t.x + w / 2};
  if (t.anchor == "end") return {t.x - w, t.x};
  return {t.x, t.x + w};
}

// A series that names its colour is drawn and listed in it (the projection chart draws a
// design's measured and projected lines in one colour); the others keep the palette's.
TEST(Svg, ASeriesThatNamesItsColourKeepsIt) {
  namespace svg = ddpb::reports::svg;
  svg::LineChart c{"t", "x", "y", {}};
  c.series.push_back({"DDP projected", {{1, 1}, {2, 0.9}}, true, "#123456"});
  c.series.push_back({"DDP measured", {{1, 1}, {2, 0.8}}, false, "#123456"});
  c.series.push_back({"other", {{1, 0.5}, {2, 0.4}}, false});
  const std::string text = svg::render_line_chart(c).text;
  EXPECT_EQ(count(text, "stroke=\"#123456\""), 3u) << "two polylines and the dashed legend entry";
  EXPECT_GE(count(text, "fill=\"#123456\""), 3u) << "markers and the solid legend entry";
  EXPECT_GT(count(text, svg::palette_color(2)), 0u) << "the third series keeps its index's colour";
  EXPECT_EQ(count(text, svg::palette_color(0)), 0u);
}

TEST(Svg, LongTitlesWrapInsideTheChartInsteadOfBeingClipped) {
  namespace svg = ddpb::reports::svg;
  const std::string title =
      "mlp-small w4: overlap on vs off (mlp-small/ddp/w4 and mlp-small/ddp/w4/no-overlap)";
  const auto lines = svg::title_lines(title, 640);
  ASSERT_EQ(lines.size(), 2u);
  std::string joined;
  for (const auto& l : lines) {
    EXPECT_LE(svg::text_width(l, 14, /*bold=*/true), 640 - 16) << l;
    joined += (joined.empty() ? "" : " ") + l;
  }
  EXPECT_EQ(joined, title);
  EXPECT_EQ(svg::title_lines("short", 640), Strings{"short"});
  // A word wider than the chart is cut, not left to run past the edge.
  const auto cut = svg::title_lines(std::string(200, 'x'), 320);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_LE(svg::text_width(cut[0], 14, true), 320 - 16);
  // Rendered: both lines drawn, the plot pushed down below them.
  svg::BarChart bars{
      title, "ms", {"on", "off"}, {{"g", {{"on", {{0, 1.0}}}, {"off", {{1, 2.0}}}}}}};
  const svg::Svg s = svg::render_bar_chart(bars);
  EXPECT_NE(s.text.find(">" + lines[0] + "</text>"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find(">" + lines[1] + "</text>"), std::string::npos) << s.text;
  bars.title = "short";
  const svg::Svg one = svg::render_bar_chart(bars);
  EXPECT_EQ(count(one.text, "font-weight=\"bold\">short</text>"), 1u);
}

TEST(Svg, TickLabelsThatWouldOverlapAreLeftOut) {
  namespace svg = ddpb::reports::svg;
  // Bucket caps an autotune search measured close together on a log axis (issue 43: 0.97, 1,
  // 1.13 and 1.45 MB printed over each other).
  svg::LineChart chart{"sweep", "bucket cap (MB)", "ms", {{"s", {}}}};
  chart.x_log = true;
  for (double x : {0.97, 1.0, 1.13, 1.45, 2.18, 4.2, 12.1, 25.0})
    chart.series[0].points.push_back({x, x});
  const std::string text = svg::render_line_chart(chart).text;
  std::vector<SvgText> ticks;
  double axis_y = 0;
  for (const SvgText& t : svg_texts(text))
    if (t.anchor == "middle" && t.text != "bucket cap (MB)") axis_y = std::max(axis_y, t.y);
  for (const SvgText& t : svg_texts(text))
    if (t.anchor == "middle" && t.y == axis_y) ticks.push_back(t);
  ASSERT_GE(ticks.size(), 3u) << text;
  EXPECT_LT(ticks.size(), 8u) << "nothing was left out: " << text;
  for (size_t i = 1; i < ticks.size(); ++i)
    EXPECT_LT(extent(ticks[i - 1]).second, extent(ticks[i]).first)
        << ticks[i - 1].text << " overlaps " << ticks[i].text;
  EXPECT_EQ(ticks.front().text, "0.97");
  // Every tick mark stays: 8 short vertical lines under the axis.
  EXPECT_EQ(count(text, "stroke=\"#333333\" />"), 8u + 2u /*the two axes*/) << text;
  // The control: ticks far apart are all labelled.
  chart.series[0].points = {{1, 1}, {4, 2}, {16, 3}};
  size_t labelled = 0;
  for (const SvgText& t : svg_texts(svg::render_line_chart(chart).text))
    labelled += t.y == axis_y && (t.text == "1" || t.text == "4" || t.text == "16");
  EXPECT_EQ(labelled, 3u);
}

TEST(Svg, OverlaidSeriesAreNestedSoNoneHidesAnother) {
  namespace svg = ddpb::reports::svg;
  const std::vector<std::pair<double, double>> loss = {{1, 2.3}, {2, 2.2}, {3, 2.1}};
  svg::LineChart chart{"loss", "step", "loss", {{"fp32", loss}, {"fp16", loss}, {"bf16", loss}}};
  chart.overlaid = true;
  const std::string text = svg::render_line_chart(chart).text;
  const std::regex width(R"re(<polyline [^>]*stroke-width="([0-9.]+)")re");
  std::vector<double> widths;
  for (std::sregex_iterator it(text.begin(), text.end(), width), end; it != end; ++it)
    widths.push_back(std::stod((*it)[1]));
  ASSERT_EQ(widths.size(), 3u) << text;
  // Drawn in order, each narrower than every line under it: each stays visible around the next.
  EXPECT_GT(widths[0], widths[1]);
  EXPECT_GT(widths[1], widths[2]);
  EXPECT_EQ(widths[2], 2.0);
  // Without the flag, lines that coincide are found and nested the same way (two workloads'
  // identical efficiencies in the scaling chart).
  const std::string overlaid = svg::render_line_chart(chart).text;
  chart.overlaid = false;
  EXPECT_EQ(svg::render_line_chart(chart).text, overlaid);
  // The control: lines apart from each other are all drawn alike, 2 px.
  chart.series[1].points = {{1, 1.3}, {2, 1.2}, {3, 1.1}};
  chart.series[2].points = {{1, 0.3}, {2, 0.2}, {3, 0.1}};
  EXPECT_EQ(count(svg::render_line_chart(chart).text, "stroke-width=\"2\" points="), 3u);
}

TEST(Svg, BarChartsMakeRoomForTheirLabelsAndLegendsStayInside) {
  namespace svg = ddpb::reports::svg;
  svg::BarChart chart{"wait caused per step", "ms", {"wait caused"}, {}};
  for (const char* id : {"resnet-tiny/ddp/w2", "resnet-tiny/ddp/w4", "gpt-tiny/ddp/w2",
                         "gpt-tiny/ddp/w4", "embed-tiny/ddp/w2", "embed-tiny/ddp/w4"})
    chart.groups.push_back({id, {{"r0", {{0, 1.5}}}, {"r1", {{0, 2.25}}}}});
  const svg::Svg s = svg::render_bar_chart(chart);
  EXPECT_GT(s.width, 640) << "six long run ids do not fit 640 px";
  std::vector<SvgText> groups;
  for (const SvgText& t : svg_texts(s.text))
    if (t.text.find("/ddp/") != std::string::npos) groups.push_back(t);
  ASSERT_EQ(groups.size(), 6u);
  for (size_t i = 1; i < groups.size(); ++i)
    EXPECT_LT(extent(groups[i - 1], 12, true).second, extent(groups[i], 12, true).first)
        << groups[i].text;
  // A legend entry longer than the legend is shortened to fit the chart, the full name kept as
  // a tooltip.
  const std::string name(80, 'n');
  svg::LineChart line{"t", "x", "y", {{name, {{1, 1}, {2, 2}}}}};
  const svg::Svg l = svg::render_line_chart(line);
  for (const SvgText& t : svg_texts(l.text)) EXPECT_LE(extent(t).second, l.width) << t.text;
  EXPECT_NE(l.text.find("<title>" + name + "</title>"), std::string::npos);
}

// A Gantt chart of two lanes and a dozen phases: the legend runs in lines under the axis, inside
// the chart, instead of a column that makes the chart four times as tall as its lanes.
TEST(Svg, TimelineLegendsRunInLinesUnderTheAxis) {
  namespace svg = ddpb::reports::svg;
  svg::Timeline t{
      "critical path", "ms", {}, "", {{"rank 0", {{0, 1, 0}}, {}}, {"rank 1", {{1, 2, 1}}, {}}}};
  t.width = 900;
  const svg::Svg one = [&] {
    t.kinds = {"data"};
    return svg::render_timeline(t);
  }();
  t.kinds.clear();
  for (int i = 0; i < 12; ++i) t.kinds.push_back("phase number " + std::to_string(i));
  const svg::Svg many = svg::render_timeline(t);
  EXPECT_GT(many.height, one.height) << "the legend takes lines of its own";
  EXPECT_LT(many.height, one.height + 4 * 18) << "a dozen entries fit in a few lines";
  std::vector<SvgText> entries;
  for (const SvgText& e : svg_texts(many.text))
    if (e.text.rfind("phase number ", 0) == 0) entries.push_back(e);
  ASSERT_EQ(entries.size(), 12u);
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_LE(extent(entries[i]).second, many.width) << entries[i].text;
    EXPECT_GT(entries[i].y, 2 * 22 + 36) << "under the lanes: " << entries[i].text;
    if (i > 0 && entries[i].y == entries[i - 1].y)
      EXPECT_LT(extent(entries[i - 1]).second, entries[i].x - 16) << entries[i].text;
  }
}

// --- HTML -------------------------------------------------------------------------------------

TEST(HtmlReport, WellFormedSelfContainedWithEveryChart) {
  const std::string html = ddpb::reports::render_html(make_suite());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(xml_problem(html), "");
  for (const auto& id : kChartIds) {
    const std::string s = section(html, id);
    EXPECT_NE(s.find("<svg"), std::string::npos) << id << ": " << s.substr(0, 300);
    EXPECT_EQ(s.find("no data"), std::string::npos) << id;
  }
  // Nothing is fetched: the only URL is the SVG namespace, there are no scripts or url().
  std::string rest = html;
  for (const std::string ns = "http://www.w3.org/2000/svg";;) {
    const size_t p = rest.find(ns);
    if (p == std::string::npos) break;
    rest.erase(p, ns.size());
  }
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html, ddpb::reports::render_html(make_suite())) << "not deterministic";
}

TEST(HtmlReport, SummaryHasARowPerRunWithPyTorchColumns) {
  const json suite = make_suite();
  const std::string html = ddpb::reports::render_html(suite);
  const size_t start = html.find("<table id=\"summary\"");
  const std::string table = html.substr(start, html.find("</table>", start) - start);
  EXPECT_EQ(count(table, "<tr"), suite["runs"].size() + 1);
  EXPECT_NE(table.find("PyTorch samples/s"), std::string::npos);
  // mlp-small/ddp/w2 runs at 1.25x the PyTorch samples/s; its correctness passed.
  const size_t row = table.find("<td>mlp-small/ddp/w2</td>");
  ASSERT_NE(row, std::string::npos);
  const std::string line = table.substr(row, table.find("</tr>", row) - row);
  EXPECT_NE(line.find(">1.250<"), std::string::npos) << line;
  EXPECT_NE(line.find("3.0e-07 PASS"), std::string::npos) << line;
  // The failed run is highlighted and appears with its error below.
  EXPECT_NE(table.find("<tr class=\"bad\"><td>gpt-tiny/ddp/w4</td>"), std::string::npos);
  const std::string failed = html.substr(html.find("id=\"failed-runs\""));
  EXPECT_NE(failed.find("rank 1 exited with signal 9 (SIGKILL) during step 3 &amp; stopped"),
            std::string::npos);
  // A skipped PyTorch run is shown in its column, not as a failure.
  json skipped = suite;
  run_by_id(skipped, kDdpW2)["pytorch"] = {{"status", "skipped"},
                                           {"error", "torch.nn.DataParallel needs CUDA devices"}};
  const std::string html2 = ddpb::reports::render_html(skipped);
  EXPECT_EQ(html2.find("DataParallel needs CUDA"), std::string::npos);
  EXPECT_NE(html2.find("<td>skipped</td>"), std::string::npos);
  // Context flattened: nested versions as dotted keys.
  EXPECT_NE(html.find("<td>versions.gloo</td><td>0.0.1</td>"), std::string::npos);
}

// The suite's last screen shows the report's own cells: "n/a" overlap and scaling at world
// size 1 even when the record holds numbers there.
TEST(TerminalSummary, AgreesWithTheReportOnNotApplicableCells) {
  json suite = make_suite();
  ASSERT_TRUE(run_by_id(suite, "mlp-small/single/w1").contains("metrics"));
  run_by_id(suite, "mlp-small/single/w1")["metrics"]["overlap_ratio"] = 0.42;
  run_by_id(suite, "mlp-small/single/w1")["scaling"] = {{"weak_efficiency", 0.97}};
  const auto record = ddpb::reports::record_from_json<ddpb::reports::SuiteRecord>(suite);
  const auto table = ddpb::reports::summary_table(record);
  const std::string text =
      ddpb::reports::terminal_summary(table, {"run", "overlap", "weak eff", "no such column"});
  const auto line_of = [&](const std::string& id) {
    const size_t at = text.find(id + " ");
    return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
  };
  EXPECT_EQ(text.substr(0, text.find('\n')).find("run"), 0u) << text;
  EXPECT_EQ(count(text, "\n"), suite["runs"].size() + 1) << text;
  const std::string w1 = line_of("mlp-small/single/w1");
  ASSERT_FALSE(w1.empty()) << text;
  EXPECT_TRUE(std::regex_search(w1, std::regex(R"(\s+n/a\s+n/a$)"))) << w1;
  EXPECT_EQ(w1.find("42"), std::string::npos) << w1;
  EXPECT_EQ(w1.find("97"), std::string::npos) << w1;
  // The control: DDP at two ranks shows both, as the report does.
  const std::string w2 = line_of(kDdpW2);
  EXPECT_EQ(w2.find("n/a"), std::string::npos) << w2;
  EXPECT_NE(w2.find('%'), std::string::npos) << w2;
}

TEST(HtmlReport, BannerIsLoudForFailedIncompleteAndWrongResults) {
  json suite = make_suite();
  EXPECT_NE(ddpb::reports::render_html(suite).find("class=\"banner loud\""), std::string::npos)
      << "one run failed";

  suite["runs"].erase(std::remove_if(suite["runs"].begin(), suite["runs"].end(),
                                     [](const json& r) { return r["status"] != "ok"; }),
                      suite["runs"].end());
  std::string html = ddpb::reports::render_html(suite);
  EXPECT_NE(html.find("class=\"banner ok\""), std::string::npos);
  EXPECT_NE(html.find("all ok"), std::string::npos);

  json wrong = suite;
  run_by_id(wrong, "mlp-small/ddp/w4")["correctness"]["passed"] = false;
  run_by_id(wrong, "mlp-small/ddp/w4")["correctness"]["max_rel_diff"] = 0.02;
  html = ddpb::reports::render_html(wrong);
  EXPECT_NE(html.find("class=\"banner loud\""), std::string::npos);
  EXPECT_NE(html.find("WRONG RESULTS"), std::string::npos);
  EXPECT_NE(html.find("mlp-small/ddp/w4 differs from its reference"), std::string::npos);
  EXPECT_NE(html.find("2.0e-02 FAIL"), std::string::npos);

  // A check that could not run (unreadable parameters) is not a pass either.
  json unchecked = suite;
  run_by_id(unchecked, "mlp-small/dp/w2")["correctness"] = {
      {"reference", "mlp-small/single/w1/b64"},
      {"threshold", 1e-4},
      {"passed", false},
      {"error", "cannot read params/x.safetensors"}};
  html = ddpb::reports::render_html(unchecked);
  EXPECT_NE(html.find("class=\"banner loud\""), std::string::npos);
  EXPECT_NE(html.find("mlp-small/dp/w2 could not be checked against mlp-small/single/w1/b64: "
                      "cannot read params/x.safetensors"),
            std::string::npos);

  json partial = suite;
  partial["complete"] = false;
  html = ddpb::reports::render_html(partial);
  EXPECT_NE(html.find("class=\"banner loud\""), std::string::npos);
  EXPECT_NE(html.find("INCOMPLETE"), std::string::npos);
}

TEST(HtmlReport, EscapesRecordText) {
  json suite = make_suite();
  json& r = run_by_id(suite, "mlp-small/ddp/w2");
  r["id"] = "mlp-small/ddp/w2/<script>alert(\"x\")</script>";
  suite["context"]["host"] = "a&b<c>";
  suite["suite"]["name"] = "<b>name</b>";
  const std::string html = ddpb::reports::render_html(suite);
  EXPECT_EQ(xml_problem(html), "");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("a&amp;b&lt;c&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<b>name"), std::string::npos);
}

TEST(HtmlReport, ChartsPickTheDocumentedRuns) {
  const std::string html = ddpb::reports::render_html(make_suite());
  // Buckets: the largest-world-size DDP scaling run of the first workload.
  const std::string buckets = section(html, "chart-buckets");
  EXPECT_NE(buckets.find("mlp-small/ddp/w4: buckets of one measured step"), std::string::npos);
  EXPECT_EQ(count(buckets, "<rect x="), 4u * 3u + 3u /*legend*/) << "4 buckets x 3 spans";
  // Overlap: the no-overlap run against the default DDP run of the same workload and size.
  const std::string overlap = section(html, "chart-overlap");
  EXPECT_NE(overlap.find("(mlp-small/ddp/w4 and mlp-small/ddp/w4/no-overlap)"), std::string::npos);
  EXPECT_NE(overlap.find("overlap off"), std::string::npos);
  // Bucket sweep: 0.25 and 1 MB from the sweep plus 25 MB from the default run.
  const std::string sweep = section(html, "chart-bucket-sweep");
  EXPECT_EQ(count(sweep, "<title>median step time: ("), 3u);
  EXPECT_EQ(count(sweep, "<title>autotune search (warm-up): ("), 3u) << "the auto run's search";
  EXPECT_EQ(count(sweep, "<title>autotune choice: ("), 1u);
  // Phases: one chart per workload, bars for both dp and ddp at w2 and w4.
  const std::string phases = section(html, "chart-phases");
  EXPECT_EQ(count(phases, "<svg"), 2u);
  EXPECT_NE(phases.find("w4 ddp comm_exposed"), std::string::npos);
  EXPECT_NE(phases.find("w4 dp reduce"), std::string::npos);
}

// Per phase name, the fills of the rects whose tooltip names it (" forward: ") in `svg`.
std::map<std::string, std::set<std::string>> phase_fills(const std::string& svg) {
  std::map<std::string, std::set<std::string>> out;
  const std::regex re(R"re(<rect [^>]*fill="(#[0-9a-f]{6})"><title>([^<]*)</title>)re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it) {
    const std::string tip = (*it)[2];
    for (const std::string& phase : ddpb::reports::phase_names())
      if (tip.find(" " + phase + ": ") != std::string::npos) out[phase].insert((*it)[1]);
  }
  return out;
}

// The <svg> elements of a chart section, in order.
Strings svgs_in(const std::string& section_html) {
  Strings out;
  for (size_t p = section_html.find("<svg"); p != std::string::npos;
       p = section_html.find("<svg", p + 1))
    out.push_back(section_html.substr(p, section_html.find("</svg>", p) + 6 - p));
  return out;
}

// Note [Phase colours]: a phase has one colour in DP's and DDP's critical-path charts and in the
// step anatomy, whatever order the record lists runs and phases in.
TEST(HtmlReport, APhaseHasOneColourInEveryDesignsChart) {
  json suite = make_suite();
  const std::string html = ddpb::reports::render_html(suite);
  const Strings gantts = svgs_in(section(html, "chart-critical-path"));
  ASSERT_EQ(gantts.size(), 4u) << "DP and DDP of two workloads";
  ASSERT_NE(gantts[0].find("DP at 4 devices"), std::string::npos);
  ASSERT_NE(gantts[1].find("DDP at 4 ranks"), std::string::npos);
  const auto dp = phase_fills(gantts[0]), ddp = phase_fills(gantts[1]);
  const auto anatomy = phase_fills(section(html, "chart-phases"));
  for (const char* phase : {"data", "forward"}) {
    ASSERT_EQ(dp.count(phase), 1u) << phase;
    ASSERT_EQ(ddp.count(phase), 1u) << phase;
    EXPECT_EQ(dp.at(phase), ddp.at(phase)) << phase;
    EXPECT_EQ(dp.at(phase), anatomy.at(phase)) << phase;
  }
  // Every phase anywhere in the report has exactly the table's colour, and different phases
  // different colours (the control: one colour for all would pass the checks above).
  std::map<std::string, std::string> colour_of;
  for (const std::string& id : {std::string("chart-critical-path"), std::string("chart-phases")}) {
    for (const auto& [phase, fills] : phase_fills(section(html, id))) {
      ASSERT_EQ(fills.size(), 1u) << id << " " << phase;
      EXPECT_EQ(*fills.begin(), ddpb::reports::phase_color(phase)) << phase;
      colour_of[phase] = *fills.begin();
    }
  }
  EXPECT_GE(colour_of.size(), 10u);
  std::set<std::string> distinct;
  for (const auto& [phase, colour] : colour_of) distinct.insert(colour);
  EXPECT_EQ(distinct.size(), colour_of.size());
  // Listing DDP's runs first, and DDP's phases in another order, changes no colour (a chart
  // that coloured phases as it met them would).
  json reordered = suite;
  auto& runs = reordered["runs"];
  std::stable_sort(runs.begin(), runs.end(), [](const json& a, const json& b) {
    return a["mode"] == "ddp" && b["mode"] != "ddp";
  });
  for (auto& r : runs) {
    if (r.contains("metrics") && r["metrics"].contains("phases_median_ms")) {
      auto& phases = r["metrics"]["phases_median_ms"];
      std::reverse(phases.begin(), phases.end());
    }
  }
  const std::string html2 = ddpb::reports::render_html(reordered);
  for (const std::string& id : {std::string("chart-critical-path"), std::string("chart-phases")})
    for (const auto& [phase, fills] : phase_fills(section(html2, id)))
      EXPECT_EQ(fills, std::set<std::string>{colour_of.at(phase)}) << id << " " << phase;
  // A name outside the vocabulary still gets one colour, the same every time.
  EXPECT_EQ(ddpb::reports::phase_color("prefetch"), ddpb::reports::phase_color("prefetch"));
  EXPECT_EQ(colour_of.count("prefetch"), 0u);
}

TEST(HtmlReport, MissingDataRendersANoteNotACrash) {
  json suite = make_suite();
  suite["projection"]["workloads"] = json::array();
  for (auto& r : suite["runs"]) {
    r["status"] = "failed";
    r["error"] = "boom";
  }
  std::string html = ddpb::reports::render_html(suite);
  EXPECT_EQ(xml_problem(html), "");
  for (const auto& id : kChartIds) {
    const std::string s = section(html, id);
    EXPECT_NE(s.find("no data: "), std::string::npos) << id;
    EXPECT_EQ(s.find("<svg"), std::string::npos) << id;
  }
  // Not a suite at all: still a page, with the schema problem in the banner.
  for (const json& junk : {json(nullptr), json::array({1, 2}), json{{"runs", 3}},
                           json{{"runs", {{{"id", 5}, {"metrics", "x"}, {"status", "ok"}}}}}}) {
    html = ddpb::reports::render_html(junk);
    EXPECT_EQ(xml_problem(html), "") << junk;
    EXPECT_NE(html.find("does not match its schema"), std::string::npos) << junk;
  }
}

// --- Markdown ---------------------------------------------------------------------------------

TEST(MarkdownReport, TablesAndOneLinkedSvgPerChart) {
  const json suite = make_suite();
  const auto md = ddpb::reports::render_markdown(suite, "svg/");
  EXPECT_NE(md.markdown.find("| run | group | status | samples/s |"), std::string::npos);
  for (const auto& r : suite["runs"])
    EXPECT_NE(md.markdown.find("| " + r["id"].get<std::string>() + " |"), std::string::npos)
        << r["id"];
  ASSERT_EQ(md.svgs.size(), kChartIds.size());
  for (const auto& [file, text] : md.svgs) {
    const std::string stem = file.substr(4, file.size() - 8);  // svg/<stem>.svg
    EXPECT_NE(md.markdown.find("![" + stem + "](" + file + ")"), std::string::npos) << file;
    EXPECT_EQ(xml_problem(text), "") << file;
  }
  EXPECT_EQ(md.svgs[0].first, "svg/phases.svg") << "the step anatomy is under the verdict";
  EXPECT_EQ(md.svgs[1].first, "svg/critical_path.svg") << "and the critical path under it";
  EXPECT_EQ(md.svgs[2].first, "svg/projection.svg") << "the projection comes before the charts";
  EXPECT_EQ(md.svgs[3].first, "svg/throughput.svg");
  // A table cell cannot break the table or smuggle HTML.
  json evil = suite;
  run_by_id(evil, "gpt-tiny/ddp/w4")["error"] = "a | b <img src=x>\nnext";
  const auto md2 = ddpb::reports::render_markdown(evil, "");
  EXPECT_NE(md2.markdown.find("a \\| b \\<img src=x\\> next"), std::string::npos);
  // No raw control character reaches report.md (issue 25, S2): ESC[2J shows as text.
  json escape = suite;
  run_by_id(escape, "gpt-tiny/ddp/w4")["error"] = "boom \x1b[2J\x07 \xc2\x9b end";
  const auto md5 = ddpb::reports::render_markdown(escape, "");
  EXPECT_EQ(md5.markdown.find('\x1b'), std::string::npos);
  EXPECT_EQ(md5.markdown.find('\x07'), std::string::npos);
  EXPECT_EQ(md5.markdown.find("\xc2\x9b"), std::string::npos);
  EXPECT_NE(md5.markdown.find("boom \\\\x1b\\[2J\\\\x07 \\\\u009b end"), std::string::npos);
  // Markdown escaping, not HTML entities: an apostrophe stays one in the raw text.
  json quoted = suite;
  quoted["suite"]["name"] = "DP's *best* run";
  const auto md4 = ddpb::reports::render_markdown(quoted, "");
  EXPECT_NE(md4.markdown.find("DP's \\*best\\* run"), std::string::npos);
  EXPECT_EQ(md4.markdown.find("&#39;"), std::string::npos);
  // Numbers get units and four significant digits; arrays of objects are rows, not blobs.
  EXPECT_NE(md.markdown.find("| gemm\\_peak.flops\\_per\\_s | 110 GFLOP/s |"), std::string::npos);
  EXPECT_NE(md.markdown.find("gemm\\_peak.shapes\\[0\\].m | 32 |"), std::string::npos);
  EXPECT_EQ(md.markdown.find("[{"), std::string::npos);
  // Charts without data are a note, and no file.
  json empty = suite;
  empty["runs"] = json::array();
  empty.erase("projection");
  const auto md3 = ddpb::reports::render_markdown(empty, "");
  EXPECT_TRUE(md3.svgs.empty());
  EXPECT_NE(md3.markdown.find("_no data: "), std::string::npos);
}

// --- Chromium ---------------------------------------------------------------------------------

std::string run_command(const std::string& cmd, int* code) {
  std::string out;
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string find_browser() {
  for (const char* name : {"chromium", "chromium-browser"}) {
    int code = 0;
    std::string path = run_command(std::string("command -v ") + name, &code);
    if (code == 0 && !path.empty()) return path.substr(0, path.find('\n'));
  }
  return "";
}

// Headless Chromium on file://`html` with `args`, a fresh profile in `profile`.
std::string headless(const std::string& browser, const std::string& profile,
                     const std::string& args, const std::string& html, int* code) {
  return run_command("timeout 120 " + browser +
                         " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage"
                         " --hide-scrollbars --user-data-dir=" +
                         profile + " " + args + " file://" + html,
                     code);
}

// Decodes an 8-bit RGB/RGBA PNG with zlib (no imaging library needed) into `rows` (each a
// bytearray of `bpp` bytes per pixel), `w` and `h`.
constexpr const char* kPngDecode = R"py(
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat = 8, b''
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    pos += 12 + n
    if kind == b'IHDR':
        w, h, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', body)
    elif kind == b'IDAT':
        idat += body
    elif kind == b'IEND':
        break
assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
bpp = 3 if ctype == 2 else 4
stride = w * bpp
raw = zlib.decompress(idat)
prev = bytearray(stride)
rows = []
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 1:
        for i in range(bpp, stride):
            line[i] = (line[i] + line[i - bpp]) & 255
    elif f == 2:
        line = bytearray((a + b) & 255 for a, b in zip(line, prev))
    elif f == 3:
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
    elif f == 4:
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[i] = (line[i] + pred) & 255
    rows.append(line)
    prev = line
)py";

// Prints "WIDTH HEIGHT DISTINCT_COLOURS HAS_BANNER_RED HAS_PALETTE_BLUE".
const std::string kPngStats = std::string(kPngDecode) + R"py(
colours = set()
for line in rows:
    colours.update(bytes(line[i:i + 3]) for i in range(0, len(line), bpp))
print(w, h, len(colours), int(bytes([198, 40, 40]) in colours), int(bytes([78, 121, 167]) in colours))
)py";

// argv[2]: a pixel column; argv[3:]: colours as "rrggbb" (no '#': the shell would read a
// comment). Prints, per colour, how many pixels left of that column are closer to it than to
// any other of them, and close (an edge blended a little with its neighbour still counts).
const std::string kPngCounts = std::string(kPngDecode) + R"py(
limit = int(sys.argv[2])
want = [bytes.fromhex(c) for c in sys.argv[3:]]
counts = [0] * len(want)
for line in rows:
    for i in range(0, min(limit, w) * bpp, bpp):
        d = [sum((a - b) ** 2 for a, b in zip(line[i:i + 3], c)) for c in want]
        k = d.index(min(d))
        counts[k] += d[k] < 40 ** 2
print(*counts)
)py";

TEST(HtmlReport, ChromiumRendersANonBlankPage) {
  const std::string browser = find_browser();
  if (browser.empty()) GTEST_SKIP() << "neither chromium nor chromium-browser is on PATH";
  ScratchDir dir("report_chromium");
  const std::string html = dir / "report.html", png = dir / "page.png", py = dir / "png_stats.py";
  std::ofstream(html) << ddpb::reports::render_html(make_suite());
  std::ofstream(py) << kPngStats;
  int code = 0;
  const std::string log = headless(browser, dir / "profile",
                                   "--screenshot=" + png + " --window-size=1200,2000", html, &code);
  ASSERT_EQ(code, 0) << log;
  ASSERT_TRUE(std::filesystem::exists(png)) << log;
  EXPECT_GT(std::filesystem::file_size(png), 20'000u) << "a blank 1200x2000 PNG is a few KB";
  const std::string stats = run_command("/usr/bin/python3 " + py + " " + png, &code);
  ASSERT_EQ(code, 0) << stats;
  int w = 0, h = 0, colours = 0, red = 0, blue = 0;
  ASSERT_EQ(std::sscanf(stats.c_str(), "%d %d %d %d %d", &w, &h, &colours, &red, &blue), 5)
      << stats;
  EXPECT_EQ(w, 1200);
  EXPECT_EQ(h, 2000);
  EXPECT_GT(colours, 10) << "the page rendered blank";
  EXPECT_EQ(red, 1) << "the loud banner (a run failed) is not on the page";
  EXPECT_EQ(blue, 1) << "no chart series colour on the page";
}

// Every chart in the real browser at 1400 px wide (issue 27, §5; issue 43, §7): drawn (marks,
// not blank), inside the page, its text at least 10 px, inside its chart (a title or legend
// entry running past the edge is clipped), no two of its labels overlapping, and no line
// series covered by one drawn after it (a later line at least as wide whose every vertex is
// close enough to hide the earlier one). A script appended to the report measures the
// rendered boxes and leaves its findings in the DOM, which --dump-dom prints.
constexpr const char* kLegibilityScript = R"js(
<script>
(function () {
  const out = {charts: 0, texts: 0, lines: 0, problems: []};
  document.querySelectorAll('section.chart').forEach(function (sec) {
    sec.querySelectorAll('svg').forEach(function (svg, k) {
      const where = sec.id + '[' + k + ']';
      out.charts++;
      const r = svg.getBoundingClientRect();
      if (r.width < 100 || r.height < 60) out.problems.push(where + ': drawn ' + r.width + 'x' + r.height);
      if (r.right > 1400) out.problems.push(where + ': ends at ' + r.right + ' px, past 1400');
      if (svg.querySelectorAll('rect, path, polyline, circle, line').length < 3)
        out.problems.push(where + ': blank');
      const texts = Array.from(svg.querySelectorAll('text')).filter(function (t) {
        return t.textContent.trim().length > 0;
      });
      const boxes = texts.map(function (t) { return t.getBoundingClientRect(); });
      texts.forEach(function (t, i) {
        out.texts++;
        const px = boxes[i].height, b = boxes[i];
        if (px < 10) out.problems.push(where + ': "' + t.textContent + '" is ' + px + ' px high');
        if (b.left < r.left - 1 || b.right > r.right + 1 || b.top < r.top - 1 ||
            b.bottom > r.bottom + 1)
          out.problems.push(where + ': "' + t.textContent + '" is clipped by the chart\'s edge');
      });
      const lines = Array.from(svg.querySelectorAll('polyline')).map(function (p) {
        return {w: parseFloat(p.getAttribute('stroke-width') || '1'),
                dashed: p.hasAttribute('stroke-dasharray'),
                pts: p.getAttribute('points').trim().split(/\s+/).map(function (xy) {
                  return xy.split(',').map(Number);
                })};
      });
      out.lines += lines.length;
      for (let i = 0; i < lines.length; i++) {
        for (let j = i + 1; j < lines.length; j++) {
          const a = lines[i], b = lines[j];
          if (b.dashed || a.pts.length !== b.pts.length) continue;
          let far = 0;
          a.pts.forEach(function (p, k) {
            far = Math.max(far, Math.hypot(p[0] - b.pts[k][0], p[1] - b.pts[k][1]));
          });
          if (far + a.w / 2 <= b.w / 2 + 0.5)
            out.problems.push(where + ': line series ' + i + ' is hidden under series ' + j);
        }
      }
      for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          const a = boxes[i], b = boxes[j];
          const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
          const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
          if (w > 1 && h > 2)
            out.problems.push(where + ': "' + texts[i].textContent + '" overlaps "' +
                              texts[j].textContent + '"');
        }
      }
    });
  });
  const pre = document.createElement('pre');
  pre.id = 'legibility';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
)js";

std::string unescape_html(std::string s) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&quot;", "\""},
                                 {"&lt;", "<"},
                                 {"&gt;", ">"},
                                 {"&amp;", "&"}}) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
      s.replace(p, from.size(), to);
  }
  return s;
}

// The fixture with what made charts hard to read in issue 43: fp32's and the fp16 hook's loss
// curves identical, and autotune candidates 0.97 and 1.13 MB beside the 1 MB sweep run.
json hard_suite() {
  json suite = make_suite();
  const json loss = {2.31, 2.28, 2.24, 2.25, 2.19, 2.16};
  run_by_id(suite, "mlp-small/ddp/w4")["metrics"]["loss_per_step"] = loss;
  run_by_id(suite, "mlp-small/ddp/w4/fp16-hook")["metrics"]["loss_per_step"] = loss;
  auto& candidates =
      run_by_id(suite, "mlp-small/ddp/w4/bucket-auto")["metrics"]["bucket_autotune"]["candidates"];
  candidates.push_back({{"cap_mb", 0.97}, {"median_ms", 13.9}});
  candidates.push_back({{"cap_mb", 1.13}, {"median_ms", 13.7}});
  return suite;
}

// A chart made to fail every check: a title past the right edge, two labels on top of each
// other, and a line under an identical one as wide. It shows the script can find each.
constexpr const char* kBadChart = R"svg(
<section class="chart" id="control"><svg xmlns="http://www.w3.org/2000/svg" width="300"
 height="120" viewBox="0 0 300 120" font-family="sans-serif" font-size="12">
<text x="8" y="20" font-size="14">a title far too long for a chart only three hundred px wide</text>
<text x="50" y="60">overlap</text><text x="52" y="62">overlap</text>
<polyline fill="none" stroke="#4e79a7" stroke-width="2" points="10,100 100,80 200,90" />
<polyline fill="none" stroke="#f28e2b" stroke-width="2" points="10,100 100,80 200,90" />
<rect x="0" y="0" width="1" height="1" /></svg></section>
)svg";

TEST(HtmlReport, ChromiumShowsEveryChartLegiblyAt1400Px) {
  const std::string browser = find_browser();
  if (browser.empty()) GTEST_SKIP() << "neither chromium nor chromium-browser is on PATH";
  ScratchDir dir("report_legible");
  const std::string html = dir / "report.html";
  std::string page = ddpb::reports::render_html(hard_suite());
  ASSERT_NE(section(page, "chart-comm-hook-loss").find("<polyline"), std::string::npos);
  page.insert(page.rfind("</body>"), std::string(kBadChart) + kLegibilityScript);
  std::ofstream(html) << page;
  int code = 0;
  const std::string dom =
      headless(browser, dir / "profile", "--window-size=1400,2000 --dump-dom", html, &code);
  ASSERT_EQ(code, 0) << dom.substr(0, 2000);
  const size_t at = dom.find("<pre id=\"legibility\">");
  ASSERT_NE(at, std::string::npos) << "the script did not run: " << dom.substr(0, 2000);
  const size_t begin = dom.find('>', at) + 1;
  const json found =
      json::parse(unescape_html(dom.substr(begin, dom.find("</pre>", begin) - begin)));
  // Every chart of the fixture has data: one SVG at least per chart id, and several per workload.
  EXPECT_GE(found["charts"].get<int>(), static_cast<int>(kChartIds.size()) + 1) << found.dump();
  EXPECT_GT(found["texts"].get<int>(), 100) << found.dump();
  EXPECT_GE(found["lines"].get<int>(), 10) << found.dump();
  // The report's charts have no problem; the control chart has exactly its three.
  Strings report, control;
  for (const auto& p : found["problems"])
    (p.get<std::string>().rfind("control[0]", 0) == 0 ? control : report).push_back(p);
  EXPECT_EQ(report, Strings{}) << found["problems"].dump(1);
  ASSERT_EQ(control.size(), 3u) << found["problems"].dump(1);
  for (const std::string needle :
       {"is clipped by the chart's edge", "\"overlap\" overlaps \"overlap\"",
        "line series 0 is hidden under series 1"}) {
    EXPECT_EQ(
        std::count_if(control.begin(), control.end(),
                      [&](const std::string& p) { return p.find(needle) != std::string::npos; }),
        1)
        << needle;
  }
}

// The fp32 loss curve under an identical fp16 one, in pixels: both colours cover a real part
// of the plot (the legend's swatches left out). The control: the same two curves drawn plainly,
// where the later one hides the first.
TEST(HtmlReport, ChromiumShowsBothLossCurvesWhereTheyCoincide) {
  namespace svg = ddpb::reports::svg;
  const std::string browser = find_browser();
  if (browser.empty()) GTEST_SKIP() << "neither chromium nor chromium-browser is on PATH";
  ScratchDir dir("report_loss");
  const std::string py = dir / "png_counts.py";
  std::ofstream(py) << kPngCounts;
  const Strings loss_charts =
      svgs_in(section(ddpb::reports::render_html(hard_suite()), "chart-comm-hook-loss"));
  ASSERT_EQ(loss_charts.size(), 1u);
  // The control: the same chart with every line 2 px and every marker 3.5 px, as they were.
  const std::string plain = std::regex_replace(
      std::regex_replace(loss_charts[0], std::regex(R"re(stroke-width="[0-9.]+")re"),
                         "stroke-width=\"2\""),
      std::regex(R"re( r="[0-9.]+")re"), " r=\"3.5\"");
  ASSERT_NE(plain, loss_charts[0]);
  // Pixels of palette colours 0 (fp32) and 1 (fp16) left of x = 520, where the plot ends
  // before the legend.
  const auto counts = [&](const std::string& chart, const std::string& name) {
    const std::string html = dir / (name + ".html"), png = dir / (name + ".png");
    std::ofstream(html) << "<!DOCTYPE html><html><body style=\"margin:0\">" << chart
                        << "</body></html>";
    int code = 0;
    const std::string log = headless(browser, dir / "profile",
                                     "--screenshot=" + png + " --window-size=700,400", html, &code);
    EXPECT_EQ(code, 0) << log;
    const std::string out =
        run_command("/usr/bin/python3 " + py + " " + png + " 520 " +
                        svg::palette_color(0).substr(1) + " " + svg::palette_color(1).substr(1),
                    &code);
    EXPECT_EQ(code, 0) << out;
    std::pair<int, int> c{0, 0};
    EXPECT_EQ(std::sscanf(out.c_str(), "%d %d", &c.first, &c.second), 2) << out;
    return c;
  };
  const auto [fp32, fp16] = counts(loss_charts[0], "report");
  EXPECT_GT(fp32, 400) << "the fp32 curve is hidden";
  EXPECT_GT(fp16, 400) << "the fp16 curve is hidden";
  const auto [hidden, top] = counts(plain, "plain");
  EXPECT_LT(hidden, 50) << "the control's first curve should be covered";
  EXPECT_GT(top, 400);
}

}  // namespace
