// `tessera check`: a cluster's preflight without starting it, and the
// state of its nodes when it runs.
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/preflight_checks.hpp"

namespace tessera::cli {

namespace {

struct check_args {
  cluster_check_options opts;
  bool json = false;
  int timeout_ms = 1000;
};

int run_check(check_args& a) {
  a.opts.timeout = std::chrono::milliseconds{a.timeout_ms};
  const auto report = check_cluster(a.opts);
  const auto text = a.json ? report.json_text() + "\n" : report.table_text();
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return report.failures() == 0 ? 0 : 2;
}

} // namespace

command add_check_command(CLI::App& app) {
  auto* sub = app.add_subcommand("check", "Check a cluster config without starting it: config, secret, model, "
                                          "ports, disk tier; and, when it runs, each node's reachability and "
                                          "the frontend's health (exit 2 on any failure)");
  auto a = std::make_shared<check_args>();
  sub->add_option("--config", a->opts.config, "The cluster's TOML config")->required();
  sub->add_option("--node", a->opts.node, "Check only this node (default: every node)");
  sub->add_flag("--json", a->json, "Print a JSON report instead of a table");
  sub->add_flag("--before-start", a->opts.before_start,
                "The cluster must not be running yet: a node that answers is a failure (the launchers use this)");
  sub->add_option("--timeout-ms", a->timeout_ms, "For each connection and HTTP request")
    ->capture_default_str()
    ->check(CLI::Range(1, 60000));
  return {sub, [a] { return run_check(*a); }};
}

} // namespace tessera::cli
