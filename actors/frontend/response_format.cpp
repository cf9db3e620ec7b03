#include "actors/frontend/response_format.hpp"

#include <nlohmann/json.hpp>

#include "engine/grammar/json_schema.hpp"

namespace tessera::actors::frontend {

namespace {

using ojson = nlohmann::ordered_json;

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-'))
      return false;
  return true;
}

} // namespace

api_result<response_format> parse_response_format(std::string_view body,
                                                  const response_format_limits& limits) {
  ojson doc;
  bool too_deep = false;
  try {
    // The callback sees each value's depth before it is built, so a
    // hostile nesting is refused without recursing into it.
    doc = ojson::parse(
        body,
        [&](int depth, ojson::parse_event_t, ojson&) {
          if (depth > limits.max_json_depth)
            too_deep = true;
          return !too_deep;
        },
        true);
  } catch (const nlohmann::json::exception&) {
    return bad_request("the request body is not valid JSON");
  }
  if (too_deep)
    return bad_request("the request body nests deeper than " +
                       std::to_string(limits.max_json_depth) + " levels");
  response_format out;
  if (!doc.is_object() || !doc.contains("response_format") || doc["response_format"].is_null())
    return out;
  const ojson& rf = doc["response_format"];
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    return bad_request("response_format must be an object with a string \"type\"",
                       "response_format");
  std::string type = rf["type"].get<std::string>();
  if (type == "text")
    return out;
  if (type == "json_object") {
    out.type = response_format::kind::json_object;
    return out;
  }
  if (type != "json_schema")
    return bad_request("response_format.type must be \"text\", \"json_object\" or "
                       "\"json_schema\", got " + quote_input(type),
                       "response_format.type");
  out.type = response_format::kind::json_schema;
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    return bad_request("response_format.json_schema must be an object when type is "
                       "\"json_schema\"",
                       "response_format.json_schema");
  const ojson& js = rf["json_schema"];
  if (!js.contains("name") || !js["name"].is_string() ||
      !valid_name(js["name"].get<std::string>()))
    return bad_request("response_format.json_schema.name must be 1 to 64 letters, digits, "
                       "'_' or '-'",
                       "response_format.json_schema.name");
  out.name = js["name"].get<std::string>();
  if (js.contains("strict") && !js["strict"].is_null()) {
    if (!js["strict"].is_boolean())
      return bad_request("response_format.json_schema.strict must be a boolean",
                         "response_format.json_schema.strict");
    out.strict = js["strict"].get<bool>();
  }
  if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
    return bad_request("response_format.json_schema.schema must be a JSON Schema object",
                       "response_format.json_schema.schema");
  out.schema_text = js["schema"].dump();
  if (out.schema_text.size() > limits.max_schema_bytes)
    return bad_request("response_format.json_schema.schema is " +
                           std::to_string(out.schema_text.size()) + " bytes, over the limit of " +
                           std::to_string(limits.max_schema_bytes),
                       "response_format.json_schema.schema");
  return out;
}

api_result<std::shared_ptr<const engine::grammar::grammar>>
compile_response_format(const response_format& format, const response_format_limits& limits) {
  engine::grammar::json_grammar_options opts;
  opts.limits.max_nodes = limits.max_grammar_nodes;
  engine::grammar::json_grammar_result r;
  switch (format.type) {
  case response_format::kind::text:
    return std::shared_ptr<const engine::grammar::grammar>{};
  case response_format::kind::json_object:
    r = engine::grammar::compile_json_object_mode(opts);
    break;
  case response_format::kind::json_schema:
    r = engine::grammar::compile_json_schema_text(format.schema_text, opts);
    break;
  }
  if (!r.ok())
    return bad_request("response_format.json_schema.schema: " + r.error.text(),
                       "response_format.json_schema.schema");
  return r.value;
}

std::optional<api_error> apply_response_format(std::string_view body,
                                               engine::sampling_params& params,
                                               const response_format_limits& limits) {
  auto parsed = parse_response_format(body, limits);
  if (auto* e = std::get_if<api_error>(&parsed))
    return std::move(*e);
  auto& f = std::get<response_format>(parsed);
  auto compiled = compile_response_format(f, limits);
  if (auto* e = std::get_if<api_error>(&compiled))
    return std::move(*e);
  using so = engine::structured_output_params::kind_type;
  switch (f.type) {
  case response_format::kind::text:
    params.structured_output = {};
    break;
  case response_format::kind::json_object:
    params.structured_output = {so::json_object, ""};
    break;
  case response_format::kind::json_schema:
    params.structured_output = {so::json_schema, std::move(f.schema_text)};
    break;
  }
  return std::nullopt;
}

} // namespace tessera::actors::frontend
