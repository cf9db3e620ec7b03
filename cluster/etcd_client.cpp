#include "cluster/etcd_client.hpp"

#include <array>
#include <charconv>

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include "cluster/etcd_http.hpp"
#include "cluster/host_port.hpp"
#include "common/assert.hpp"
#include "common/error.hpp"

namespace tessera::cluster {

namespace {

using json = nlohmann::json;

caf::error bad_url(std::string_view url, const std::string& why) {
  std::string shown{url.substr(0, 200)};
  return caf::make_error(caf::sec::invalid_argument,
                         "etcd endpoint '" + shown + "': " + why + " (write http://host:port, e.g. http://127.0.0.1:2379)");
}

caf::error bad_reply(const etcd_endpoint& ep, const std::string& what) {
  return detail::etcd_error(ep, "unexpected reply: " + what);
}

/// etcd's gateway writes 64-bit numbers as JSON strings ("ID": "123");
/// a number is taken too. Absent: `fallback`.
caf::expected<int64_t> int_field(const json& j, const char* name, int64_t fallback) {
  auto it = j.find(name);
  if (it == j.end())
    return fallback;
  if (it->is_number_integer())
    return it->get<int64_t>();
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc{} && end == s.data() + s.size() && !s.empty())
      return v;
  }
  return caf::make_error(caf::sec::runtime_error, std::string{"field '"} + name + "' is not a 64-bit integer");
}

caf::expected<std::string> bytes_field(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end())
    return std::string{};
  if (!it->is_string())
    return caf::make_error(caf::sec::runtime_error, std::string{"field '"} + name + "' is not a string");
  auto b = detail::base64_decode(it->get_ref<const std::string&>());
  if (!b)
    return caf::make_error(caf::sec::runtime_error, std::string{"field '"} + name + "': " + error_message(b.error()));
  return b;
}

caf::expected<etcd_kv> read_kv(const json& j) {
  if (!j.is_object())
    return caf::make_error(caf::sec::runtime_error, "a key-value is not an object");
  etcd_kv kv;
  auto key = bytes_field(j, "key");
  auto value = bytes_field(j, "value");
  auto lease = int_field(j, "lease", 0);
  auto rev = int_field(j, "mod_revision", 0);
  if (!key)
    return key.error();
  if (!value)
    return value.error();
  if (!lease)
    return lease.error();
  if (!rev)
    return rev.error();
  kv.key = std::move(*key);
  kv.value = std::move(*value);
  kv.lease = *lease;
  kv.mod_revision = *rev;
  return kv;
}

/// The body parsed as a JSON object.
caf::expected<json> object_of(const etcd_endpoint& ep, const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded())
    return bad_reply(ep, "not JSON");
  if (!j.is_object())
    return bad_reply(ep, "not a JSON object");
  return j;
}

constexpr std::string_view b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

} // namespace

namespace detail {

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                       uint32_t(uint8_t(bytes[i + 2]));
    for (int s = 18; s >= 0; s -= 6)
      out += b64[(v >> s) & 63];
  }
  if (const size_t left = bytes.size() - i; left > 0) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (left == 2)
      v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += b64[(v >> 18) & 63];
    out += b64[(v >> 12) & 63];
    out += left == 2 ? b64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

caf::expected<std::string> base64_decode(std::string_view text) {
  auto bad = [] { return caf::make_error(caf::sec::runtime_error, "not base64"); };
  if (text.size() % 4 != 0)
    return bad();
  std::array<int, 256> value{};
  value.fill(-1);
  for (size_t i = 0; i < b64.size(); ++i)
    value[uint8_t(b64[i])] = static_cast<int>(i);
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=')
      return bad();
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = k >= 4 - pad ? 0 : value[uint8_t(text[i + k])];
      if (d < 0)
        return bad();
      v = (v << 6) | uint32_t(d);
    }
    out += char(v >> 16);
    if (pad < 2)
      out += char((v >> 8) & 0xff);
    if (pad < 1)
      out += char(v & 0xff);
  }
  return out;
}

caf::expected<std::vector<etcd_event>> parse_watch_line(std::string_view line) {
  auto bad = [](const std::string& what) { return caf::make_error(caf::sec::runtime_error, "watch: " + what); };
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return bad("a line that is not a JSON object");
  if (auto e = j.find("error"); e != j.end()) {
    std::string msg = e->is_string() ? e->get<std::string>() : e->dump();
    return bad("etcd: " + msg.substr(0, 200));
  }
  auto r = j.find("result");
  if (r == j.end() || !r->is_object())
    return bad("no 'result' object");
  auto compact = int_field(*r, "compact_revision", 0);
  if (!compact)
    return bad(error_message(compact.error()));
  if (*compact > 0)
    return bad("etcd compacted past the watch's revision (" + std::to_string(*compact) + ")");
  if (auto c = r->find("canceled"); c != r->end() && c->is_boolean() && c->get<bool>())
    return bad("etcd cancelled the watch");
  std::vector<etcd_event> out;
  auto evs = r->find("events");
  if (evs == r->end())
    return out;
  if (!evs->is_array())
    return bad("'events' is not an array");
  for (const auto& e : *evs) {
    if (!e.is_object() || !e.contains("kv"))
      return bad("an event without 'kv'");
    etcd_event ev;
    if (auto t = e.find("type"); t != e.end()) {
      if (*t == "DELETE")
        ev.type = etcd_event::kind::del;
      else if (*t != "PUT")
        return bad("an event of unknown type " + t->dump().substr(0, 50));
    }
    auto kv = read_kv(e["kv"]);
    if (!kv)
      return bad(error_message(kv.error()));
    ev.kv = std::move(*kv);
    out.push_back(std::move(ev));
  }
  return out;
}

} // namespace detail

caf::expected<etcd_endpoint> parse_etcd_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (url.starts_with("https://"))
    return bad_url(url, "https is not supported (no TLS client here): run etcd on loopback or a trusted network");
  if (!url.starts_with(scheme))
    return bad_url(url, "it must start with http://");
  auto rest = url.substr(scheme.size());
  if (rest.ends_with('/'))
    rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos)
    return bad_url(url, "a path is not allowed");
  if (rest.find('@') != std::string_view::npos)
    return bad_url(url, "user info is not supported");
  auto hp = parse_host_port(rest, "etcd endpoint", address_family::any);
  if (!hp)
    return bad_url(url, error_message(hp.error()));
  if (hp->port == 0)
    return bad_url(url, "it needs a port other than 0");
  return etcd_endpoint{hp->host, hp->port, std::string{url}};
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

std::string etcd_prefix_end(std::string prefix) {
  // The first key after every key with this prefix; "\0" (every key)
  // when the prefix is all 0xff bytes.
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) != 0xff) {
      prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

etcd_client::etcd_client(etcd_options options) : options_(std::move(options)) {
  TESSERA_ASSERT(!options_.endpoints.empty());
}

etcd_client::~etcd_client() = default;

const etcd_endpoint& etcd_client::endpoint() const {
  return options_.endpoints[current_];
}

caf::expected<std::string> etcd_client::call(const std::string& path, const std::string& body) {
  caf::error last;
  const size_t n = options_.endpoints.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (current_ + k) % n;
    auto reply = detail::etcd_post(options_.endpoints[i], path, body, options_.timeout, options_.max_reply_bytes);
    if (reply) {
      current_ = i;
      return reply;
    }
    last = reply.error();
  }
  return last;
}

caf::expected<int64_t> etcd_client::grant_lease(int64_t ttl_s) {
  auto reply = call("/v3/lease/grant", json{{"TTL", ttl_s}}.dump());
  if (!reply)
    return reply.error();
  auto j = object_of(endpoint(), *reply);
  if (!j)
    return j.error();
  auto id = int_field(*j, "ID", 0);
  if (!id || *id == 0)
    return bad_reply(endpoint(), "a lease grant without an ID");
  return id;
}

caf::expected<int64_t> etcd_client::keep_alive(int64_t lease) {
  // A stream in gRPC; through the gateway one request, one {"result": ...}.
  auto reply = call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  if (!reply)
    return reply.error();
  // A stream's reply may end with a newline (one JSON line per message).
  auto j = object_of(endpoint(), reply->substr(0, reply->find('\n')));
  if (!j)
    return j.error();
  if (auto e = j->find("error"); e != j->end())
    return bad_reply(endpoint(), "keepalive: " + e->dump().substr(0, 200));
  auto r = j->find("result");
  if (r == j->end() || !r->is_object())
    return bad_reply(endpoint(), "a keepalive without 'result'");
  auto ttl = int_field(*r, "TTL", 0); // absent: etcd does not know the lease
  if (!ttl)
    return bad_reply(endpoint(), error_message(ttl.error()));
  return std::max<int64_t>(0, *ttl);
}

caf::error etcd_client::revoke_lease(int64_t lease) {
  auto reply = call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  if (!reply && error_message(reply.error()).find("lease not found") != std::string::npos)
    return {};
  return reply ? caf::error{} : reply.error();
}

caf::error etcd_client::put(const std::string& key, const std::string& value, int64_t lease) {
  json body{{"key", detail::base64_encode(key)}, {"value", detail::base64_encode(value)}};
  if (lease != 0)
    body["lease"] = std::to_string(lease);
  auto reply = call("/v3/kv/put", body.dump());
  if (!reply)
    return reply.error();
  auto j = object_of(endpoint(), *reply);
  return j ? caf::error{} : j.error();
}

caf::expected<std::optional<etcd_kv>> etcd_client::put_if_absent(const std::string& key, const std::string& value,
                                                                 int64_t lease) {
  const auto k = detail::base64_encode(key);
  json put{{"key", k}, {"value", detail::base64_encode(value)}};
  if (lease != 0)
    put["lease"] = std::to_string(lease);
  // etcd's gateway leaves out fields at their default: "result" EQUAL,
  // "succeeded" false.
  json body{{"compare", json::array({json{{"key", k}, {"target", "CREATE"}, {"result", "EQUAL"},
                                          {"create_revision", "0"}}})},
            {"success", json::array({json{{"request_put", put}}})},
            {"failure", json::array({json{{"request_range", json{{"key", k}}}}})}};
  auto reply = call("/v3/kv/txn", body.dump());
  if (!reply)
    return reply.error();
  auto j = object_of(endpoint(), *reply);
  if (!j)
    return j.error();
  if (auto ok = j->find("succeeded"); ok != j->end()) {
    if (!ok->is_boolean())
      return bad_reply(endpoint(), "'succeeded' is not a boolean");
    if (ok->get<bool>())
      return std::optional<etcd_kv>{};
  }
  auto responses = j->find("responses");
  if (responses == j->end() || !responses->is_array() || responses->size() != 1 || !(*responses)[0].is_object())
    return bad_reply(endpoint(), "a failed transaction without its one range response");
  auto range = (*responses)[0].find("response_range");
  if (range == (*responses)[0].end() || !range->is_object())
    return bad_reply(endpoint(), "a failed transaction without 'response_range'");
  auto kvs = range->find("kvs");
  if (kvs == range->end() || !kvs->is_array() || kvs->size() != 1)
    // Gone between the compare and the range: cannot be (one transaction).
    return bad_reply(endpoint(), "a failed put-if-absent whose key is not there");
  auto kv = read_kv((*kvs)[0]);
  if (!kv)
    return bad_reply(endpoint(), error_message(kv.error()));
  return std::optional<etcd_kv>{std::move(*kv)};
}

caf::expected<etcd_range> etcd_client::range_prefix(const std::string& prefix, int64_t limit) {
  json body{{"key", detail::base64_encode(prefix)}, {"range_end", detail::base64_encode(etcd_prefix_end(prefix))}};
  if (limit > 0)
    body["limit"] = std::to_string(limit);
  auto reply = call("/v3/kv/range", body.dump());
  if (!reply)
    return reply.error();
  auto j = object_of(endpoint(), *reply);
  if (!j)
    return j.error();
  etcd_range out;
  auto header = j->find("header");
  if (header == j->end() || !header->is_object())
    return bad_reply(endpoint(), "a range without 'header'");
  auto rev = int_field(*header, "revision", 0);
  if (!rev)
    return bad_reply(endpoint(), error_message(rev.error()));
  out.revision = *rev;
  if (auto more = j->find("more"); more != j->end() && more->is_boolean())
    out.more = more->get<bool>();
  if (auto kvs = j->find("kvs"); kvs != j->end()) {
    if (!kvs->is_array())
      return bad_reply(endpoint(), "'kvs' is not an array");
    for (const auto& e : *kvs) {
      auto kv = read_kv(e);
      if (!kv)
        return bad_reply(endpoint(), error_message(kv.error()));
      out.kvs.push_back(std::move(*kv));
    }
  }
  return out;
}

caf::expected<int64_t> etcd_client::delete_key(const std::string& key) {
  auto reply = call("/v3/kv/deleterange", json{{"key", detail::base64_encode(key)}}.dump());
  if (!reply)
    return reply.error();
  auto j = object_of(endpoint(), *reply);
  if (!j)
    return j.error();
  auto deleted = int_field(*j, "deleted", 0);
  if (!deleted)
    return bad_reply(endpoint(), error_message(deleted.error()));
  return deleted;
}

// -- watch -------------------------------------------------------------------

class etcd_watch::impl {
public:
  impl(const etcd_endpoint& ep, size_t max_line) : http(ep, max_line), max_line(max_line) {}
  detail::etcd_http http;
  size_t max_line;
  std::string pending; // bytes after the last complete line
};

etcd_watch::etcd_watch(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
etcd_watch::~etcd_watch() = default;

caf::expected<std::unique_ptr<etcd_watch>> etcd_watch::open(const etcd_options& options, const std::string& prefix,
                                                            int64_t start_revision) {
  json create{{"key", detail::base64_encode(prefix)}, {"range_end", detail::base64_encode(etcd_prefix_end(prefix))}};
  if (start_revision > 0)
    create["start_revision"] = std::to_string(start_revision);
  const std::string body = json{{"create_request", create}}.dump();
  caf::error last;
  for (const auto& ep : options.endpoints) {
    auto p = std::make_unique<impl>(ep, options.max_reply_bytes);
    const auto deadline = detail::etcd_clock::now() + options.timeout;
    if (auto err = p->http.start("/v3/watch", body, deadline)) {
      last = err;
      continue;
    }
    if (p->http.status() != 200) {
      auto text = p->http.read_body(deadline);
      last = detail::etcd_error(ep, "/v3/watch: HTTP " + std::to_string(p->http.status()) +
                                      (text ? ": " + text->substr(0, 200) : std::string{}));
      continue;
    }
    return std::unique_ptr<etcd_watch>(new etcd_watch(std::move(p)));
  }
  return last;
}

caf::expected<std::vector<etcd_event>> etcd_watch::next(std::chrono::milliseconds wait) {
  auto& m = *impl_;
  const auto deadline = detail::etcd_clock::now() + wait;
  std::vector<etcd_event> out;
  for (;;) {
    // Every complete line first: a watch response per line.
    size_t nl;
    while ((nl = m.pending.find('\n')) != std::string::npos) {
      std::string line = m.pending.substr(0, nl);
      m.pending.erase(0, nl + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos)
        continue;
      auto evs = detail::parse_watch_line(line);
      if (!evs)
        return detail::etcd_error(m.http.endpoint(), error_message(evs.error()));
      for (auto& e : *evs)
        out.push_back(std::move(e));
    }
    if (m.pending.size() > m.max_line)
      return detail::etcd_error(m.http.endpoint(),
                                "watch: a line over " + std::to_string(m.max_line) + " bytes");
    if (!out.empty() || detail::etcd_clock::now() >= deadline)
      return out;
    const size_t before = m.pending.size();
    if (auto err = m.http.read_some(m.pending, deadline))
      return err;
    if (m.pending.size() == before)
      return out; // quiet until the deadline
  }
}

} // namespace tessera::cluster
