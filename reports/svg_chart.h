// Small self-contained SVG charts for the suite reports: a line chart, a grouped/stacked bar
// chart and a horizontal timeline. Each returns one complete <svg> element (with the SVG
// namespace, XHTML-compatible: every element closed) that works inline in HTML5 and as a
// stand-alone .svg file.
//
// Contract: every piece of text is XML-escaped; no fonts, images, links or scripts are
// referenced (generic font families only); the output depends only on the input (fixed
// palette, fixed number formatting), so two renders of one record are byte-identical.
// Non-finite values are skipped; a chart with nothing to draw says "no data" inside itself.
// Text stays inside the chart: a long title wraps onto more lines, a long legend entry is
// shortened with "..." (its full name in a tooltip), and labels that would overlap are
// thinned or given room.
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

// Layout estimates the renderers use to keep text apart and inside the chart: the width in px
// of `text` at `font_px` (bold: wider), from an average glyph width of sans-serif fonts.
double text_width(std::string_view text, double font_px, bool bold = false);
// A chart title as lines that fit `width` px at the title font (split at spaces; a word
// longer than a line is cut), at least one.
std::vector<std::string> title_lines(const std::string& title, int width);

// Numbers on axes and in tooltips: at most 4 significant digits, no exponent for everyday
// magnitudes (1.5, 250, 12000, 0.003), SI-like suffixes beyond 1e6 (1.2M, 3.4G).
std::string format_tick(double value);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
  bool dashed = false;                            // e.g. an "ideal" reference line
  std::string color = {};  // empty: the palette's colour of its index; a design's measured and
                           // projected lines share one (the projection chart)
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
  // Series expected to coincide (the loss of fp32 and of a lossless hook): each is drawn 3 px
  // wider than every solid series after it, the first widest, so no later line covers an
  // earlier one anywhere and every series stays visible as a band around the next.
  bool overlaid = false;
};
// X ticks sit at the distinct x values of the data when there are at most 12 of them (world
// sizes, bucket caps), else at round numbers; y ticks at round numbers. A tick label that would
// overlap the one before it is left out (its tick stays). Lines are 2 px; a series whose every
// point lies within 3 px of a later solid series' (two workloads with the same efficiencies) is
// drawn 3 px wider than that one, as in an overlaid chart, so it is never hidden under it.
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
  std::vector<std::string> colors =
      {};  // colour of series i when given (phases), else the palette's
};
// The chart grows wider than `width` when its group, bar or total labels would not fit side by
// side (Svg::width says how wide it came out).
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
  std::vector<std::string> colors = {};  // colour of kind i when given (phases), else the palette's
};
// The legend runs in lines under the x axis, so a chart of few rows and many kinds stays short;
// the height follows from the number of rows and of legend lines.
Svg render_timeline(const Timeline& chart);

// Stacks complete <svg> charts vertically into one <svg> (a file per chart id in the Markdown
// report, whatever the number of workloads).
Svg stack_vertical(const std::vector<Svg>& charts);

}  // namespace ddpb::reports::svg
