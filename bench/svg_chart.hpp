#pragma once
/// @file
/// Dependency-free SVG charts for benchmark results, so a run leaves a
/// picture beside its JSON: a line chart (series of (x, y) points on a log2
/// or linear x axis), several line charts stacked in one picture, and a
/// grouped bar chart (one bar per series in each group).

#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

/// One line of a chart.
struct chart_series {
  std::string label;
  std::vector<std::pair<double, double>> points; ///< (x, y); x > 0 on a log2 axis
};

/// A chart: title, axis labels, series, and optional horizontal reference
/// lines (label, y) such as a roofline.
struct chart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<chart_series> series;
  std::vector<std::pair<std::string, double>> hlines;
  /// x on a log2 scale (ticks at powers of two); false: linear from the
  /// smallest x (or 0 if none is negative) to the largest. Default: true.
  bool log2_x = true;
  /// > 0: the top of the y axis (e.g. 100 for percentages); else a round
  /// number above the largest y. Default: 0.
  double y_max = 0;
};

/// Renders `c` as a standalone SVG document.
std::string render_svg(const chart& c);

/// Renders `charts` one above the other in one SVG document (for the same
/// x axis, e.g. several measures over time).
std::string render_svg(const std::vector<chart>& charts);

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
