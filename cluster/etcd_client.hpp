#pragma once
/// @file
/// A small etcd v3 client over etcd's JSON gateway (HTTP/1.1 on its client
/// port; keys and values travel base64 in JSON): leases, put, a prefix's
/// range, delete, and a prefix watch as a stream. Enough for cluster
/// membership (etcd_membership.hpp), nothing more.
///
/// Everything etcd answers is untrusted input: a reply's headers are at
/// most 16 KiB and its body at most etcd_options::max_reply_bytes, a watch
/// line at most max_reply_bytes; JSON that does not parse, a field of the
/// wrong type, bad base64 or a gateway error ({"error": ...}) is an error
/// value naming the endpoint, never a crash. Every call has a deadline
/// (etcd_options::timeout). With several endpoints a call tries each in
/// turn, starting with the one that answered last.
///
/// Not thread-safe: one client (or watch) per thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace tessera::cluster {

/// An etcd client URL, parsed.
struct etcd_endpoint {
  std::string host;
  uint16_t port = 0;
  /// As written ("http://127.0.0.1:2379"), for messages.
  std::string url;
};

/// Parses "http://host:port" (a trailing '/' allowed). Errors
/// (caf::sec::invalid_argument) name the URL: https (no TLS here), no port,
/// a path, user info, an empty host. Does not resolve.
[[nodiscard]] caf::expected<etcd_endpoint> parse_etcd_url(std::string_view url);

/// Whether `host` is a loopback name or address (localhost, 127.x.x.x,
/// ::1): plain http to anything else crosses a network unencrypted.
[[nodiscard]] bool is_loopback_host(std::string_view host);

/// How a client talks to etcd.
struct etcd_options {
  /// Tried in order; at least one.
  std::vector<etcd_endpoint> endpoints;
  /// Deadline of one call on one endpoint (connect, send, reply). Default: 2 s.
  std::chrono::milliseconds timeout{2000};
  /// Most bytes of one reply body or one watch line. Default: 4 MiB.
  size_t max_reply_bytes = size_t{4} << 20;
};

/// A key and its value, as etcd holds them.
struct etcd_kv {
  std::string key;
  std::string value;
  /// The lease it is attached to; 0: none.
  int64_t lease = 0;
  int64_t mod_revision = 0;
};

/// A range's keys and the store's revision it was read at.
struct etcd_range {
  std::vector<etcd_kv> kvs;
  int64_t revision = 0;
  /// etcd had more keys than the limit asked for.
  bool more = false;
};

/// One change a watch saw.
struct etcd_event {
  enum class kind { put, del };
  kind type = kind::put;
  /// For a delete only key and mod_revision are set.
  etcd_kv kv;
};

/// The end of the range that holds every key starting with `prefix`
/// (etcd's range_end: the prefix with its last byte incremented).
[[nodiscard]] std::string etcd_prefix_end(std::string prefix);

/// Unary calls on etcd's gateway (/v3/lease/*, /v3/kv/*).
class etcd_client {
public:
  explicit etcd_client(etcd_options options);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  /// A lease of `ttl_s` seconds; its id.
  [[nodiscard]] caf::expected<int64_t> grant_lease(int64_t ttl_s);
  /// Renews `lease` once; the TTL it has now, 0 when etcd no longer knows
  /// it (expired or revoked: grant a new one).
  [[nodiscard]] caf::expected<int64_t> keep_alive(int64_t lease);
  /// Ends `lease` and deletes its keys; a lease etcd does not know is no
  /// error (it ended already).
  [[nodiscard]] caf::error revoke_lease(int64_t lease);
  /// Puts `key` = `value`, attached to `lease` (0: none).
  [[nodiscard]] caf::error put(const std::string& key, const std::string& value, int64_t lease = 0);
  /// Puts `key` = `value` on `lease` only if `key` does not exist (one
  /// transaction: compare its create revision with 0). nullopt: put; else
  /// the entry that is there (nothing was written).
  [[nodiscard]] caf::expected<std::optional<etcd_kv>> put_if_absent(const std::string& key, const std::string& value,
                                                                    int64_t lease);
  /// Every key starting with `prefix`, at most `limit` of them (0: no limit).
  [[nodiscard]] caf::expected<etcd_range> range_prefix(const std::string& prefix, int64_t limit = 0);
  /// Deletes `key`; how many keys went (0 or 1).
  [[nodiscard]] caf::expected<int64_t> delete_key(const std::string& key);

  /// The endpoint the last call used.
  [[nodiscard]] const etcd_endpoint& endpoint() const;

private:
  [[nodiscard]] caf::expected<std::string> call(const std::string& path, const std::string& body);
  etcd_options options_;
  size_t current_ = 0;
};

/// A watch on every key under a prefix: one streaming POST /v3/watch.
/// Events come in etcd's order. The stream ends (an error from next) when
/// etcd goes away, cancels the watch or compacted past its start
/// revision: the caller reads the range again and opens a new watch.
class etcd_watch {
public:
  /// Opens the stream on the first endpoint of `options` that answers,
  /// from `start_revision` (0: from now). Errors: every endpoint's
  /// connection failed, or the gateway refused the watch.
  [[nodiscard]] static caf::expected<std::unique_ptr<etcd_watch>>
  open(const etcd_options& options, const std::string& prefix, int64_t start_revision);
  ~etcd_watch();
  etcd_watch(const etcd_watch&) = delete;
  etcd_watch& operator=(const etcd_watch&) = delete;

  /// Waits at most `wait` for events; none: an empty vector (etcd is
  /// quiet). Errors: the stream ended, broke, grew a line over
  /// max_reply_bytes, or carried something that is not a watch response.
  [[nodiscard]] caf::expected<std::vector<etcd_event>> next(std::chrono::milliseconds wait);

  class impl;

private:
  explicit etcd_watch(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

namespace detail {
/// Base64 (RFC 4648, with padding) as etcd's gateway writes bytes.
[[nodiscard]] std::string base64_encode(std::string_view bytes);
/// The bytes of `text`; nullopt-like error for anything but canonical base64.
[[nodiscard]] caf::expected<std::string> base64_decode(std::string_view text);
/// One line of a watch stream: its events. Errors: not JSON, a gateway
/// error, a cancelled or compacted watch, a field of the wrong type.
[[nodiscard]] caf::expected<std::vector<etcd_event>> parse_watch_line(std::string_view line);
} // namespace detail

} // namespace tessera::cluster
