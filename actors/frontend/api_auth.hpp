#pragma once
/// @file
/// Who a request comes from and what it may see: the Bearer key check
/// against the API key table (cluster/api_keys.hpp), the prefix-cache salt
/// made from the tenant's cache namespace and the request's own
/// `cache_salt`, and the bounded `endpoint` label of the request counter.
/// Pure functions: no actors, no HTTP.

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "actors/frontend/api_error.hpp"
#include "cluster/api_keys.hpp"

namespace tessera::actors::frontend {

/// The tenant of a request whose Authorization header is `authorization`
/// (nullopt: none sent). Without a key table (`keys` null): null, anyone
/// may call. With one: the tenant of the key ("Bearer <key>"; the pointer
/// shares ownership of the table, so a reload does not pull it away), or a
/// 401 authentication_error, code "invalid_api_key", saying whether the
/// header was missing, malformed or the key unknown (never quoting the key).
[[nodiscard]] api_result<std::shared_ptr<const cluster::tenant_policy>>
authenticate(const std::shared_ptr<const cluster::api_key_table>& keys,
             const std::optional<std::string_view>& authorization);

/// Whether `authorization` is "Bearer <key>" for `key` (the operator's
/// admin key), compared in constant time; false when `key` is empty (no
/// admin key configured: nobody is an admin).
[[nodiscard]] bool bearer_matches(const std::optional<std::string_view>& authorization, std::string_view key);

/// The engine request's cache_salt for a tenant with `cache_namespace`
/// (empty: no keys configured) and the request's `cache_salt` (empty: none
/// given): empty when both are, else
/// "<bytes of namespace>:<namespace>|<salt>", so no (namespace, salt) pair
/// makes another pair's string (tenant "a" with salt "b|c" cannot collide
/// with tenant "a|b" with salt "c").
[[nodiscard]] std::string compose_cache_salt(std::string_view cache_namespace, std::string_view cache_salt);

/// The `endpoint` label of tessera_requests_total for a request to `path`:
/// the path itself for the endpoints the frontend serves, "other" for the
/// rest (so clients cannot grow the label set).
[[nodiscard]] std::string_view endpoint_label(std::string_view path);

} // namespace tessera::actors::frontend
