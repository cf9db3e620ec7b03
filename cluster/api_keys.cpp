#include "cluster/api_keys.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include "cluster/nearest_name.hpp"
#include "cluster/toml_reader.hpp"
#include "common/hex.hpp"

namespace tessera::cluster {

namespace {

/// Largest key file read, bytes.
constexpr size_t max_key_file_bytes = size_t{4} << 20;
constexpr size_t max_tenant_bytes = 64;
constexpr size_t min_key_bytes = 16;
constexpr size_t max_key_bytes = 512;

const std::vector<std::string> top_keys{"key"};
const std::vector<std::string> entry_keys{"key",      "key_sha256", "tenant",          "units_per_minute",
                                          "max_concurrent", "priority", "share_cache_with"};

std::string sha256(std::string_view data) {
  std::string out(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

bool valid_tenant(std::string_view t) {
  return !t.empty() && t.size() <= max_tenant_bytes && std::all_of(t.begin(), t.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

/// Printable ASCII without spaces: what an HTTP Bearer token carries.
bool valid_key_text(std::string_view k) {
  return std::all_of(k.begin(), k.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

/// 32 raw bytes from 64 hex digits; empty if `hex` is not that.
std::string from_hex(std::string_view hex) {
  if (hex.size() != 2 * SHA256_DIGEST_LENGTH)
    return {};
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_digit_value(hex[i]);
    const int lo = hex_digit_value(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return {};
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

/// What one [[key]] entry said, before the tenants are merged.
struct entry {
  int64_t line = 0;
  std::string tenant;
  std::string digest;
  std::optional<double> units_per_minute;
  std::optional<int32_t> max_concurrent;
  std::optional<int32_t> priority;
  std::vector<std::string> share;
};

/// Where a tenant's limit was first set (the line a conflict names).
template <class T>
struct stated {
  std::optional<T> value;
  int64_t line = 0;
};

/// The tenants that share a cache, as groups (union-find): each tenant's
/// namespace is the smallest tenant name of its group.
std::map<std::string, std::string> cache_namespaces(const std::vector<entry>& entries) {
  std::map<std::string, std::string> parent;
  std::function<std::string(const std::string&)> root = [&](const std::string& t) -> std::string {
    auto& p = parent[t];
    if (p.empty() || p == t)
      return p = t;
    return p = root(p);
  };
  for (const auto& e : entries)
    root(e.tenant);
  for (const auto& e : entries)
    for (const auto& other : e.share) {
      auto a = root(e.tenant);
      auto b = root(other);
      if (a != b)
        parent[std::max(a, b)] = std::min(a, b); // the smaller name stays the root
    }
  std::map<std::string, std::string> out;
  for (const auto& [t, _] : parent)
    out[t] = root(t);
  return out;
}

} // namespace

std::string api_key_sha256_hex(std::string_view key) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : sha256(key)) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

caf::expected<api_key_table> api_key_table::parse(std::string_view text, const std::string& name) {
  toml_reader r{name};
  toml::table t;
  try {
    t = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "line " << e.source().begin.line << ": " << e.description();
    r.problem(os.str());
    return r.error();
  }
  r.known_keys(t, top_keys, "");
  const auto* keys = t["key"].as_array();
  if (t.contains("key") && (keys == nullptr || !keys->is_array_of_tables()))
    r.problem("'key' must be a list of [[key]] tables");
  if (keys == nullptr || keys->empty()) {
    if (r.ok())
      r.problem("holds no [[key]] table: nobody could use the API");
    return r.error();
  }
  std::vector<entry> entries;
  for (size_t i = 0; i < keys->size(); ++i) {
    const auto& node = *keys->get(i);
    entry e;
    e.line = node.source().begin.line;
    // "key[2] (line 9)": what each problem of this entry starts with.
    const std::string at = "key[" + std::to_string(i) + "] (line " + std::to_string(e.line) + ")";
    auto* tbl = r.entry_table(node, at, entry_keys);
    if (tbl == nullptr)
      continue;
    const toml_reader::view v{*tbl};
    auto field = [&](const char* f) { return at + "." + f; };
    const size_t before = r.count();
    std::string key;
    std::string key_hex;
    r.str(v["key"], field("key"), key);
    r.str(v["key_sha256"], field("key_sha256"), key_hex);
    r.str(v["tenant"], field("tenant"), e.tenant);
    if (v["key"] && v["key_sha256"])
      r.problem(at + ": give key or key_sha256, not both");
    else if (!v["key"] && !v["key_sha256"])
      r.problem(at + ": needs key = \"...\" or key_sha256 = \"<64 hex digits>\"");
    if (v["key"] && r.count() == before) {
      if (key.size() < min_key_bytes || key.size() > max_key_bytes)
        r.problem("'" + field("key") + "' must be " + std::to_string(min_key_bytes) + " to " +
                  std::to_string(max_key_bytes) + " bytes, got " + std::to_string(key.size()) +
                  " (make one with: head -c 24 /dev/urandom | base64)");
      else if (!valid_key_text(key))
        r.problem("'" + field("key") + "' must be printable ASCII without spaces");
      else
        e.digest = sha256(key);
    }
    if (v["key_sha256"] && r.count() == before) {
      e.digest = from_hex(key_hex);
      if (e.digest.empty())
        r.problem("'" + field("key_sha256") + "' must be 64 hex digits (sha256sum of the key), got " +
                  std::to_string(key_hex.size()) + " characters");
    }
    if (!v["tenant"])
      r.problem(at + ": needs tenant = \"name\"");
    else if (v["tenant"].is_string() && !valid_tenant(e.tenant))
      r.problem("'" + field("tenant") + "' must be 1 to 64 of A-Z a-z 0-9 . _ -, got " + quote_input(e.tenant));
    if (v["units_per_minute"]) {
      double u = 0;
      const size_t n = r.count();
      r.flt(v["units_per_minute"], field("units_per_minute"), 0.0, 1e15, u, true);
      if (r.count() == n)
        e.units_per_minute = u;
    }
    if (v["max_concurrent"]) {
      int32_t m = 0;
      const size_t n = r.count();
      r.num(v["max_concurrent"], field("max_concurrent"), 1, 1000000, m);
      if (r.count() == n)
        e.max_concurrent = m;
    }
    if (v["priority"]) {
      int32_t p = 0;
      const size_t n = r.count();
      r.num(v["priority"], field("priority"), -1000000, 1000000, p);
      if (r.count() == n)
        e.priority = p;
    }
    if (auto s = v["share_cache_with"]; s) {
      auto* arr = s.as_array();
      if (arr == nullptr) {
        r.problem("'" + field("share_cache_with") + "' must be a list of tenant names");
      } else {
        for (size_t k = 0; k < arr->size(); ++k) {
          auto name = arr->get(k)->value_exact<std::string>();
          if (!name || !valid_tenant(*name))
            r.problem("'" + field("share_cache_with") + "[" + std::to_string(k) + "]' must be a tenant name");
          else
            e.share.push_back(*name);
        }
      }
    }
    if (r.count() == before)
      entries.push_back(std::move(e));
  }
  if (!r.ok())
    return r.error();

  // Across entries: one tenant per key, one value per limit of a tenant,
  // tenants shared with exist.
  std::map<std::string, int64_t> key_line;
  struct tenant_limits {
    stated<double> units;
    stated<int32_t> concurrent;
    stated<int32_t> priority;
  };
  std::map<std::string, tenant_limits> limits;
  auto merge = [&](auto& into, const auto& given, const entry& e, const char* what) {
    if (!given)
      return;
    if (into.value && *into.value != *given) {
      r.problem("line " + std::to_string(e.line) + ": tenant " + quote_input(e.tenant) + " has " + what + " = " +
                toml_reader::number_text(static_cast<double>(*given)) + ", but line " +
                std::to_string(into.line) + " gave it " +
                toml_reader::number_text(static_cast<double>(*into.value)) +
                " (a tenant's limits are the same in each of its keys)");
      return;
    }
    if (!into.value)
      into = {given, e.line};
  };
  for (const auto& e : entries) {
    if (auto [it, fresh] = key_line.emplace(e.digest, e.line); !fresh)
      r.problem("line " + std::to_string(e.line) + ": the same key as line " + std::to_string(it->second) +
                " (each key belongs to one entry)");
    auto& l = limits[e.tenant];
    merge(l.units, e.units_per_minute, e, "units_per_minute");
    merge(l.concurrent, e.max_concurrent, e, "max_concurrent");
    merge(l.priority, e.priority, e, "priority");
  }
  std::vector<std::string> tenant_names;
  for (const auto& [n, _] : limits)
    tenant_names.push_back(n);
  for (const auto& e : entries)
    for (const auto& other : e.share)
      if (!limits.contains(other))
        r.problem("line " + std::to_string(e.line) + ": share_cache_with names " + quote_input(other) +
                  ", which no [[key]] has as its tenant" + did_you_mean(other, tenant_names));
  if (!r.ok())
    return r.error();

  api_key_table table;
  const auto namespaces = cache_namespaces(entries);
  for (const auto& [n, l] : limits) {
    tenant_policy p;
    p.name = n;
    p.units_per_minute = l.units.value;
    p.max_concurrent = l.concurrent.value;
    p.priority = l.priority.value.value_or(0);
    p.cache_namespace = namespaces.at(n);
    table.tenants_.emplace(n, std::move(p));
  }
  for (const auto& e : entries)
    table.digests_.emplace(e.digest, e.tenant);
  return table;
}

caf::expected<api_key_table> api_key_table::load(const std::filesystem::path& path) {
  auto bad = [&](const std::string& why) {
    return caf::make_error(caf::sec::invalid_argument, "API key file " + path.string() + ": " + why);
  };
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0)
    return bad("cannot be read (does it exist?)");
  if (!S_ISREG(sb.st_mode))
    return bad("is not a regular file");
  if (static_cast<uint64_t>(sb.st_size) > max_key_file_bytes)
    return bad("is " + std::to_string(sb.st_size) + " bytes (at most " + std::to_string(max_key_file_bytes) + ")");
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return bad("cannot be opened");
  std::stringstream buf;
  buf << in.rdbuf();
  const auto text = buf.str();
  auto table = parse(text, path.string());
  if (!table)
    return table;
  // Plaintext keys are secrets; digests are not (a key cannot be found
  // from its SHA-256 when it has the 16+ random bytes asked for).
  auto plain = toml::parse(text, path.string());
  bool has_plain = false;
  if (auto* keys = plain["key"].as_array())
    for (const auto& k : *keys)
      if (auto* t = k.as_table(); t && t->contains("key"))
        has_plain = true;
  if (has_plain && (sb.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(sb.st_mode & 07777));
    return bad(std::string{"holds plaintext keys and has mode "} + mode +
               ": group and others may read it; run chmod 600 " + path.string() +
               " (or store key_sha256 digests instead)");
  }
  return table;
}

const tenant_policy* api_key_table::find(std::string_view bearer_key) const {
  const auto digest = sha256(bearer_key);
  // Every digest is compared, whatever matches, so the time says nothing
  // about which key (or how much of one) was right.
  const std::string* tenant = nullptr;
  for (const auto& [d, t] : digests_)
    if (CRYPTO_memcmp(d.data(), digest.data(), digest.size()) == 0)
      tenant = &t;
  if (tenant == nullptr)
    return nullptr;
  auto it = tenants_.find(*tenant);
  return it == tenants_.end() ? nullptr : &it->second;
}

} // namespace tessera::cluster
