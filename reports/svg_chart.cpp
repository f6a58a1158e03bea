#include "reports/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace ddpb::reports::svg {
namespace {

constexpr int kFontPx = 12;
constexpr int kTitlePx = 14;
constexpr int kTitleLinePx = 18;  // a wrapped title's line height
constexpr int kTop = 36;          // the band of a one-line title
constexpr int kLeft = 64;         // y tick labels and the rotated y label
constexpr int kBottom = 48;       // x tick labels and the x label
constexpr int kLegendRowPx = 18;

// Coordinates with two decimals: enough for screens, short, and identical on every run.
std::string px(double v) {
  if (!std::isfinite(v)) v = 0;
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string open_svg(int width, int height, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" font-family=\"sans-serif\" font-size=\"{2}\">"
      "<title>{3}</title><rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\" />",
      width, height, kFontPx, escape_xml(title));
}

std::string text(double x, double y, const std::string& s, const std::string& attrs = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"" + (attrs.empty() ? "" : " " + attrs) +
         ">" + escape_xml(s) + "</text>";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) +
         "\" " + attrs + " />";
}

// A rect with a hover tooltip (<title> is plain SVG; no script involved).
std::string rect(double x, double y, double w, double h, const std::string& fill,
                 const std::string& tooltip) {
  std::string r = "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(std::max(w, 0.0)) +
                  "\" height=\"" + px(std::max(h, 0.0)) + "\" fill=\"" + fill + "\"";
  if (tooltip.empty()) return r + " />";
  return r + "><title>" + escape_xml(tooltip) + "</title></rect>";
}

// The title, wrapped to the chart's width, and the height of the band it takes (the plot
// starts below it).
struct Title {
  std::string svg;
  int band = kTop;
};
Title title_block(const std::string& title, int width) {
  Title t;
  const std::vector<std::string> lines = title_lines(title, width);
  for (size_t i = 0; i < lines.size(); ++i)
    t.svg += text(8, 20 + kTitleLinePx * static_cast<double>(i), lines[i],
                  "font-size=\"" + std::to_string(kTitlePx) + "\" font-weight=\"bold\"");
  t.band = kTop + kTitleLinePx * static_cast<int>(lines.size() - 1);
  return t;
}

Svg no_data(const std::string& title, int width) {
  const Title t = title_block(title, width);
  const int height = t.band + 28;
  return {open_svg(width, height, title) + t.svg +
              text(8, t.band + 10, "no data", "fill=\"#666666\"") + "</svg>",
          width, height};
}

// A legend is at most this wide; a longer entry is shortened to fit.
constexpr double kMaxLegendPx = 260;
constexpr double kLegendTextX = 22;  // the entry's text, right of its swatch

int legend_width(const std::vector<std::string>& names) {
  double longest = 0;
  for (const auto& n : names) longest = std::max(longest, text_width(n, kFontPx));
  if (names.empty()) return 16;
  return static_cast<int>(std::min(kMaxLegendPx, kLegendTextX + 8 + longest));
}

// Drops the last UTF-8 character of `s` (all its bytes, so the text stays valid UTF-8).
void pop_glyph(std::string& s) {
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty()) s.pop_back();
}

// `s` cut to at most `width` px at the axis font, with "..." when cut.
std::string fit_text(const std::string& s, double width) {
  if (text_width(s, kFontPx) <= width) return s;
  std::string cut = s;
  while (!cut.empty() && text_width(cut + "...", kFontPx) > width) pop_glyph(cut);
  return cut + "...";
}

// The colour of series (kind) `i`: the chart's own when it names one, else the palette's.
std::string color_of(const std::vector<std::string>& colors, size_t i) {
  return i < colors.size() && !colors[i].empty() ? colors[i] : palette_color(i);
}

// Legend entries top to bottom at the right edge; a dashed entry is drawn as a dashed line.
// An entry too long for the legend is shortened, its full name in a tooltip.
std::string legend(double x, double y, const std::vector<std::string>& names,
                   const std::vector<bool>& dashed = {},
                   const std::vector<std::string>& colors = {}) {
  std::string out;
  const double text_px = kMaxLegendPx - kLegendTextX - 8;
  for (size_t i = 0; i < names.size(); ++i) {
    const double row = y + static_cast<double>(i) * kLegendRowPx;
    const std::string color = color_of(colors, i);
    if (i < dashed.size() && dashed[i]) {
      out += line(x, row + 6, x + 16, row + 6,
                  "stroke=\"" + color + "\" stroke-width=\"2\" stroke-dasharray=\"4 3\"");
    } else {
      out += rect(x, row, 16, 12, color, "");
    }
    const std::string shown = fit_text(names[i], text_px);
    if (shown == names[i]) {
      out += text(x + kLegendTextX, row + 11, names[i]);
    } else {
      out += "<g><title>" + escape_xml(names[i]) + "</title>" +
             text(x + kLegendTextX, row + 11, shown) + "</g>";
    }
  }
  return out;
}

// A legend laid out in lines, left to right from `x`, a new line where an entry would pass
// `right`; `height` is how tall it came out.
struct Legend {
  std::string svg;
  double height = 0;
};
Legend flow_legend(double x, double y, double right, const std::vector<std::string>& names,
                   const std::vector<std::string>& colors) {
  Legend out;
  double at = x, row = y;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string shown = fit_text(names[i], right - x - kLegendTextX);
    const double w = kLegendTextX + text_width(shown, kFontPx) + 16;
    if (at > x && at + w - 16 > right) at = x, row += kLegendRowPx;
    out.svg +=
        rect(at, row, 16, 12, color_of(colors, i), "") + text(at + kLegendTextX, row + 11, shown);
    at += w;
  }
  out.height = names.empty() ? 0 : row - y + kLegendRowPx;
  return out;
}

// Round tick positions covering [lo, hi]: steps of 1, 2 or 5 times a power of ten, so that
// there are about `target` intervals.
std::vector<double> nice_ticks(double lo, double hi, int target = 5) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  const double first = std::floor(lo / step);
  const double last = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last + 1e-9 && ticks.size() < 50; k += 1) {
    double t = k * step;
    if (std::fabs(t) < step * 1e-9) t = 0;  // -0 and 1e-17 become 0
    ticks.push_back(t);
  }
  return ticks;
}

// A linear or log2 map from data to pixels.
struct Scale {
  double lo, hi, p0, p1;
  bool log = false;
  double operator()(double v) const {
    const double a = log ? std::log2(lo) : lo, b = log ? std::log2(hi) : hi;
    const double t = ((log ? std::log2(v) : v) - a) / (b - a);
    return p0 + t * (p1 - p0);
  }
};

// Horizontal grid lines and labels for the y ticks, and the y label rotated along the axis.
std::string y_axis(const Scale& y, const std::vector<double>& ticks, double x0, double x1,
                   const std::string& label) {
  std::string out;
  for (double t : ticks) {
    out += line(x0, y(t), x1, y(t), "stroke=\"#e0e0e0\"");
    out += text(x0 - 6, y(t) + 4, format_tick(t), "text-anchor=\"end\"");
  }
  out += line(x0, y.p0, x0, y.p1, "stroke=\"#333333\"");
  const double mid = (y.p0 + y.p1) / 2;
  out +=
      text(14, mid, label, "text-anchor=\"middle\" transform=\"rotate(-90 14 " + px(mid) + ")\"");
  return out;
}

}  // namespace

std::string escape_xml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // XML 1.0 forbids most control characters even as references.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') ? '?' : c;
    }
  }
  return out;
}

std::string palette_color(size_t index) {
  // Tableau 10, then ten more from Tableau 20 that differ from those: the phase chart's legend
  // (DP's nine phases plus DDP's own) needs more than ten before colours repeat.
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
                                   "#a0cbe8", "#ffbe7d", "#8cd17d", "#b6992d", "#499894",
                                   "#79706e", "#d37295", "#d4a6c8", "#86bcb6", "#f1ce63"};
  return kPalette[index % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

double text_width(std::string_view s, double font_px, bool bold) {
  // Digits and most lower-case glyphs of DejaVu Sans and Liberation Sans are 0.55-0.6 em;
  // counting UTF-8 lead bytes only, so that "→" is one glyph.
  double glyphs = 0;
  for (const char c : s) glyphs += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return glyphs * font_px * (bold ? 0.62 : 0.58);
}

std::vector<std::string> title_lines(const std::string& title, int width) {
  const double room = width - 16.0;
  std::vector<std::string> lines(1);
  size_t at = 0;
  while (at < title.size()) {
    size_t end = title.find(' ', at);
    if (end == std::string::npos) end = title.size();
    const std::string word = title.substr(at, end - at);
    const std::string joined = lines.back().empty() ? word : lines.back() + " " + word;
    if (text_width(joined, kTitlePx, /*bold=*/true) <= room || lines.back().empty()) {
      lines.back() = joined;
    } else {
      lines.push_back(word);
    }
    at = end + 1;
  }
  // A single word wider than the chart (a long run id) is cut rather than clipped.
  for (std::string& l : lines) {
    while (l.size() > 1 && text_width(l, kTitlePx, /*bold=*/true) > room) pop_glyph(l);
  }
  return lines;
}

std::string format_tick(double v) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e12) return fmt::format("{:.3g}T", v / 1e12);
  if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
  if (a >= 1e3) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

namespace {

// Two series' lines coincide when they have the same number of points and each point is
// within this many px of the other's.
constexpr double kCoincidePx = 3;
constexpr double kNestPx = 3;

using Pixels = std::vector<std::pair<double, double>>;

bool coincide(const Pixels& a, const Pixels& b) {
  if (a.empty() || a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (std::hypot(a[k].first - b[k].first, a[k].second - b[k].second) > kCoincidePx) return false;
  }
  return true;
}

// The stroke width of each series: 2 px, and kNestPx wider than every later solid series that
// would cover it (every series after it when the chart is overlaid), so the later line is
// drawn inside the earlier one, which shows as a 1.5 px band on each side of it. A dashed
// later line covers nothing.
std::vector<double> stroke_widths(const LineChart& c, const std::vector<Pixels>& pixels) {
  std::vector<double> w(c.series.size(), 2.0);
  for (size_t i = w.size(); i-- > 0;) {
    for (size_t j = i + 1; j < w.size(); ++j) {
      if (!c.series[j].dashed && (c.overlaid || coincide(pixels[i], pixels[j])))
        w[i] = std::max(w[i], w[j] + kNestPx);
    }
  }
  return w;
}

// The x tick labels of a line chart, left to right, each left out when it would overlap the
// last one drawn (bucket caps of 0.97 and 1 MB on a log axis); every tick mark stays.
std::string x_ticks(const Scale& x, const std::vector<double>& ticks, double y1) {
  std::string out;
  double drawn_right = -1e9;
  for (double t : ticks) {
    out += line(x(t), y1, x(t), y1 + 5, "stroke=\"#333333\"");
    const std::string label = format_tick(t);
    const double half = text_width(label, kFontPx) / 2;
    if (x(t) - half < drawn_right + 8) continue;  // 8 px apart, so two numbers never read as one
    out += text(x(t), y1 + 18, label, "text-anchor=\"middle\"");
    drawn_right = x(t) + half;
  }
  return out;
}

// The ticks of a line chart's x axis: the data's x values when there are at most 12, else
// round numbers (powers of 4 on a log axis).
std::vector<double> line_x_ticks(const std::set<double>& xs, double xlo, double xhi, bool log) {
  std::vector<double> xt(xs.begin(), xs.end());
  if (xt.size() <= 12) return xt;
  xt.clear();
  if (log) {
    for (double t = std::exp2(std::floor(std::log2(xlo))); t <= xhi; t *= 4) xt.push_back(t);
  } else {
    for (double t : nice_ticks(xlo, xhi)) {
      if (t >= xlo && t <= xhi) xt.push_back(t);
    }
  }
  return xt;
}

// One series, its usable points (`values`) at `pixels`: its polyline (when it has two points)
// and its markers, each with a tooltip.
std::string line_series(const Series& s, size_t i, const Pixels& pixels,
                        const std::vector<std::pair<double, double>>& values, double width) {
  const std::string color = s.color.empty() ? palette_color(i) : s.color;
  std::string points, out;
  for (const auto& [px_x, px_y] : pixels) {
    if (!points.empty()) points += ' ';
    points += px(px_x) + "," + px(px_y);
  }
  if (pixels.size() >= 2) {
    out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + px(width) + "\"" +
           (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + points + "\" />";
  }
  if (s.dashed) return out;      // a reference line needs no markers
  const double r = 1.5 + width;  // 3.5 for a plain line; nested like the lines when widened
  for (size_t k = 0; k < pixels.size(); ++k) {
    out += "<circle cx=\"" + px(pixels[k].first) + "\" cy=\"" + px(pixels[k].second) + "\" r=\"" +
           px(r) + "\" fill=\"" + color + "\"><title>" +
           escape_xml(s.name + ": (" + format_tick(values[k].first) + ", " +
                      format_tick(values[k].second) + ")") +
           "</title></circle>";
  }
  return out;
}

}  // namespace

Svg render_line_chart(const LineChart& c) {
  std::vector<std::pair<double, double>> all;
  const auto usable = [&](const std::pair<double, double>& p) {
    return std::isfinite(p.first) && std::isfinite(p.second) && (!c.x_log || p.first > 0);
  };
  std::vector<std::string> names, colors;
  std::vector<bool> dashed;
  for (const auto& s : c.series) {
    names.push_back(s.name);
    dashed.push_back(s.dashed);
    colors.push_back(s.color);
    for (const auto& p : s.points) {
      if (usable(p)) all.push_back(p);
    }
  }
  if (all.empty()) return no_data(c.title, c.width);

  std::set<double> xs;
  double ymin = all[0].second, ymax = ymin;
  for (const auto& [x, y] : all) {
    xs.insert(x);
    ymin = std::min(ymin, y);
    ymax = std::max(ymax, y);
  }
  if (c.y_from_zero) ymin = std::min(ymin, 0.0);
  const std::vector<double> yt = nice_ticks(ymin, ymax);

  const Title title = title_block(c.title, c.width);
  const int legend_w = legend_width(names);
  const double x0 = kLeft, x1 = c.width - legend_w - 16, y0 = title.band, y1 = c.height - kBottom;
  double xlo = *xs.begin(), xhi = *xs.rbegin();
  if (xlo == xhi) {
    xlo = c.x_log ? xlo / 2 : xlo - 1;
    xhi = c.x_log ? xhi * 2 : xhi + 1;
  }
  // Keep the end points off the frame so their markers are not cut.
  const double pad = (x1 - x0) * 0.04;
  const Scale x{xlo, xhi, x0 + pad, x1 - pad, c.x_log};
  const Scale y{yt.front(), yt.back(), y1, y0};

  std::string out = open_svg(c.width, c.height, c.title) + title.svg;
  out += y_axis(y, yt, x0, x1, c.y_label);
  out += line(x0, y1, x1, y1, "stroke=\"#333333\"");
  out += x_ticks(x, line_x_ticks(xs, xlo, xhi, c.x_log), y1);
  out += text((x0 + x1) / 2, c.height - 10, c.x_label, "text-anchor=\"middle\"");
  std::vector<Pixels> pixels(c.series.size());
  std::vector<std::vector<std::pair<double, double>>> values(c.series.size());
  for (size_t i = 0; i < c.series.size(); ++i) {
    for (const auto& p : c.series[i].points) {
      if (!usable(p)) continue;
      values[i].push_back(p);
      pixels[i].push_back({x(p.first), y(p.second)});
    }
  }
  const std::vector<double> widths = stroke_widths(c, pixels);
  for (size_t i = 0; i < c.series.size(); ++i)
    out += line_series(c.series[i], i, pixels[i], values[i], widths[i]);
  out += legend(x1 + 16, y0, names, dashed, colors);
  return {out + "</svg>", c.width, c.height};
}

namespace {

// How wide a bar chart must be for its labels to sit side by side: each group as wide as its
// bold label, each bar as wide as its label and its total (10 px text), plus the margins.
int bar_chart_width(const BarChart& c, int legend_w) {
  double group_w = 0;
  for (const auto& g : c.groups) {
    double bar_w = 0;
    for (const auto& b : g.bars) {
      double sum = 0;
      for (const auto& [series, v] : b.segments) sum += std::isfinite(v) && v > 0 ? v : 0;
      bar_w = std::max({bar_w, text_width(b.label, 10), text_width(format_tick(sum), 10)});
    }
    // Bars fill 80% of their group; 6 px between neighbouring labels.
    group_w = std::max({group_w, text_width(g.label, kFontPx, /*bold=*/true) + 8,
                        (bar_w + 6) * static_cast<double>(g.bars.size()) / 0.8});
  }
  const double plot = group_w * static_cast<double>(c.groups.size());
  return std::max(c.width, static_cast<int>(std::ceil(kLeft + plot + legend_w + 16)));
}

}  // namespace

Svg render_bar_chart(const BarChart& c) {
  // Negative and non-finite segments are not drawable in a stack; they are left out.
  auto drawable = [](double v) { return std::isfinite(v) && v > 0; };
  double top = 0;
  size_t bars = 0;
  for (const auto& g : c.groups) {
    for (const auto& b : g.bars) {
      double sum = 0;
      for (const auto& [series, v] : b.segments) sum += drawable(v) ? v : 0;
      top = std::max(top, sum);
      ++bars;
    }
  }
  if (bars == 0 || top <= 0) return no_data(c.title, c.width);

  const int legend_w = legend_width(c.series_names);
  const int width = bar_chart_width(c, legend_w);
  const Title title = title_block(c.title, width);
  const int bottom = kBottom + 16;  // bar labels above the group labels
  const double x0 = kLeft, x1 = width - legend_w - 16, y0 = title.band, y1 = c.height - bottom;
  const std::vector<double> yt = nice_ticks(0, top);
  const Scale y{yt.front(), yt.back(), y1, y0};

  std::string out = open_svg(width, c.height, c.title) + title.svg;
  out += y_axis(y, yt, x0, x1, c.y_label);
  out += line(x0, y1, x1, y1, "stroke=\"#333333\"");
  const double group_w = (x1 - x0) / static_cast<double>(c.groups.size());
  for (size_t gi = 0; gi < c.groups.size(); ++gi) {
    const BarGroup& g = c.groups[gi];
    const double gx = x0 + group_w * static_cast<double>(gi);
    const double bar_w = g.bars.empty() ? 0 : group_w * 0.8 / static_cast<double>(g.bars.size());
    for (size_t bi = 0; bi < g.bars.size(); ++bi) {
      const Bar& b = g.bars[bi];
      const double bx = gx + group_w * 0.1 + bar_w * static_cast<double>(bi);
      double base = 0;
      for (const auto& [series, v] : b.segments) {
        if (!drawable(v)) continue;
        const std::string name = series < c.series_names.size()
                                     ? c.series_names[series]
                                     : "series " + std::to_string(series);
        out +=
            rect(bx + 1, y(base + v), bar_w - 2, y(base) - y(base + v), color_of(c.colors, series),
                 g.label + " " + b.label + " " + name + ": " + format_tick(v));
        base += v;
      }
      out += text(bx + bar_w / 2, y(base) - 4, format_tick(base),
                  "text-anchor=\"middle\" font-size=\"10\"");
      out += text(bx + bar_w / 2, y1 + 14, b.label, "text-anchor=\"middle\" font-size=\"10\"");
    }
    out += text(gx + group_w / 2, y1 + 32, g.label, "text-anchor=\"middle\" font-weight=\"bold\"");
  }
  out += legend(x1 + 16, y0, c.series_names, {}, c.colors);
  return {out + "</svg>", width, c.height};
}

Svg render_timeline(const Timeline& c) {
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& r : c.rows) {
    for (const auto& s : r.spans) {
      if (!std::isfinite(s.start) || !std::isfinite(s.end)) continue;
      lo = std::min(lo, s.start);
      hi = std::max(hi, s.end);
      any = true;
    }
    for (double m : r.markers) {
      if (std::isfinite(m)) hi = std::max(hi, m);
    }
  }
  if (!any) return no_data(c.title, c.width);

  constexpr double kRowPx = 22;
  double longest = 0;
  for (const auto& r : c.rows) longest = std::max(longest, text_width(r.label, kFontPx));
  const double label_w = std::min(c.width / 3.0, 16 + longest);
  std::vector<std::string> names = c.kinds;
  std::vector<std::string> colors;
  for (size_t i = 0; i < c.kinds.size(); ++i) colors.push_back(color_of(c.colors, i));
  if (!c.marker_name.empty()) {
    names.push_back(c.marker_name);
    colors.push_back(palette_color(c.kinds.size()));
  }
  const Title title = title_block(c.title, c.width);
  const double x0 = std::max<double>(kLeft, label_w), x1 = c.width - 16;
  const double y0 = title.band, y1 = title.band + static_cast<double>(c.rows.size()) * kRowPx;
  // The legend runs in lines under the x label: a chart of a few lanes and many phases stays
  // short, and the lanes get the chart's whole width.
  const Legend key = flow_legend(x0, y1 + kBottom + 4, c.width - 8.0, names, colors);
  const int height = static_cast<int>(std::ceil(y1 + kBottom + 4 + key.height + 4));
  const std::vector<double> xt = nice_ticks(lo, hi);
  const Scale x{xt.front(), xt.back(), x0, x1};

  std::string out = open_svg(c.width, height, c.title) + title.svg;
  for (double t : xt) {
    out += line(x(t), y0, x(t), y1, "stroke=\"#e0e0e0\"");
    out += text(x(t), y1 + 18, format_tick(t), "text-anchor=\"middle\"");
  }
  out += line(x0, y1, x1, y1, "stroke=\"#333333\"");
  out += text((x0 + x1) / 2, y1 + kBottom - 10, c.x_label, "text-anchor=\"middle\"");
  for (size_t ri = 0; ri < c.rows.size(); ++ri) {
    const TimelineRow& r = c.rows[ri];
    const double ry = y0 + kRowPx * static_cast<double>(ri);
    out += text(x0 - 6, ry + 15, fit_text(r.label, x0 - 8), "text-anchor=\"end\"");
    for (const Span& s : r.spans) {
      if (!std::isfinite(s.start) || !std::isfinite(s.end)) continue;
      const std::string kind = s.kind < c.kinds.size() ? c.kinds[s.kind] : "";
      out += rect(x(s.start), ry + 4, std::max(x(s.end) - x(s.start), 1.0), 14,
                  color_of(c.colors, s.kind),
                  r.label + " " + kind + ": " + format_tick(s.start) + " to " + format_tick(s.end) +
                      " (" + format_tick(s.end - s.start) + ")");
    }
    for (double m : r.markers) {
      if (!std::isfinite(m)) continue;
      out += "<line x1=\"" + px(x(m)) + "\" y1=\"" + px(ry + 1) + "\" x2=\"" + px(x(m)) +
             "\" y2=\"" + px(ry + 21) + "\" stroke=\"" + palette_color(c.kinds.size()) +
             "\" stroke-width=\"2\"><title>" +
             escape_xml(r.label + " " + c.marker_name + ": " + format_tick(m)) + "</title></line>";
    }
  }
  out += key.svg;
  return {out + "</svg>", c.width, height};
}

Svg stack_vertical(const std::vector<Svg>& charts) {
  constexpr int kGap = 12;
  int width = 0, height = 0;
  for (const auto& c : charts) {
    width = std::max(width, c.width);
    height += c.height + (height ? kGap : 0);
  }
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\">",
      width, height);
  int y = 0;
  for (const auto& c : charts) {
    out += "<g transform=\"translate(0," + std::to_string(y) + ")\">" + c.text + "</g>";
    y += c.height + kGap;
  }
  return {out + "</svg>", width, height};
}

}  // namespace ddpb::reports::svg
