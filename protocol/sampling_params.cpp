#include "protocol/sampling_params.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "protocol/engine_errc.hpp"

namespace tessera::protocol {

namespace {

// "%g" keeps messages short ("1.5", "nan", "inf") and shows the value the
// client sent closely enough to find it in the request body.
std::string show(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

caf::error bad(std::string what) {
  return make_engine_error(engine_errc::bad_request, std::move(what));
}

// The comparisons are written so that NaN fails them: !(lo <= x && x <= hi).
bool in_closed(double x, double lo, double hi) {
  return lo <= x && x <= hi;
}

/// Largest max_tokens accepted here; the engine checks the real limit (the
/// model's context) when it admits the request.
constexpr int32_t max_tokens_limit = 1 << 24;
/// Most stop strings and bytes per stop string, as the OpenAI API allows
/// few and a long one is a mistake or an attack on the matcher.
constexpr size_t max_stop_strings = 16;
constexpr size_t max_stop_bytes = 256;
constexpr size_t max_stop_token_ids = 64;

} // namespace

caf::error sampling_params::validate() const {
  if (!in_closed(temperature, 0.0, 100.0))
    return bad("temperature must be in [0, 100], got " + show(temperature));
  if (top_k < -1)
    return bad("top_k must be >= -1 (-1 or 0 disable it), got " + std::to_string(top_k));
  if (!(0.0f < top_p && top_p <= 1.0f))
    return bad("top_p must be in (0, 1], got " + show(top_p));
  if (!in_closed(min_p, 0.0, 1.0))
    return bad("min_p must be in [0, 1], got " + show(min_p));
  if (!(0.0f < repetition_penalty && repetition_penalty <= 100.0f))
    return bad("repetition_penalty must be in (0, 100], got " + show(repetition_penalty));
  if (!in_closed(frequency_penalty, -2.0, 2.0))
    return bad("frequency_penalty must be in [-2, 2], got " + show(frequency_penalty));
  if (!in_closed(presence_penalty, -2.0, 2.0))
    return bad("presence_penalty must be in [-2, 2], got " + show(presence_penalty));
  if (max_tokens < 1 || max_tokens > max_tokens_limit)
    return bad("max_tokens must be in [1, " + std::to_string(max_tokens_limit) + "], got "
               + std::to_string(max_tokens));
  if (min_tokens < 0 || min_tokens > max_tokens)
    return bad("min_tokens must be in [0, max_tokens (" + std::to_string(max_tokens)
               + ")], got " + std::to_string(min_tokens));
  if (logprobs && (*logprobs < 0 || *logprobs > max_logprobs))
    return bad("logprobs must be in [0, " + std::to_string(max_logprobs) + "], got "
               + std::to_string(*logprobs));
  if (stop.size() > max_stop_strings)
    return bad("stop must have at most " + std::to_string(max_stop_strings)
               + " strings, got " + std::to_string(stop.size()));
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty())
      return bad("stop[" + std::to_string(i) + "] must not be empty");
    if (stop[i].size() > max_stop_bytes)
      return bad("stop[" + std::to_string(i) + "] must be at most "
                 + std::to_string(max_stop_bytes) + " bytes, got "
                 + std::to_string(stop[i].size()));
  }
  if (stop_token_ids.size() > max_stop_token_ids)
    return bad("stop_token_ids must have at most " + std::to_string(max_stop_token_ids)
               + " ids, got " + std::to_string(stop_token_ids.size()));
  for (size_t i = 0; i < stop_token_ids.size(); ++i)
    if (stop_token_ids[i] < 0)
      return bad("stop_token_ids[" + std::to_string(i) + "] must be >= 0, got "
                 + std::to_string(stop_token_ids[i]));
  if (speculative && speculative->method != speculative_params::method_kind::none &&
      (speculative->num_tokens < 1 || speculative->num_tokens > speculative_params::max_tokens))
    return bad("speculative num_tokens must be in [1, " +
               std::to_string(speculative_params::max_tokens) + "], got " +
               std::to_string(speculative->num_tokens));
  using so = structured_output_params::kind_type;
  const auto& st = structured_output;
  if (st.kind != so::none && st.kind != so::json_object && st.kind != so::json_schema)
    return bad("structured_output kind must be none, json_object or json_schema");
  if (st.kind == so::json_schema && st.schema.empty())
    return bad("structured_output json_schema needs a schema");
  if (st.kind != so::json_schema && !st.schema.empty())
    return bad("structured_output carries a schema only for json_schema");
  if (st.schema.size() > structured_output_params::max_schema_bytes)
    return bad("structured_output schema must be at most " +
               std::to_string(structured_output_params::max_schema_bytes) + " bytes, got " +
               std::to_string(st.schema.size()));
  if (st.active() && ignore_eos)
    return bad("ignore_eos cannot be combined with structured output (the document ends with "
               "EOS)");
  return {};
}

caf::expected<speculative_params> parse_speculative(std::string_view text) {
  using method = speculative_params::method_kind;
  if (text == "none")
    return speculative_params{};
  const std::string want = "ngram:K or draft:K with K in [1, " +
                           std::to_string(speculative_params::max_tokens) + "], or none";
  auto bad = [&] {
    return make_engine_error(engine_errc::bad_request,
                             "--speculative must be " + want + ", got '" + std::string{text} + "'");
  };
  const auto colon = text.find(':');
  if (colon == std::string_view::npos)
    return bad();
  speculative_params p;
  const auto name = text.substr(0, colon);
  if (name == "ngram")
    p.method = method::ngram;
  else if (name == "draft")
    p.method = method::draft;
  else
    return bad();
  const auto num = text.substr(colon + 1);
  const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), p.num_tokens);
  if (ec != std::errc{} || end != num.data() + num.size() || p.num_tokens < 1 ||
      p.num_tokens > speculative_params::max_tokens)
    return bad();
  return p;
}

} // namespace tessera::protocol
