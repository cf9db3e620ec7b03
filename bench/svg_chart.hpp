#pragma once
/// @file
/// A dependency-free SVG line chart for benchmark results (series of
/// (x, y) points on a log2 x axis), so a run leaves a picture beside its JSON.

#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

/// One line of a chart.
struct chart_series {
  std::string label;
  std::vector<std::pair<double, double>> points; ///< (x, y), x > 0
};

/// A chart: title, axis labels, series, and optional horizontal reference
/// lines (label, y) such as a roofline.
struct chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<chart_series> series;
  std::vector<std::pair<std::string, double>> hlines;
};

/// Renders `c` as a standalone SVG document (x on a log2 scale).
std::string render_svg(const chart& c);

} // namespace tessera::bench
