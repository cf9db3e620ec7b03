#include "transport/faults/fault_plan.hpp"

#include <charconv>
#include <sstream>

namespace tessera::transport {

namespace {

constexpr std::array<const char*, fault_kind_count> kind_names{
  "drop", "delay", "duplicate", "reorder", "corrupt", "fail", "partition"};

caf::error parse_error(size_t rule, std::string_view what) {
  return make_transport_error(transport_errc::invalid_message,
                              "fault plan: rule " + std::to_string(rule) + ": " +
                                std::string{what});
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    auto i = s.find(sep);
    out.push_back(trim(s.substr(0, i)));
    if (i == std::string_view::npos)
      return out;
    s.remove_prefix(i + 1);
  }
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

std::optional<double> parse_probability(std::string_view s) {
  // std::from_chars for double is in libstdc++ 11+.
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size() || s.empty() || !(v >= 0.0 && v <= 1.0))
    return std::nullopt;
  return v;
}

std::optional<transport_errc> parse_errc(std::string_view s) {
  for (size_t c = 1; c < transport_errc_count; ++c) {
    auto code = static_cast<transport_errc>(c);
    if (s == to_string(code))
      return code;
  }
  return std::nullopt;
}

} // namespace

const char* to_string(fault_kind k) {
  auto i = static_cast<size_t>(k);
  return i < kind_names.size() ? kind_names[i] : "unknown";
}

const char* to_string(fault_op op) {
  switch (op) {
    case fault_op::send: return "send";
    case fault_op::transfer: return "transfer";
    case fault_op::any: return "any";
  }
  return "unknown";
}

caf::expected<fault_plan> fault_plan::parse(std::string_view text) {
  fault_plan plan;
  size_t index = 0;
  for (auto part : split(text, ';')) {
    if (part.empty())
      continue;
    if (part.starts_with("seed=")) {
      auto v = parse_u64(part.substr(5));
      if (!v)
        return make_transport_error(transport_errc::invalid_message,
                                    "fault plan: bad seed '" + std::string{part} + "'");
      plan.seed = *v;
      continue;
    }
    auto fields = split(part, ',');
    fault_rule rule;
    bool known = false;
    for (size_t k = 0; k < kind_names.size(); ++k)
      if (fields[0] == kind_names[k]) {
        rule.kind = static_cast<fault_kind>(k);
        known = true;
      }
    if (!known)
      return parse_error(index, "unknown fault kind '" + std::string{fields[0]} + "'");
    for (size_t f = 1; f < fields.size(); ++f) {
      auto eq = fields[f].find('=');
      if (eq == std::string_view::npos)
        return parse_error(index, "expected key=value, got '" + std::string{fields[f]} + "'");
      auto key = fields[f].substr(0, eq);
      auto value = fields[f].substr(eq + 1);
      auto bad = [&] {
        return parse_error(index, "bad value '" + std::string{value} + "' for '" +
                                    std::string{key} + "'");
      };
      if (key == "op") {
        if (value == "send")
          rule.ops = fault_op::send;
        else if (value == "transfer")
          rule.ops = fault_op::transfer;
        else if (value == "any")
          rule.ops = fault_op::any;
        else
          return bad();
      } else if (key == "p") {
        auto v = parse_probability(value);
        if (!v)
          return bad();
        rule.probability = *v;
      } else if (key == "peer" && !parse_u64(value)) {
        // A name: the peer's proven identity (a node id).
        if (value.empty() || value.find_first_of(" \t") != std::string_view::npos)
          return bad();
        rule.peer_name = std::string{value};
      } else if (key == "err") {
        auto v = parse_errc(value);
        if (!v)
          return bad();
        rule.error = *v;
      } else {
        auto v = parse_u64(value);
        if (!v)
          return bad();
        if (key == "every")
          rule.every = *v;
        else if (key == "peer")
          rule.peer = *v;
        else if (key == "from")
          rule.from = *v;
        else if (key == "after_ms")
          rule.after = std::chrono::milliseconds{*v};
        else if (key == "limit")
          rule.limit = *v;
        else if (key == "ms")
          rule.delay = std::chrono::milliseconds{*v};
        else
          return parse_error(index, "unknown key '" + std::string{key} + "'");
      }
    }
    plan.rules.push_back(rule);
    ++index;
  }
  return plan;
}

std::string fault_plan::to_string() const {
  std::ostringstream out;
  out.precision(17);
  out << "seed=" << seed;
  for (const auto& r : rules) {
    out << "; " << tessera::transport::to_string(r.kind) << ",op="
        << tessera::transport::to_string(r.ops);
    if (r.every != 0)
      out << ",every=" << r.every;
    if (r.probability)
      out << ",p=" << *r.probability;
    if (r.peer)
      out << ",peer=" << *r.peer;
    if (!r.peer_name.empty())
      out << ",peer=" << r.peer_name;
    if (r.from != 1)
      out << ",from=" << r.from;
    if (r.after.count() != 0)
      out << ",after_ms=" << r.after.count();
    if (r.limit != 0)
      out << ",limit=" << r.limit;
    if (r.kind == fault_kind::delay)
      out << ",ms=" << r.delay.count();
    if (r.kind == fault_kind::fail)
      out << ",err=" << tessera::transport::to_string(r.error);
  }
  return out.str();
}

} // namespace tessera::transport
