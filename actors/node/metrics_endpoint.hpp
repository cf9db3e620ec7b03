#pragma once
/// @file
/// A node's own GET /metrics (internal to actors/node): nodes without the
/// frontend (prefill, decode) serve their series (workers' KV blocks,
/// transfers, restarts) here, so every node of a cluster is a Prometheus
/// scrape target; the frontend node has /metrics on its API.

#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "actors/frontend/http_server.hpp"
#include "cluster/metrics.hpp"

namespace tessera::actors::detail {

/// Listens on host:port; GET /metrics renders `metrics`, GET /live is 200,
/// anything else 404. Errors: the HTTP server's (port in use).
[[nodiscard]] caf::expected<std::unique_ptr<frontend::http_server>>
start_metrics_endpoint(const std::string& host, uint16_t port,
                       std::shared_ptr<const cluster::metrics_registry> metrics);

} // namespace tessera::actors::detail
