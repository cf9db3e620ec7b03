#pragma once
/// @file
/// Dependency-free SVG charts for benchmark results, so a run leaves a
/// picture beside its JSON: a line chart (series of (x, y) points on a log2
/// x axis) and a grouped bar chart (one bar per series in each group).

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

/// A grouped bar chart: for each group (an x-axis category), one bar per
/// series.
struct bar_chart {
  std::string title;
  std::string y_label;
  std::vector<std::string> groups;
  std::vector<std::string> series;
  /// [series][group]; a negative or non-finite value draws no bar.
  std::vector<std::vector<double>> values;
  /// A log10 y axis (for values spanning decades); zeros draw no bar.
  /// Default: false.
  bool log_y = false;
};

/// Renders `c` as a standalone SVG document.
std::string render_svg(const bar_chart& c);

} // namespace tessera::bench
