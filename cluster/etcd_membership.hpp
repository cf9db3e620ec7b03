#pragma once
/// @file
/// Cluster membership through etcd (membership = "etcd"): a node registers
/// its entry and learns everyone else's.
///
/// Keys: `<prefix><node id>` = the node's [[node]] table as TOML text
/// (cluster_config.hpp, node_entry_text), attached to a lease of ttl_s
/// seconds that this node renews every ttl_s / 3.
///
///   start --grant + put--> registered --keepalive every TTL/3--> registered
///     registered --keepalive: lease unknown (it lapsed)--> grant + put again
///     registered --etcd unreachable--> retry with backoff (the key lapses
///                   after TTL; peers drop the node; it puts itself back)
///     ~etcd_membership --revoke--> gone (peers see the delete at once)
///
/// Watch: the prefix is read (range) and then watched from the next
/// revision; every change becomes joined(node) or left(id). A broken
/// watch (etcd restarted, compaction) is reopened with backoff after a
/// fresh range, whose difference from what was known becomes events, so
/// none is lost. Entries are untrusted: each is read with
/// read_node_entry (the config reader's checks), its id must equal its
/// key's last part, and a bad one counts as absent (logged once per
/// revision). At worst a forged entry makes a node dial a wrong address:
/// the cluster secret's handshake still authenticates every peer.
///
/// Thread-safety: events run on the watch thread, one at a time; members()
/// may be called from any thread.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "cluster/cluster_config.hpp"
#include "cluster/etcd_client.hpp"

namespace tessera::cluster {

/// How a node takes part.
struct membership_options {
  etcd_options etcd;
  /// The cluster's keys start with it ("/tessera/cluster/").
  std::string prefix;
  /// The lease's TTL, seconds. Default: 5.
  int64_t ttl_s = 5;
  /// This node's entry.
  node_spec self;
  /// Retry backoff after a failed etcd call, doubling from min to max.
  /// Defaults: 100 ms, 2 s.
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{2000};
  /// Most nodes read from the prefix. Default: 4096.
  int64_t max_members = 4096;
};

/// What the node does as others come and go (on the watch thread).
struct membership_events {
  /// Node `n` is registered: new, or its entry changed.
  std::function<void(const node_spec& n)> joined;
  /// Node `id` is gone: its lease lapsed or was revoked, its key was
  /// deleted, or its entry no longer reads.
  std::function<void(const std::string& id)> left;
};

/// A node's registration and its view of the others. This node itself is
/// never reported.
class etcd_membership {
public:
  /// Registers `o.self` (grant + put, once, before returning) and starts
  /// the keep-alive and watch threads. Errors: etcd unreachable at every
  /// endpoint, or refusing the grant or put.
  [[nodiscard]] static caf::expected<std::unique_ptr<etcd_membership>> start(membership_options o,
                                                                              membership_events events);
  /// Stops both threads, then revokes the lease (this node's key goes).
  ~etcd_membership();
  etcd_membership(const etcd_membership&) = delete;
  etcd_membership& operator=(const etcd_membership&) = delete;

  /// The other nodes registered now, by id.
  [[nodiscard]] std::vector<node_spec> members() const;

  class impl;

private:
  explicit etcd_membership(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace tessera::cluster
