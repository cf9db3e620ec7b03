#pragma once
/// @file
/// Reading a running server's Prometheus text (GET /metrics) from a
/// benchmark: the series of one metric, by the value of one label. `bench
/// trace` reads `tessera_engine_busy_seconds_total` by `worker` before and
/// after a replay to report how busy each worker's engine was.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "bench/http_client.hpp"

namespace tessera::bench {

/// The series of `name` in `text` (a Prometheus text exposition), keyed by
/// the value of their label `label`; series sharing that value are summed
/// (tessera_kvstore_fetch_total by `outcome`: over every worker); series
/// without that label are left out. Only plain `name{...} value` lines
/// count (not name_bucket etc.). An empty `label` sums every series of
/// `name`, labelled or not, under the key "" (a counter without labels:
/// tessera_router_kv_admission_waits_total).
[[nodiscard]] std::map<std::string, double> metric_by_label(const std::string& text, const std::string& name,
                                                             const std::string& label);

/// GET /metrics at `ep` and metric_by_label on it. Errors: http_fetch's, or
/// a status other than 200 (caf::sec::runtime_error naming it).
[[nodiscard]] caf::expected<std::map<std::string, double>>
scrape_by_label(const http_endpoint& ep, const std::string& name, const std::string& label,
                std::chrono::milliseconds timeout = std::chrono::seconds{10});

/// A server's /metrics and the other endpoints of its cluster (the nodes
/// whose workers are not on the frontend's node: their series are on
/// their own `metrics` endpoint, cluster_config.hpp).
struct metrics_endpoints {
  http_endpoint server;
  std::vector<http_endpoint> nodes;
};

/// scrape_by_label over the server and every node, merged. With
/// `per_node` (a label naming something a node owns: `worker`, whose
/// names repeat across nodes), a node's keys are prefixed with its
/// "host:port/"; without (`outcome`, `role`), values of one key are
/// summed over the endpoints. An endpoint that does not answer is left
/// out; the result is an error only when none answered.
[[nodiscard]] caf::expected<std::map<std::string, double>>
scrape_cluster(const metrics_endpoints& eps, const std::string& name, const std::string& label, bool per_node,
               std::chrono::milliseconds timeout = std::chrono::seconds{10});

} // namespace tessera::bench
