// Small self-contained SVG charts for the suite reports: a line chart, a grouped/stacked bar
// chart and a horizontal timeline. Each returns one complete <svg> element (with the SVG
// namespace, XHTML-compatible: every element closed) that works inline in HTML5 and as a
// stand-alone .svg file.
//
// Contract: every piece of text is XML-escaped; no fonts, images, links or scripts are
// referenced (generic font families only); the output depends only on the input (fixed
// palette, fixed number formatting), so two renders of one record are byte-identical.
// Non-finite values are skipped; a chart with nothing to draw says "no data" inside itself.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddpb::reports::svg {

// &, <, >, " and ' as entities; control characters other than tab and newline (invalid in
// XML 1.0) become '?'. Safe in element text and in attribute values.
std::string escape_xml(std::string_view text);

// A rendered chart: the <svg> element and its size in px.
struct Svg {
  std::string text;
  int width = 0;
  int height = 0;
};

// Colour `index` of the fixed palette (wraps around).
std::string palette_color(size_t index);

// Numbers on axes and in tooltips: at most 4 significant digits, no exponent for everyday
// magnitudes (1.5, 250, 12000, 0.003), SI-like suffixes beyond 1e6 (1.2M, 3.4G).
std::string format_tick(double value);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
  bool dashed = false;                            // e.g. an "ideal" reference line
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  bool x_log = false;       // log2 x axis (bucket caps spanning 0.25..100 MB)
  bool y_from_zero = true;  // y axis starts at 0 (throughput, efficiency)
  int width = 640;
  int height = 360;
};
// X ticks sit at the distinct x values of the data when there are at most 12 of them (world
// sizes, bucket caps), else at round numbers; y ticks at round numbers.
Svg render_line_chart(const LineChart& chart);

// One bar: a stack of (series index, value) segments drawn bottom-up. A grouped chart gives
// every bar one segment; a stacked chart gives a bar one segment per part (phase).
struct Bar {
  std::string label;
  std::vector<std::pair<size_t, double>> segments;
};
struct BarGroup {
  std::string label;      // under the group (e.g. "w2")
  std::vector<Bar> bars;  // side by side
};
struct BarChart {
  std::string title;
  std::string y_label;
  std::vector<std::string> series_names;  // legend; colour i belongs to series i
  std::vector<BarGroup> groups;
  int width = 640;
  int height = 360;
};
Svg render_bar_chart(const BarChart& chart);

// Horizontal timeline: one row per lane (a DDP bucket), spans coloured by kind, and optional
// point markers (drawn as a short vertical tick).
struct Span {
  double start = 0;
  double end = 0;
  size_t kind = 0;  // index into Timeline::kinds
};
struct TimelineRow {
  std::string label;
  std::vector<Span> spans;
  std::vector<double> markers;
};
struct Timeline {
  std::string title;
  std::string x_label;
  std::vector<std::string> kinds;  // legend; colour i belongs to kind i
  std::string marker_name;         // legend entry for the markers ("" = no entry)
  std::vector<TimelineRow> rows;
  int width = 640;
};
// The height follows from the number of rows.
Svg render_timeline(const Timeline& chart);

// Stacks complete <svg> charts vertically into one <svg> (a file per chart id in the Markdown
// report, whatever the number of workloads).
Svg stack_vertical(const std::vector<Svg>& charts);

}  // namespace ddpb::reports::svg
