#pragma once
/// @file
/// Where a rack's nodes run: each node's id, host, roles, transport port and
/// GPU (placement by GPU count, or the hosts' own roles), and the cluster
/// config (cluster/cluster_config.hpp) every node of it reads, checked by
/// parsing it back with the real parser.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "launch/rack.hpp"

namespace tessera::launch {

/// One node of the plan.
struct planned_node {
  /// "front", "prefill-0", "decode-1", ...
  std::string id;
  /// Index into launch_plan::hosts.
  size_t host = 0;
  /// The cluster config's roles ("frontend", "router" for the frontend).
  std::vector<std::string> roles;
  /// Its transport port (ports_base + 1 + its index).
  uint16_t port = 0;
  /// The GPU it is given (CUDA_VISIBLE_DEVICES); -1: none.
  int gpu = -1;
};

/// A rack's nodes on its hosts.
struct launch_plan {
  rack spec;
  /// The rack's hosts, or, for a Slurm placement without [[host]],
  /// stand-ins named slurm-host-<k> whose names the batch script replaces
  /// with the allocation's (SLURM_JOB_NODELIST).
  std::vector<rack_host> hosts;
  bool hosts_from_allocation = false;
  /// The frontend node first.
  std::vector<planned_node> nodes;
  /// The frontend's HTTP port (ports_base).
  uint16_t http_port = 0;

  [[nodiscard]] const planned_node& frontend() const { return nodes.front(); }
  [[nodiscard]] const rack_host& host_of(const planned_node& n) const { return hosts[n.host]; }
  /// host:port of a node's transport.
  [[nodiscard]] std::string address(const planned_node& n) const;
  /// The nodes on host `h`, in plan order.
  [[nodiscard]] std::vector<const planned_node*> nodes_on(size_t h) const;
};

/// Places the rack's nodes. Errors (caf::sec::invalid_argument): more
/// worker nodes than GPUs, ports past 65535.
[[nodiscard]] caf::expected<launch_plan> make_plan(const rack& r);

/// The cluster config of the plan, `secret_path` its cluster_secret_file
/// ("" for none), parsed back with cluster::read_cluster_config: an error
/// carries the parser's problems.
[[nodiscard]] caf::expected<std::string> cluster_config_text(const launch_plan& p, const std::string& secret_path);

/// The plan as a table: node, host, address, roles, GPU; and the frontend's URL.
[[nodiscard]] std::string plan_text(const launch_plan& p, const std::string& launcher);

} // namespace tessera::launch
