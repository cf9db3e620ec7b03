#include "bench/mooncake_trace.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

namespace tessera::bench {

namespace {

using json = nlohmann::json;

/// Reads and checks one line's fields; the first failure is kept.
class line_reader {
public:
  line_reader(const std::string& file, int64_t line) : where_(file + ":" + std::to_string(line) + ": ") {}

  /// The integer `field` of `obj` in [lo, hi], or nullopt after fail().
  std::optional<int64_t> integer(const json& obj, const char* field, int64_t lo, int64_t hi) {
    auto it = obj.find(field);
    if (it == obj.end()) {
      fail(field, "missing");
      return std::nullopt;
    }
    return value(*it, field, lo, hi);
  }

  /// `v` as an integer in [lo, hi] (named `field` in errors).
  std::optional<int64_t> value(const json& v, const std::string& field, int64_t lo, int64_t hi) {
    int64_t x = 0;
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(field, "must be at most " + std::to_string(hi) + ", got " + v.dump());
        return std::nullopt;
      }
      x = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      x = v.get<int64_t>();
    } else {
      fail(field, "must be an integer, got " + v.dump().substr(0, 40));
      return std::nullopt;
    }
    if (x < lo || x > hi) {
      fail(field, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(x));
      return std::nullopt;
    }
    return x;
  }

  void fail(const std::string& field, const std::string& what) {
    if (!error_)
      error_ = caf::make_error(caf::sec::invalid_argument, where_ + field + ": " + what);
  }

  [[nodiscard]] bool failed() const { return static_cast<bool>(error_); }
  caf::error take_error() { return std::move(error_); }

private:
  std::string where_;
  caf::error error_;
};

bool blank(const std::string& line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

} // namespace

caf::expected<mooncake_trace> parse_mooncake_trace(std::istream& in, const std::string& file_name,
                                                   const trace_parse_options& o) {
  if (o.block_tokens < 1)
    return caf::make_error(caf::sec::invalid_argument, "block_tokens must be at least 1");
  mooncake_trace out;
  std::string line;
  int64_t line_no = 0;
  int64_t last_timestamp = std::numeric_limits<int64_t>::min();
  // getline with a bound: a file without newlines must not fill memory.
  auto next_line = [&]() -> std::optional<bool> {
    line.clear();
    char c = 0;
    bool any = false;
    while (in.get(c)) {
      any = true;
      if (c == '\n')
        return true;
      if (line.size() >= o.max_line_bytes)
        return std::nullopt;
      line += c;
    }
    return any;
  };
  while (true) {
    auto got = next_line();
    ++line_no;
    if (!got)
      return caf::make_error(caf::sec::invalid_argument, file_name + ":" + std::to_string(line_no) +
                                                           ": line longer than " +
                                                           std::to_string(o.max_line_bytes) + " bytes");
    if (!*got)
      break;
    if (blank(line))
      continue;
    line_reader r{file_name, line_no};
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      r.fail("line", "not a JSON object: " + line.substr(0, 80));
      return r.take_error();
    }
    if (out.requests.size() >= o.max_requests) {
      r.fail("line", "more than " + std::to_string(o.max_requests) + " requests");
      return r.take_error();
    }
    trace_request req;
    req.line = line_no;
    auto ts = r.integer(j, "timestamp", 0, o.max_timestamp_ms);
    auto input = r.integer(j, "input_length", 1, o.max_input_length);
    auto output = r.integer(j, "output_length", 1, o.max_output_length);
    if (r.failed())
      return r.take_error();
    req.timestamp_ms = *ts;
    req.input_length = *input;
    req.output_length = *output;
    auto ids = j.find("hash_ids");
    if (ids == j.end()) {
      r.fail("hash_ids", "missing");
      return r.take_error();
    }
    if (!ids->is_array()) {
      r.fail("hash_ids", "must be an array of integers, got " + ids->dump().substr(0, 40));
      return r.take_error();
    }
    const int64_t want = (req.input_length + o.block_tokens - 1) / o.block_tokens;
    if (static_cast<int64_t>(ids->size()) != want) {
      r.fail("hash_ids", std::to_string(ids->size()) + " ids for input_length " + std::to_string(req.input_length) +
                           ", expected ceil(" + std::to_string(req.input_length) + " / " +
                           std::to_string(o.block_tokens) + ") = " + std::to_string(want));
      return r.take_error();
    }
    req.hash_ids.reserve(ids->size());
    for (size_t i = 0; i < ids->size(); ++i) {
      auto id = r.value((*ids)[i], "hash_ids[" + std::to_string(i) + "]", 0, std::numeric_limits<int64_t>::max());
      if (!id)
        return r.take_error();
      req.hash_ids.push_back(*id);
    }
    if (req.timestamp_ms < last_timestamp)
      ++out.out_of_order_lines;
    last_timestamp = req.timestamp_ms;
    out.requests.push_back(std::move(req));
  }
  if (in.bad())
    return caf::make_error(caf::sec::invalid_argument, file_name + ": read error");
  if (out.requests.empty())
    return caf::make_error(caf::sec::invalid_argument, file_name + ": no requests in the trace");
  if (out.out_of_order_lines > 0)
    std::stable_sort(out.requests.begin(), out.requests.end(),
                     [](const trace_request& a, const trace_request& b) { return a.timestamp_ms < b.timestamp_ms; });
  return out;
}

caf::expected<mooncake_trace> load_mooncake_trace(const std::string& path, const trace_parse_options& opts) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return caf::make_error(caf::sec::invalid_argument, "cannot open " + path);
  return parse_mooncake_trace(in, path, opts);
}

std::vector<trace_request> select_requests(const mooncake_trace& trace, const trace_selection& sel,
                                           size_t* skipped_long) {
  std::vector<trace_request> out;
  size_t skipped = 0;
  const double limit_ms = sel.minutes * 60'000.0;
  for (const auto& r : trace.requests) {
    if (sel.minutes > 0 && static_cast<double>(r.timestamp_ms) >= limit_ms)
      break; // sorted by timestamp
    if (sel.max_input_tokens > 0 && r.input_length > sel.max_input_tokens) {
      ++skipped;
      continue;
    }
    if (sel.max_requests > 0 && out.size() >= sel.max_requests)
      break;
    out.push_back(r);
  }
  if (skipped_long != nullptr)
    *skipped_long = skipped;
  return out;
}

} // namespace tessera::bench
