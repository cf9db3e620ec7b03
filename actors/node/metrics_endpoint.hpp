#pragma once
/// @file
/// A node's own GET /metrics (internal to actors/node): nodes without the
/// frontend (prefill, decode) serve their series (workers' KV blocks,
/// transfers, restarts) here, so every node of a cluster is a Prometheus
/// scrape target; the frontend node has /metrics on its API.

#include <functional>
#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "actors/frontend/http_server.hpp"
#include "cluster/metrics.hpp"

namespace tessera::actors::detail {

/// Sets a node's fault plan from its text form (transport/faults); the
/// error names what is wrong with the text.
using fault_control = std::function<caf::error(const std::string& plan)>;

/// Listens on host:port; GET /metrics renders `metrics`, GET /live is 200;
/// with `faults` (a node with fault injection on), POST /admin/faults
/// {"plan": "<fault_plan text>"} with `Authorization: Bearer <admin_key>`
/// sets the node's plan ("" clears it and heals every partition): 200, 401
/// without the key, or 400 naming the problem; anything else 404. Errors:
/// the HTTP server's (port in use); `faults` without an `admin_key`
/// (caf::sec::invalid_argument: a fault endpoint anyone could call would
/// let anyone on the network cut the node off).
[[nodiscard]] caf::expected<std::unique_ptr<frontend::http_server>>
start_metrics_endpoint(const std::string& host, uint16_t port,
                       std::shared_ptr<const cluster::metrics_registry> metrics, fault_control faults = {},
                       std::string admin_key = {});

} // namespace tessera::actors::detail
