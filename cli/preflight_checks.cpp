#include "cli/preflight_checks.hpp"

#include <algorithm>
#include <fstream>

#include <caf/sec.hpp>
#include <set>

#include <nlohmann/json.hpp>

#include "cluster/host_port.hpp"
#include "cluster/nearest_name.hpp"
#include "cluster/net_probe.hpp"
#include "common/error.hpp"
#include "engine/model_config.hpp"
#include "engine/safetensors.hpp"

namespace tessera::cli {

namespace fs = std::filesystem;
using cluster::preflight_report;

namespace {

/// Largest model.safetensors.index.json read (the engine's loader reads
/// the same file whole).
constexpr uintmax_t max_index_bytes = uintmax_t{64} << 20;

/// The shard files model.safetensors.index.json names, or a problem.
caf::expected<std::set<std::string>> index_shards(const fs::path& index) {
  auto bad = [&](const std::string& what) {
    return caf::make_error(caf::sec::invalid_argument, index.string() + ": " + what);
  };
  std::error_code ec;
  const auto size = fs::file_size(index, ec);
  if (ec)
    return bad("cannot read: " + ec.message());
  if (size > max_index_bytes)
    return bad("larger than " + std::to_string(max_index_bytes) + " bytes");
  std::ifstream in{index, std::ios::binary};
  auto doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object())
    return bad("not JSON with a \"weight_map\" object");
  std::set<std::string> shards;
  for (const auto& [name, file] : doc["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
      return bad("weight_map entry " + cluster::quote_input(name) + " does not name a file in the folder");
    shards.insert(file.get<std::string>());
  }
  if (shards.empty())
    return bad("the weight_map is empty");
  return shards;
}

std::string strip_prefix(const std::string& problem, const std::string& file) {
  const std::string prefix = file + ": ";
  return problem.starts_with(prefix) ? problem.substr(prefix.size()) : problem;
}

} // namespace

void check_model_folder(preflight_report& report, const std::string& node, const std::string& subject,
                        const fs::path& dir, engine::backend_kind kind) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    report.fail(node, "model", subject,
                dir.string() + (fs::exists(dir, ec) ? " is not a folder" : " does not exist") +
                  ": give a Hugging Face model folder (config.json, a tokenizer, model.safetensors), or make a "
                  "test one with: tessera model init --out " + dir.string());
    return;
  }
  const size_t failures = report.failures();
  std::string summary;
  auto cfg = engine::load_model_config(dir);
  if (!cfg)
    report.fail(node, "model", subject, error_message(cfg.error()));
  else
    summary = std::to_string(cfg->parameter_count() / 1'000'000) + "M parameters";
  if (!fs::exists(dir / "tokenizer.json", ec) && !fs::exists(dir / "tokenizer.model", ec))
    report.fail(node, "model", subject,
                "no tokenizer.json or tokenizer.model in " + dir.string() + ": copy the model's tokenizer there");
  if (kind == engine::backend_kind::cpu) {
    const auto single = dir / "model.safetensors";
    const auto index = dir / "model.safetensors.index.json";
    std::set<std::string> files;
    if (fs::exists(single, ec)) {
      files.insert("model.safetensors");
    } else if (fs::exists(index, ec)) {
      auto shards = index_shards(index);
      if (!shards)
        report.fail(node, "model", subject, error_message(shards.error()));
      else
        files = std::move(*shards);
    } else {
      report.fail(node, "model", subject,
                  "no model.safetensors or model.safetensors.index.json in " + dir.string() +
                    ": the cpu engine needs the weights (a config-only folder runs with the sim engine)");
    }
    for (const auto& f : files) {
      // Maps the file and validates its header against its size: every
      // tensor's dtype, shape and offsets. No tensor byte is read.
      auto st = engine::safetensors_file::open(dir / f);
      if (!st)
        report.fail(node, "model", subject, error_message(st.error()));
    }
    if (!files.empty())
      summary += (summary.empty() ? "" : ", ") + std::to_string(files.size()) + " weight file" +
                 (files.size() == 1 ? "" : "s");
  }
  if (report.failures() == failures)
    report.ok(node, "model", subject, summary + (summary.empty() ? "" : ", ") + "tokenizer present");
}

cluster::preflight_report serve_preflight(const serve_preflight_input& in) {
  preflight_report report;
  cluster::check_listen(report, "", "--host/--port " + cluster::join_host_port(in.host, in.port), in.host, in.port);
  if (!in.kv_store_disk_dir.empty()) {
    if (in.kv_store_host_mb == 0)
      report.warn("", "disk", "--kv-store-disk-dir " + in.kv_store_disk_dir,
                  "unused: --kv-store-host-mb 0 turns the kv store off (give it host memory to use a disk tier)");
    else
      cluster::check_disk_tier(report, "", "--kv-store-disk-dir", in.kv_store_disk_dir, in.kv_store_disk_mb << 20,
                               "--kv-store-disk-mb");
  }
  if (!in.model.empty())
    check_model_folder(report, "", "--model " + in.model, in.model, in.kind);
  return report;
}

bool report_config(preflight_report& report, const std::string& file, const cluster::config_reading& reading) {
  for (const auto& p : reading.problems)
    report.fail("", "config", file, strip_prefix(p, file));
  if (!reading.problems.empty())
    return false;
  const auto& c = reading.config;
  report.ok("", "config", file,
            std::to_string(c.nodes.size()) + (c.nodes.size() == 1 ? " node" : " nodes") + ", engine " + c.engine +
              ", transport " + c.transport + ", addresses resolved");
  return true;
}

std::string find_node(preflight_report& report, const cluster::cluster_config& c, const std::string& given) {
  if (c.node(given) != nullptr)
    return given;
  std::vector<std::string> ids;
  std::string list;
  for (const auto& n : c.nodes) {
    ids.push_back(n.id);
    list += (list.empty() ? "" : ", ") + n.id;
  }
  report.fail("", "config", "--node " + given,
              "the config has no node " + cluster::quote_input(given) + cluster::did_you_mean(given, ids) +
                " (its nodes: " + list + ")");
  return {};
}

void check_cluster_wide(preflight_report& report, const cluster::cluster_config& c, bool insecure) {
  if (!c.cluster_secret_file.empty())
    cluster::check_secret_file(report, "", "cluster_secret_file " + c.cluster_secret_file, c.cluster_secret_file);
  else if (c.nodes.size() > 1 && !insecure)
    report.fail("", "secret", "cluster_secret_file",
                "a cluster of several nodes needs a cluster secret: set cluster_secret_file in the config (or "
                "--cluster-secret-file; make one with: umask 077; head -c 32 /dev/urandom | base64 > "
                "cluster.secret, and copy it to every host), or pass --insecure to run without one");
  else
    report.skip("", "secret", "cluster_secret_file", c.nodes.size() > 1 ? "none (--insecure)" : "none (one node)");
  const auto kind = engine::parse_backend_kind(c.engine).value_or(engine::backend_kind::cpu);
  if (c.model.empty())
    report.skip("", "model", "model", "the built-in demo model");
  else
    check_model_folder(report, "", "model " + c.model, c.model, kind);
}

void check_node_resources(preflight_report& report, const cluster::cluster_config& c, const cluster::node_spec& n,
                          bool bind_ports) {
  if (bind_ports) {
    if (auto a = cluster::parse_host_port(n.address, "address", cluster::address_family::ipv4_only))
      cluster::check_listen(report, n.id, "address " + n.address, a->host, a->port);
    if (n.has("frontend"))
      cluster::check_listen(report, n.id, "http " + cluster::join_host_port(n.http_host, n.http_port), n.http_host,
                            n.http_port);
    if (n.metrics_port != 0)
      cluster::check_listen(report, n.id, "metrics " + cluster::join_host_port(n.metrics_host, n.metrics_port),
                            n.metrics_host, n.metrics_port);
  }
  if (n.has_workers() && c.kvstore_host_mb > 0 && !c.kvstore_disk_dir.empty())
    cluster::check_disk_tier(report, n.id, "kvstore_disk_dir", fs::path{c.kvstore_disk_dir} / n.id,
                             c.kvstore_disk_mb << 20, "kvstore_disk_mb");
}

namespace {

/// A JSON value as short text: strings bare, the rest dumped.
std::string json_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

/// GET /health and /v1/models of a running frontend; returns /health's
/// JSON (null when there is none) for the per-node worker states.
nlohmann::json probe_frontend(preflight_report& report, const cluster::node_spec& n,
                              std::chrono::milliseconds timeout) {
  const auto where = cluster::join_host_port(n.http_host, n.http_port);
  const std::string subject = "GET http://" + where + "/health";
  nlohmann::json j;
  auto health = cluster::http_get(n.http_host, n.http_port, "/health", timeout);
  if (!health) {
    report.fail(n.id, "health", subject, error_message(health.error()));
  } else {
    j = nlohmann::json::parse(health->body, nullptr, false);
    if (j.is_discarded())
      j = nullptr;
    std::string detail = "HTTP " + std::to_string(health->status);
    std::string status;
    if (j.is_object()) {
      status = j.value("status", "");
      for (const char* key : {"status", "workers", "version", "role"})
        if (j.contains(key))
          detail += std::string{", "} + key + " " + json_text(j[key]);
      if (j.contains("reason") && j["reason"].is_string() && !j["reason"].get<std::string>().empty())
        detail += ": " + cluster::quote_input(j["reason"].get<std::string>());
      if (j.contains("kv_store"))
        detail += "; kv_store " + cluster::quote_input(j["kv_store"].dump());
    } else {
      detail += ": " + cluster::quote_input(health->body);
    }
    if (health->status != 200)
      report.fail(n.id, "health", subject,
                  detail + " (not serving: starting, draining, or no healthy worker; see the nodes' logs)");
    else if (status == "degraded" || j.contains("kv_store"))
      report.warn(n.id, "health", subject, detail + " (serving, but not every part is healthy)");
    else
      report.ok(n.id, "health", subject, detail);
  }
  auto models = cluster::http_get(n.http_host, n.http_port, "/v1/models", timeout);
  if (!models) {
    report.fail(n.id, "models", "GET http://" + where + "/v1/models", error_message(models.error()));
    return j;
  }
  const auto list = nlohmann::json::parse(models->body, nullptr, false);
  std::string ids;
  if (list.is_object() && list.contains("data") && list["data"].is_array())
    for (const auto& m : list["data"])
      if (m.is_object() && m.contains("id") && m["id"].is_string())
        ids += (ids.empty() ? "" : ", ") + m["id"].get<std::string>();
  if (models->status == 200 && !ids.empty())
    report.ok(n.id, "models", "GET http://" + where + "/v1/models", "serves " + ids);
  else
    report.fail(n.id, "models", "GET http://" + where + "/v1/models",
                "HTTP " + std::to_string(models->status) + ", no model listed: " + cluster::quote_input(models->body));
  return j;
}

/// The states of node `n`'s workers in the frontend's /health (its
/// "worker_states": the router's judgement from heartbeats, node_down and
/// canaries), as one result for the node.
void report_workers(preflight_report& report, const cluster::node_spec& n, const nlohmann::json& health) {
  if (!health.is_object() || !health.contains("worker_states") || !health["worker_states"].is_array())
    return; // a frontend that does not say
  std::string healthy, unhealthy;
  for (const auto& w : health["worker_states"]) {
    if (!w.is_object() || w.value("node", "") != n.id)
      continue;
    const std::string name = w.value("name", "?") + " (" + w.value("role", "?") + ")";
    if (w.value("state", "") == "healthy")
      healthy += (healthy.empty() ? "" : ", ") + name;
    else
      unhealthy += (unhealthy.empty() ? "" : "; ") + name + " " + w.value("state", "?") + ": " +
                   cluster::quote_input(w.value("reason", ""));
  }
  const std::string subject = "workers of node " + n.id;
  if (!unhealthy.empty())
    report.warn(n.id, "workers", subject, unhealthy + (healthy.empty() ? "" : "; healthy: " + healthy));
  else if (healthy.empty())
    report.warn(n.id, "workers", subject, "none of its workers has joined the router (see its log)");
  else
    report.ok(n.id, "workers", subject, "healthy: " + healthy);
}

} // namespace

cluster::preflight_report check_cluster(const cluster_check_options& o) {
  preflight_report report;
  const auto reading = cluster::read_cluster_config_file(o.config);
  // A config with problems is still checked as far as it read.
  const bool config_ok = report_config(report, o.config, reading);
  const auto& c = reading.config;
  std::vector<const cluster::node_spec*> nodes;
  if (!o.node.empty()) {
    if (c.node(o.node) != nullptr)
      nodes.push_back(c.node(o.node));
    else if (config_ok)
      (void) find_node(report, c, o.node);
  } else {
    for (const auto& n : c.nodes)
      nodes.push_back(&n);
  }
  check_cluster_wide(report, c, false);
  // Which nodes answer on their transport address: all of them is a
  // running cluster, none is one not started yet.
  struct probe {
    const cluster::node_spec* node;
    cluster::host_port at;
    bool local = false;
    caf::error unreachable;
  };
  std::vector<probe> probes;
  size_t running = 0;
  for (const auto* n : nodes) {
    probe p{n, *cluster::parse_host_port(n->address, "address", cluster::address_family::ipv4_only)};
    p.local = cluster::is_local_host(p.at.host);
    p.unreachable = cluster::try_connect(p.at.host, p.at.port, o.timeout);
    running += p.unreachable ? 0 : 1;
    probes.push_back(std::move(p));
  }
  // The frontend first: its /health has every node's worker states.
  std::stable_partition(probes.begin(), probes.end(), [](const probe& p) { return p.node->has("frontend"); });
  nlohmann::json health;
  for (const auto& p : probes) {
    const auto& n = *p.node;
    const std::string subject = "address " + n.address;
    if (!p.unreachable) {
      std::string roles;
      for (const auto& r : n.roles)
        roles += (roles.empty() ? "" : "+") + r;
      if (o.before_start)
        report.fail(n.id, "reachable", subject,
                    "already running (it accepts connections): stop it first (scripts/cluster.sh CONFIG stop), "
                    "or free the port");
      else
        report.ok(n.id, "reachable", subject, "running (" + roles + ")");
      if (n.has("frontend") && !o.before_start)
        health = probe_frontend(report, n, o.timeout);
      if (n.has_workers() && !o.before_start)
        report_workers(report, n, health);
    } else if (running > 0 && !o.before_start) {
      report.fail(n.id, "reachable", subject,
                  "not reachable while other nodes are: " + error_message(p.unreachable) +
                    " (start it, or see its log)");
    } else {
      report.skip(n.id, "reachable", subject, "not running");
    }
    if (!p.local) {
      report.skip(n.id, "port", subject, "on another host: its ports and disk are checked there");
      continue;
    }
    // A running node holds its own ports: bind only where nothing answers.
    check_node_resources(report, c, n, static_cast<bool>(p.unreachable));
  }
  // Nodes of this machine whose disk tiers share a disk need room together.
  std::vector<cluster::disk_tier_use> tiers;
  for (const auto& p : probes)
    if (p.local && p.node->has_workers() && c.kvstore_host_mb > 0 && !c.kvstore_disk_dir.empty())
      tiers.push_back({p.node->id, fs::path{c.kvstore_disk_dir} / p.node->id, c.kvstore_disk_mb << 20});
  cluster::check_shared_disks(report, tiers, "kvstore_disk_mb");
  return report;
}

} // namespace tessera::cli
