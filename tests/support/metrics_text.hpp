#pragma once
/// @file
/// Reading values out of a Prometheus text exposition (GET /metrics) in
/// tests.

#include <string>

namespace tessera::test {

/// The value of `series` (the name with its labels, exactly as written,
/// e.g. `x_total{worker="w"}`); -1 when it is not there.
inline double metric_value(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

/// The sum of every series of metric `name`, whatever its labels (0 when
/// there is none).
inline double metric_sum(const std::string& text, const std::string& name) {
  double sum = 0;
  for (size_t at = text.find("\n" + name); at != std::string::npos; at = text.find("\n" + name, at + 1))
    if (auto sp = text.find(' ', at + 1); sp != std::string::npos && text[at + 1 + name.size()] != '_')
      sum += std::stod(text.substr(sp + 1));
  return sum;
}

} // namespace tessera::test
