#pragma once
/// @file
/// API keys and tenants: the key file `tessera serve --api-keys FILE` (and
/// `api_keys_file` in the cluster TOML) names, a TOML list of
///
///   [[key]]
///   key = "sk-..."            # or key_sha256 = "<64 hex digits>"
///   tenant = "alice"
///   units_per_minute = 60000  # optional: the tenant's rate limit in model units
///   max_concurrent = 8        # optional: requests in flight at once
///   priority = 10             # optional, default 0: higher is served first
///   share_cache_with = ["bob"]# optional: tenants whose prefix cache this one shares
///
/// Keys are kept only as SHA-256 digests and compared in constant time.
/// Several keys may name one tenant; a tenant's limits are the same in each
/// of its entries (a conflict is an error naming both lines; an entry that
/// leaves a limit out takes the tenant's). A plaintext `key` is at least 16
/// bytes of printable ASCII without spaces; a file holding one must not be
/// readable by group or others (chmod 600; key_sha256-only files may be).
/// Tenant names: 1-64 of [A-Za-z0-9._-].

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <caf/expected.hpp>

namespace tessera::cluster {

/// What the key file says about one tenant.
struct tenant_policy {
  std::string name;
  /// Rate limit in model units per minute; nullopt: unlimited.
  std::optional<double> units_per_minute;
  /// Requests in flight at once; nullopt: unlimited.
  std::optional<int32_t> max_concurrent;
  /// Scheduling priority, higher first; a request's own `priority` is capped
  /// by it.
  int32_t priority = 0;
  /// The prefix-cache namespace: tenants that share their cache (the
  /// symmetric, transitive closure of share_cache_with) have the same one.
  std::string cache_namespace;
};

/// The parsed key file.
class api_key_table {
public:
  /// Reads and checks `path`. Errors name the file, the line and the field.
  [[nodiscard]] static caf::expected<api_key_table> load(const std::filesystem::path& path);
  /// Checks the TOML `text` (`name` prefixes the errors); load() without
  /// the file and its permissions.
  [[nodiscard]] static caf::expected<api_key_table> parse(std::string_view text, const std::string& name);

  /// The tenant `bearer_key` belongs to, or null (unknown key). Constant
  /// time in the key's content.
  [[nodiscard]] const tenant_policy* find(std::string_view bearer_key) const;

  /// Every tenant by name.
  [[nodiscard]] const std::map<std::string, tenant_policy>& tenants() const { return tenants_; }

  [[nodiscard]] size_t key_count() const { return digests_.size(); }

private:
  /// SHA-256 digest of a key -> tenant name.
  std::map<std::string, std::string> digests_;
  std::map<std::string, tenant_policy> tenants_;
};

/// The lowercase hex SHA-256 of `key`, as `key_sha256` takes it.
[[nodiscard]] std::string api_key_sha256_hex(std::string_view key);

} // namespace tessera::cluster
