#include "actors/frontend/api_auth.hpp"

#include <array>

#include "common/ascii.hpp"

namespace tessera::actors::frontend {

namespace {

api_error unauthorized(std::string message) {
  api_error e;
  e.status = 401;
  e.type = "authentication_error";
  e.code = "invalid_api_key";
  e.message = std::move(message);
  return e;
}

} // namespace

api_result<std::shared_ptr<const cluster::tenant_policy>>
authenticate(const std::shared_ptr<const cluster::api_key_table>& keys,
             const std::optional<std::string_view>& authorization) {
  if (!keys)
    return std::shared_ptr<const cluster::tenant_policy>{};
  if (!authorization)
    return unauthorized("this server needs an API key: send the header Authorization: Bearer <key>");
  auto v = *authorization;
  // RFC 7235: the scheme is case-insensitive; one or more spaces follow it.
  if (v.size() < 7 || !ascii_iequals(v.substr(0, 7), "bearer "))
    return unauthorized("the Authorization header must be \"Bearer <key>\"");
  v.remove_prefix(7);
  while (!v.empty() && v.front() == ' ')
    v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
    v.remove_suffix(1);
  if (v.empty())
    return unauthorized("the Authorization header has no key after \"Bearer\"");
  const auto* tenant = keys->find(v);
  if (tenant == nullptr)
    return unauthorized("the API key is not valid (unknown key)");
  // Aliasing: the policy lives as long as the table it came from.
  return std::shared_ptr<const cluster::tenant_policy>{keys, tenant};
}

std::string compose_cache_salt(std::string_view cache_namespace, std::string_view cache_salt) {
  if (cache_namespace.empty() && cache_salt.empty())
    return {};
  std::string out = std::to_string(cache_namespace.size());
  out.push_back(':');
  out.append(cache_namespace);
  out.push_back('|');
  out.append(cache_salt);
  return out;
}

bool bearer_matches(const std::optional<std::string_view>& authorization, std::string_view key) {
  if (key.empty() || !authorization || !authorization->starts_with("Bearer "))
    return false;
  const auto given = authorization->substr(7);
  // Every byte of the key is looked at whatever the given one holds, so
  // the time taken does not tell how much of a guess was right.
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

std::string_view endpoint_label(std::string_view path) {
  static constexpr std::array<std::string_view, 11> known{
    "/v1/completions", "/v1/chat/completions", "/v1/models", "/v1/tokenize", "/v1/detokenize", "/health",
    "/ready",          "/live",                "/metrics",   "/admin/fault", "/admin/drain"};
  for (auto k : known)
    if (path == k)
      return k;
  // GET /v1/models/{id}: one label whatever the id.
  if (path.starts_with("/v1/models/") && path.size() > 11)
    return "/v1/models/{id}";
  return "other";
}

} // namespace tessera::actors::frontend
