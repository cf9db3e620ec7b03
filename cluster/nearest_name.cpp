#include "cluster/nearest_name.hpp"

#include <algorithm>
#include <numeric>

namespace tessera::cluster {

size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the dynamic-programming table at a time.
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> nearest_name(std::string_view given, const std::vector<std::string>& known) {
  if (given.empty())
    return std::nullopt;
  const size_t limit = std::max<size_t>(2, given.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& k : known) {
    // A prefix of a longer name is what was meant whatever the length gap.
    const size_t d = k.starts_with(given) ? 1 : edit_distance(given, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view given, const std::vector<std::string>& known) {
  auto n = nearest_name(given, known);
  return n ? "; did you mean '" + *n + "'?" : std::string{};
}

std::string quote_input(std::string_view value) {
  constexpr size_t most = 200;
  std::string out{"'"};
  out.append(value.substr(0, most));
  out.append("'");
  if (value.size() > most)
    out.append("... (").append(std::to_string(value.size())).append(" bytes)");
  return out;
}

} // namespace tessera::cluster
