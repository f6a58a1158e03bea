#include "reports/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace ddpb::reports::svg {
namespace {

constexpr int kFontPx = 12;
constexpr double kCharPx = 7.0;  // average glyph width at kFontPx, for layout estimates only
constexpr int kTop = 36;         // title band
constexpr int kLeft = 64;        // y tick labels and the rotated y label
constexpr int kBottom = 48;      // x tick labels and the x label
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

std::string title_text(const std::string& title) {
  return text(8, 20, title, "font-size=\"14\" font-weight=\"bold\"");
}

Svg no_data(const std::string& title, int width) {
  const int height = 64;
  return {open_svg(width, height, title) + title_text(title) +
              text(8, 46, "no data", "fill=\"#666666\"") + "</svg>",
          width, height};
}

int legend_width(const std::vector<std::string>& names) {
  size_t longest = 0;
  for (const auto& n : names) longest = std::max(longest, n.size());
  if (names.empty()) return 16;
  return static_cast<int>(std::min(260.0, 40 + kCharPx * static_cast<double>(longest)));
}

// Legend entries top to bottom at the right edge; a dashed entry is drawn as a dashed line.
std::string legend(double x, double y, const std::vector<std::string>& names,
                   const std::vector<bool>& dashed = {}) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    const double row = y + static_cast<double>(i) * kLegendRowPx;
    const std::string color = palette_color(i);
    if (i < dashed.size() && dashed[i]) {
      out += line(x, row + 6, x + 16, row + 6,
                  "stroke=\"" + color + "\" stroke-width=\"2\" stroke-dasharray=\"4 3\"");
    } else {
      out += rect(x, row, 16, 12, color, "");
    }
    out += text(x + 22, row + 11, names[i]);
  }
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

Svg render_line_chart(const LineChart& c) {
  std::vector<std::pair<double, double>> all;
  auto usable = [&](const std::pair<double, double>& p) {
    return std::isfinite(p.first) && std::isfinite(p.second) && (!c.x_log || p.first > 0);
  };
  std::vector<std::string> names;
  std::vector<bool> dashed;
  for (const auto& s : c.series) {
    names.push_back(s.name);
    dashed.push_back(s.dashed);
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

  const int legend_w = legend_width(names);
  const double x0 = kLeft, x1 = c.width - legend_w - 16, y0 = kTop, y1 = c.height - kBottom;
  double xlo = *xs.begin(), xhi = *xs.rbegin();
  if (xlo == xhi) {
    xlo = c.x_log ? xlo / 2 : xlo - 1;
    xhi = c.x_log ? xhi * 2 : xhi + 1;
  }
  // Keep the end points off the frame so their markers are not cut.
  const double pad = (x1 - x0) * 0.04;
  const Scale x{xlo, xhi, x0 + pad, x1 - pad, c.x_log};
  const Scale y{yt.front(), yt.back(), y1, y0};

  std::string out = open_svg(c.width, c.height, c.title) + title_text(c.title);
  out += y_axis(y, yt, x0, x1, c.y_label);
  out += line(x0, y1, x1, y1, "stroke=\"#333333\"");
  std::vector<double> xt(xs.begin(), xs.end());
  if (xt.size() > 12) {
    xt.clear();
    if (c.x_log) {
      for (double t = std::exp2(std::floor(std::log2(xlo))); t <= xhi; t *= 4) xt.push_back(t);
    } else {
      for (double t : nice_ticks(xlo, xhi)) {
        if (t >= xlo && t <= xhi) xt.push_back(t);
      }
    }
  }
  for (double t : xt) {
    out += line(x(t), y1, x(t), y1 + 5, "stroke=\"#333333\"");
    out += text(x(t), y1 + 18, format_tick(t), "text-anchor=\"middle\"");
  }
  out += text((x0 + x1) / 2, c.height - 10, c.x_label, "text-anchor=\"middle\"");

  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const std::string color = palette_color(i);
    std::string points;
    for (const auto& p : s.points) {
      if (!usable(p)) continue;
      if (!points.empty()) points += ' ';
      points += px(x(p.first)) + "," + px(y(p.second));
    }
    if (points.find(' ') != std::string::npos) {
      out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\"" +
             (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + points + "\" />";
    }
    if (s.dashed) continue;  // a reference line needs no markers
    for (const auto& p : s.points) {
      if (!usable(p)) continue;
      out +=
          "<circle cx=\"" + px(x(p.first)) + "\" cy=\"" + px(y(p.second)) + "\" r=\"3.5\" fill=\"" +
          color + "\"><title>" +
          escape_xml(s.name + ": (" + format_tick(p.first) + ", " + format_tick(p.second) + ")") +
          "</title></circle>";
    }
  }
  out += legend(x1 + 16, y0, names, dashed);
  return {out + "</svg>", c.width, c.height};
}

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
  const int bottom = kBottom + 16;  // bar labels above the group labels
  const double x0 = kLeft, x1 = c.width - legend_w - 16, y0 = kTop, y1 = c.height - bottom;
  const std::vector<double> yt = nice_ticks(0, top);
  const Scale y{yt.front(), yt.back(), y1, y0};

  std::string out = open_svg(c.width, c.height, c.title) + title_text(c.title);
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
        out += rect(bx + 1, y(base + v), bar_w - 2, y(base) - y(base + v), palette_color(series),
                    g.label + " " + b.label + " " + name + ": " + format_tick(v));
        base += v;
      }
      out += text(bx + bar_w / 2, y(base) - 4, format_tick(base),
                  "text-anchor=\"middle\" font-size=\"10\"");
      out += text(bx + bar_w / 2, y1 + 14, b.label, "text-anchor=\"middle\" font-size=\"10\"");
    }
    out += text(gx + group_w / 2, y1 + 32, g.label, "text-anchor=\"middle\" font-weight=\"bold\"");
  }
  out += legend(x1 + 16, y0, c.series_names);
  return {out + "</svg>", c.width, c.height};
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
  size_t longest = 0;
  for (const auto& r : c.rows) longest = std::max(longest, r.label.size());
  const double label_w = std::min(180.0, 16 + kCharPx * static_cast<double>(longest));
  std::vector<std::string> names = c.kinds;
  if (!c.marker_name.empty()) names.push_back(c.marker_name);
  const int legend_w = legend_width(names);
  const double legend_h = static_cast<double>(names.size()) * kLegendRowPx;
  const double rows_h = std::max(static_cast<double>(c.rows.size()) * kRowPx, legend_h);
  const int height = static_cast<int>(kTop + rows_h + kBottom);
  const double x0 = std::max<double>(kLeft, label_w), x1 = c.width - legend_w - 16;
  const double y0 = kTop, y1 = kTop + rows_h;
  const std::vector<double> xt = nice_ticks(lo, hi);
  const Scale x{xt.front(), xt.back(), x0, x1};

  std::string out = open_svg(c.width, height, c.title) + title_text(c.title);
  for (double t : xt) {
    out += line(x(t), y0, x(t), y1, "stroke=\"#e0e0e0\"");
    out += text(x(t), y1 + 18, format_tick(t), "text-anchor=\"middle\"");
  }
  out += line(x0, y1, x1, y1, "stroke=\"#333333\"");
  out += text((x0 + x1) / 2, height - 10, c.x_label, "text-anchor=\"middle\"");
  for (size_t ri = 0; ri < c.rows.size(); ++ri) {
    const TimelineRow& r = c.rows[ri];
    const double ry = y0 + kRowPx * static_cast<double>(ri);
    out += text(x0 - 6, ry + 15, r.label, "text-anchor=\"end\"");
    for (const Span& s : r.spans) {
      if (!std::isfinite(s.start) || !std::isfinite(s.end)) continue;
      const std::string kind = s.kind < c.kinds.size() ? c.kinds[s.kind] : "";
      out +=
          rect(x(s.start), ry + 4, std::max(x(s.end) - x(s.start), 1.0), 14, palette_color(s.kind),
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
  out += legend(x1 + 16, y0, names);
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
