#include "bench/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace tessera::bench {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Axis tick text: no decimals for whole numbers.
std::string tick(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A "nice" upper bound for the y axis: 1, 2 or 5 times a power of ten.
double nice_ceiling(double v) {
  if (v <= 0)
    return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v)
      return m * p;
  return 10 * p;
}

constexpr double chart_width = 720, chart_height = 440;

// The elements of line chart `c`, its top-left corner at (0, y0).
std::string chart_body(const chart& c, double y0) {
  const double w = chart_width, h = chart_height, left = 80, right = 180, top = y0 + 50, bottom = 60;
  const double pw = w - left - right, ph = h - 50 - bottom;
  double x_min = 1e300, x_max = -1e300, y_max = 0;
  for (const auto& s : c.series)
    for (auto [x, y] : s.points) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_max = std::max(y_max, y);
    }
  for (const auto& [label, y] : c.hlines)
    y_max = std::max(y_max, y);
  if (x_min > x_max) {
    x_min = 1;
    x_max = 2;
  }
  const double lx0 = c.log2_x ? std::log2(x_min) : std::min(x_min, 0.0);
  const double lx1 = c.log2_x ? std::max(std::log2(x_max), lx0 + 1) : nice_ceiling(std::max(x_max, lx0 + 1e-9));
  y_max = c.y_max > 0 ? c.y_max : nice_ceiling(y_max * 1.05);
  auto px = [&](double x) { return left + ((c.log2_x ? std::log2(x) : x) - lx0) / (lx1 - lx0) * pw; };
  auto py = [&](double y) { return top + ph - y / y_max * ph; };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};

  std::string s = "<text x=\"" + num(w / 2) + "\" y=\"" + num(y0 + 24) +
                  "\" text-anchor=\"middle\" font-size=\"15\">" + escape(c.title) + "</text>\n";
  // Grid and y ticks.
  for (int i = 0; i <= 5; ++i) {
    const double y = y_max * i / 5;
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(y)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(py(y)) + "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(py(y) + 4) + "\" text-anchor=\"end\">" +
         tick(y) + "</text>\n";
  }
  // x ticks at the powers of two in range, or five even steps.
  const double x_step = c.log2_x ? 1 : (lx1 - lx0) / 5;
  for (double lx = c.log2_x ? std::ceil(lx0) : lx0; lx <= lx1 + x_step * 1e-6; lx += x_step) {
    const double x = c.log2_x ? std::exp2(lx) : lx;
    s += "<text x=\"" + num(px(x)) + "\" y=\"" + num(top + ph + 18) + "\" text-anchor=\"middle\">" +
         tick(x) + "</text>\n";
  }
  s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(y0 + h - 16) + "\" text-anchor=\"middle\">" +
       escape(c.x_label) + "</text>\n";
  s += "<text transform=\"translate(20," + num(top + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       escape(c.y_label) + "</text>\n";
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  double ly = top + 10;
  // Labels of lines close together are pushed apart (in the order given).
  std::vector<double> label_ys;
  for (const auto& [label, y] : c.hlines) {
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(y)) + "\" x2=\"" + num(left + pw) + "\" y2=\"" +
         num(py(y)) + "\" stroke=\"#888\" stroke-dasharray=\"6,4\"/>\n";
    double at = py(y) + 4;
    for (bool moved = true; moved;) {
      moved = false;
      for (double other : label_ys)
        if (std::abs(at - other) < 13) {
          at = other + 13;
          moved = true;
        }
    }
    label_ys.push_back(at);
    s += "<text x=\"" + num(left + pw + 8) + "\" y=\"" + num(at) + "\" fill=\"#555\">" + escape(label) +
         "</text>\n";
  }
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& ser = c.series[i];
    const char* col = colors[i % 5];
    std::string pts;
    for (auto [x, y] : ser.points)
      pts += num(px(x)) + "," + num(py(y)) + " ";
    s += "<polyline fill=\"none\" stroke=\"" + std::string{col} + "\" stroke-width=\"2\" points=\"" + pts + "\"/>\n";
    for (auto [x, y] : ser.points)
      s += "<circle cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"3.5\" fill=\"" + col + "\"/>\n";
    s += "<rect x=\"" + num(left + pw + 10) + "\" y=\"" + num(ly + 40) + "\" width=\"12\" height=\"12\" fill=\"" +
         col + "\"/>\n";
    s += "<text x=\"" + num(left + pw + 28) + "\" y=\"" + num(ly + 50) + "\">" + escape(ser.label) + "</text>\n";
    ly += 20;
  }
  return s;
}

std::string svg_document(double w, double h, const std::string& inside) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w) + "\" height=\"" + num(h) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
         "fill=\"white\"/>\n" + inside + "</svg>\n";
}

} // namespace

std::string render_svg(const chart& c) { return svg_document(chart_width, chart_height, chart_body(c, 0)); }

std::string render_svg(const std::vector<chart>& charts) {
  std::string inside;
  for (size_t i = 0; i < charts.size(); ++i)
    inside += chart_body(charts[i], static_cast<double>(i) * chart_height);
  return svg_document(chart_width, chart_height * static_cast<double>(std::max<size_t>(charts.size(), 1)), inside);
}

std::string render_svg(const bar_chart& c) {
  const double left = 70, right = 190, top = 50, bottom = 90, ph = 300;
  const size_t ng = c.groups.size(), ns = c.series.size();
  const double bar_w = 14, group_gap = 18;
  const double group_w = static_cast<double>(ns) * bar_w + group_gap;
  const double pw = std::max(200.0, static_cast<double>(ng) * group_w);
  const double w = left + pw + right, h = top + ph + bottom;
  auto value = [&](size_t s, size_t g) {
    return s < c.values.size() && g < c.values[s].size() ? c.values[s][g] : -1.0;
  };
  double y_max = 0, y_min_pos = 1e300;
  for (size_t s = 0; s < ns; ++s)
    for (size_t g = 0; g < ng; ++g)
      if (const double v = value(s, g); std::isfinite(v) && v > 0) {
        y_max = std::max(y_max, v);
        y_min_pos = std::min(y_min_pos, v);
      }
  // Log axis: whole decades around the data; linear: a nice ceiling.
  const bool log_y = c.log_y && y_max > 0;
  const double d0 = log_y ? std::floor(std::log10(y_min_pos)) : 0;
  const double d1 = log_y ? std::max(std::ceil(std::log10(y_max)), d0 + 1) : 0;
  y_max = log_y ? std::pow(10.0, d1) : nice_ceiling(y_max * 1.05);
  const double y_base = log_y ? std::pow(10.0, d0) : 0;
  auto py = [&](double y) {
    if (log_y)
      return top + ph - (std::log10(std::max(y, y_base)) - d0) / (d1 - d0) * ph;
    return top + ph - y / y_max * ph;
  };
  static const char* colors[] = {"#1f77b4", "#aec7e8", "#d62728", "#ff9896", "#2ca02c", "#9467bd"};

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w) + "\" height=\"" +
                  num(h) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(w / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" +
       escape(c.title) + "</text>\n";
  const int n_ticks = log_y ? static_cast<int>(d1 - d0) : 5;
  for (int i = 0; i <= n_ticks; ++i) {
    const double y = log_y ? std::pow(10.0, d0 + i) : y_max * i / 5;
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(y)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(py(y)) + "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(py(y) + 4) + "\" text-anchor=\"end\">" +
         tick(y) + "</text>\n";
  }
  s += "<text transform=\"translate(20," + num(top + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       escape(c.y_label + (log_y ? " (log scale)" : "")) + "</text>\n";
  for (size_t g = 0; g < ng; ++g) {
    const double gx = left + static_cast<double>(g) * group_w + group_gap / 2;
    for (size_t si = 0; si < ns; ++si) {
      const double v = value(si, g);
      if (!std::isfinite(v) || v < 0 || (log_y && v <= 0))
        continue;
      s += "<rect x=\"" + num(gx + static_cast<double>(si) * bar_w) + "\" y=\"" + num(py(v)) +
           "\" width=\"" + num(bar_w - 2) + "\" height=\"" + num(top + ph - py(v)) + "\" fill=\"" +
           colors[si % 6] + "\"/>\n";
    }
    // Group labels slanted so long ones do not overlap.
    const double lx = gx + static_cast<double>(ns) * bar_w / 2, ly = top + ph + 14;
    s += "<text x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" text-anchor=\"end\" transform=\"rotate(-35 " +
         num(lx) + " " + num(ly) + ")\">" + escape(c.groups[g]) + "</text>\n";
  }
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (size_t si = 0; si < ns; ++si) {
    const double ly = top + 10 + static_cast<double>(si) * 20;
    s += "<rect x=\"" + num(left + pw + 10) + "\" y=\"" + num(ly) + "\" width=\"12\" height=\"12\" fill=\"" +
         colors[si % 6] + "\"/>\n";
    s += "<text x=\"" + num(left + pw + 28) + "\" y=\"" + num(ly + 10) + "\">" + escape(c.series[si]) +
         "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

} // namespace tessera::bench
