// `tessera node`: one node of a multi-process cluster, from a TOML config
// (configs/*.toml) shared by all of its nodes.
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <string>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/node/actor_system_tuning.hpp"
#include "actors/node/cluster_node.hpp"
#include "cli/commands.hpp"
#include "cli/demo_model.hpp"
#include "cli/preflight_checks.hpp"
#include "cluster/cluster_config.hpp"
#include "cluster/preflight.hpp"
#include "common/error.hpp"

namespace tessera::cli {

namespace {

struct node_args {
  std::string config;
  std::string node;
  std::string role;
  // A node the file does not list (membership = "etcd"): its entry.
  std::string address;
  std::vector<std::string> roles;
  int64_t workers = 1;
  std::string metrics;
  std::string secret_file;
  std::string admin_key_file;
  std::string api_keys_file;
  bool protect_metrics = false;
  bool insecure = false;
  bool fault_injection = false;
  double drain_timeout_s = 10.0;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "tessera node: %s\n", what.c_str());
  return 1;
}

/// A node the file does not list, from --address and --roles: with etcd
/// only, never one the file lists (one source for each node's entry),
/// and only as a worker node (a frontend and its router are in the file,
/// where every worker node finds the router at start); checked as the
/// file's nodes are. Added to `cfg` so the rest of the start is the same.
void add_flag_node(cluster::preflight_report& report, cluster::cluster_config& cfg, const node_args& a,
                   bool config_ok) {
  if (!config_ok)
    return;
  if (cfg.membership != "etcd") {
    report.fail(a.node, "config", "--address/--roles",
                "a node the config does not list can join only with membership = \"etcd\" in the config");
    return;
  }
  if (a.node.empty() || a.address.empty() || a.roles.empty()) {
    report.fail(a.node, "config", "--address/--roles", "a node the config does not list needs --node ID, "
                                                       "--address HOST:PORT and --roles (prefill, decode, worker)");
    return;
  }
  if (cfg.node(a.node) != nullptr) {
    report.fail(a.node, "config", "--address/--roles",
                "node '" + a.node + "' is listed in the config: its entry comes from there (drop --address and --roles)");
    return;
  }
  for (const auto& r : a.roles)
    if (r == "frontend" || r == "router") {
      report.fail(a.node, "config", "--roles " + r,
                  "the frontend and router run on the node the config lists with the role router; "
                  "a node joining by flags takes prefill, decode or worker");
      return;
    }
  auto n = cluster::check_node_entry({a.node, a.address, a.roles, a.workers, "", a.metrics}, "flags");
  if (!n) {
    report.fail(a.node, "config", "--address/--roles", error_message(n.error()));
    return;
  }
  for (const auto& other : cfg.nodes)
    if (other.address == n->address) {
      report.fail(a.node, "config", "--address " + a.address, "node '" + other.id + "' of the config listens there");
      return;
    }
  cfg.nodes.push_back(std::move(*n));
}

int run_node(const node_args& a) {
  // SIGINT / SIGTERM stop the node, SIGHUP reloads a frontend's API key
  // file (sigwait below).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  // Preflight: every problem that would stop this node, before the model
  // loads, all at once (exit 2).
  cluster::preflight_report report;
  auto reading = cluster::read_cluster_config_file(a.config);
  auto* cfg = &reading.config;
  std::string id;
  // A config with problems is still checked as far as it read: every
  // problem at once.
  const bool config_ok = report_config(report, a.config, reading);
  if (!a.secret_file.empty())
    cfg->cluster_secret_file = a.secret_file;
  if (!a.admin_key_file.empty())
    cfg->admin_key_file = a.admin_key_file;
  if (!a.api_keys_file.empty())
    cfg->api_keys_file = a.api_keys_file;
  if (a.protect_metrics)
    cfg->protect_metrics = true;
  if (a.fault_injection)
    cfg->fault_injection = true;
  if (!a.address.empty() || !a.roles.empty())
    add_flag_node(report, *cfg, a, config_ok);
  if (!a.node.empty()) {
    id = cfg->node(a.node) != nullptr ? a.node : config_ok ? find_node(report, *cfg, a.node) : std::string{};
  } else {
    for (const auto& n : cfg->nodes)
      if (n.has(a.role)) {
        id = n.id;
        break;
      }
    if (id.empty() && config_ok)
      report.fail("", "config", "--role " + a.role, "no node in " + a.config + " has the role '" + a.role + "'");
  }
  if (config_ok && cfg->membership == "etcd")
    cluster::check_etcd(report, id, cfg->etcd_endpoints);
  if (config_ok && cfg->transport != "ucx")
    report.fail("", "config", "transport",
                "a multi-process cluster needs transport = \"ucx\" (loopback is in-process: use tessera serve)");
  check_cluster_wide(report, *cfg, a.insecure);
  if (!id.empty())
    check_node_resources(report, *cfg, *cfg->node(id), true);
  if (auto text = report.problems_text("tessera node" + (id.empty() ? std::string{} : " " + id)); !text.empty())
    std::fputs(text.c_str(), stderr);
  if (report.failures() > 0)
    return 2;
  std::filesystem::path model = cfg->model;
  if (model.empty()) {
    auto demo = ensure_demo_model();
    if (!demo)
      return fail(error_text(demo.error()));
    model = *demo;
    if (cfg->served_model_name.empty())
      cfg->served_model_name = "tessera-demo";
  }
  caf::actor_system_config caf_cfg;
  actors::tune_actor_system(caf_cfg);
  caf::actor_system sys{caf_cfg};
  auto node = actors::cluster_node::start(
    sys, *cfg, id, model,
    [&](const std::string& line) { std::fprintf(stderr, "tessera node %s: %s\n", id.c_str(), line.c_str()); },
    a.insecure);
  if (!node)
    return fail(error_text(node.error()));
  std::printf("tessera node %s: ready\n", id.c_str());
  if (auto url = (*node)->url(); !url.empty())
    std::printf("tessera node %s: listening on %s\n", id.c_str(), url.c_str());
  std::fflush(stdout);
  int sig = 0;
  while (sigwait(&stop, &sig) == 0 && sig == SIGHUP) {
    if (auto err = (*node)->reload_api_keys())
      spdlog::error("tessera node {}: SIGHUP: {} (the API keys in use stay)", id, error_text(err));
  }
  // Graceful stop (a frontend node drains its requests, serve's way).
  (*node)->drain(std::chrono::milliseconds{static_cast<int64_t>(a.drain_timeout_s * 1000)});
  node->reset();
  return 0;
}

} // namespace

command add_node_command(CLI::App& app) {
  auto* sub = app.add_subcommand("node", "Run one node of a multi-process cluster (configs/*.toml)");
  auto a = std::make_shared<node_args>();
  sub->add_option("--config", a->config, "The cluster's TOML config")->required();
  auto* node = sub->add_option("--node,--id", a->node, "This node's id (in the config, or with --address and "
                                                      "--roles a node the config does not list)");
  sub->add_option("--role", a->role, "Or: run the first node with this role "
                                     "(frontend, router, prefill, decode, worker)")
    ->excludes(node);
  sub->add_option("--address", a->address,
                  "With membership = \"etcd\": this node's transport address (host:port) when the config does "
                  "not list it; it registers in etcd and the others dial it");
  sub->add_option("--roles", a->roles, "With --address: its roles (prefill, decode, worker)")->delimiter(',');
  sub->add_option("--workers", a->workers, "With --address: its workers")->capture_default_str();
  sub->add_option("--metrics", a->metrics, "With --address: where it serves GET /metrics (host:port)");
  sub->add_option("--cluster-secret-file", a->secret_file,
                  "The cluster secret (overrides cluster_secret_file in the config; chmod 600)");
  sub->add_option("--drain-timeout", a->drain_timeout_s,
                  "On SIGTERM/SIGINT: seconds a frontend node's requests in flight may still "
                  "finish (new ones get 503); those left then end with an error")
    ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--admin-key-file", a->admin_key_file,
                  "The frontend's admin key (overrides admin_key_file in the config; chmod 600): POST "
                  "/admin/drain and every /admin/* endpoint then need Authorization: Bearer <key>");
  sub->add_option("--api-keys", a->api_keys_file,
                  "The frontend's API key file (overrides api_keys_file in the config): every /v1/* "
                  "request then needs Authorization: Bearer <key>; SIGHUP reloads it");
  sub->add_flag("--protect-metrics", a->protect_metrics,
                "With API keys: the frontend's GET /metrics needs a key too (as protect_metrics = true)");
  sub->add_flag("--fault-injection", a->fault_injection,
                "Run this node's transport through the fault decorator and take POST /admin/faults "
                "{\"plan\": ...} on its metrics endpoint (as fault_injection = true in the config; "
                "for testing clusters only)");
  sub->add_flag("--insecure", a->insecure,
                "Run a multi-node cluster without a cluster secret: any process that reaches a "
                "node can join (logged as a warning)");
  return {sub, [a] {
            if (a->node.empty() && a->role.empty())
              return fail("give --node ID or --role ROLE");
            return run_node(*a);
          }};
}

} // namespace tessera::cli
