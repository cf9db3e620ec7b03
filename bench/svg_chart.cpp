#include "bench/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

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

} // namespace

std::string render_svg(const chart& c) {
  const double w = 720, h = 440, left = 80, right = 180, top = 50, bottom = 60;
  const double pw = w - left - right, ph = h - top - bottom;
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
  const double lx0 = std::log2(x_min), lx1 = std::max(std::log2(x_max), lx0 + 1);
  y_max = nice_ceiling(y_max * 1.05);
  auto px = [&](double x) { return left + (std::log2(x) - lx0) / (lx1 - lx0) * pw; };
  auto py = [&](double y) { return top + ph - y / y_max * ph; };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(w) + "\" height=\"" +
                  num(h) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(w / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" +
       escape(c.title) + "</text>\n";
  // Grid and y ticks.
  for (int i = 0; i <= 5; ++i) {
    const double y = y_max * i / 5;
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(y)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(py(y)) + "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(py(y) + 4) + "\" text-anchor=\"end\">" +
         tick(y) + "</text>\n";
  }
  // x ticks at the powers of two in range.
  for (double lx = std::ceil(lx0); lx <= lx1 + 1e-9; ++lx) {
    const double x = std::exp2(lx);
    s += "<text x=\"" + num(px(x)) + "\" y=\"" + num(top + ph + 18) + "\" text-anchor=\"middle\">" +
         tick(x) + "</text>\n";
  }
  s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(h - 16) + "\" text-anchor=\"middle\">" +
       escape(c.x_label) + "</text>\n";
  s += "<text transform=\"translate(20," + num(top + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       escape(c.y_label) + "</text>\n";
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  double ly = top + 10;
  for (const auto& [label, y] : c.hlines) {
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(y)) + "\" x2=\"" + num(left + pw) + "\" y2=\"" +
         num(py(y)) + "\" stroke=\"#888\" stroke-dasharray=\"6,4\"/>\n";
    s += "<text x=\"" + num(left + pw + 8) + "\" y=\"" + num(py(y) + 4) + "\" fill=\"#555\">" +
         escape(label) + "</text>\n";
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
  s += "</svg>\n";
  return s;
}

} // namespace tessera::bench
