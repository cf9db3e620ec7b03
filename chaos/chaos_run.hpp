#pragma once
/// @file
/// One chaos run, end to end (`tessera chaos`):
///
///   plan the load (seeded) --> reference texts (one engine, in a thread)
///        |                             |
///   start the nodes, wait for /ready   |
///        |                             v
///   t = 0: the open-loop load (streamed completions) on this thread,
///          the scenario's events on a thread of their own,
///          the health probe (every 100 ms) on another
///        |
///   load ends + grace --> stop the nodes --> verdicts, times, report
///
/// The report is the caller's to print and write.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <caf/expected.hpp>

#include "chaos/chaos_report.hpp"
#include "chaos/scenario.hpp"
#include "cluster/cluster_config.hpp"
#include "engine/factory/backend_factory.hpp"

namespace tessera::chaos {

/// Everything a run needs.
struct chaos_options {
  /// The tessera binary the nodes run.
  std::string program;
  /// The cluster config's file (the nodes read it) and its contents.
  std::filesystem::path config_file;
  cluster::cluster_config config;
  /// The model the nodes serve (the config's, or the demo model's folder).
  std::filesystem::path model_dir;
  /// The model the right answers are computed with; empty: model_dir.
  /// Another one only to check the harness itself (every answer is then
  /// wrong).
  std::filesystem::path reference_model_dir;
  /// The nodes' backend (from the config's engine and [sim]).
  engine::backend_choice backend;
  /// The scenario, already scaled and with its seed set.
  scenario run;
  /// Where the nodes' logs go.
  std::filesystem::path log_dir;
  /// Arguments every node gets after `--node ID` (e.g. --fault-injection).
  std::vector<std::string> node_args;
  /// The command line, for the report.
  std::string command;
  /// Longest wait for the nodes to start and the frontend to be ready.
  /// Default: 120 s.
  std::chrono::seconds start_timeout{120};
  /// Progress lines.
  std::function<void(const std::string&)> say;
};

/// Problems with running `o.run` on `o.config` before anything starts:
/// events naming unknown nodes, faults events on a node without a metrics
/// or HTTP endpoint, no frontend. Empty when none.
[[nodiscard]] std::vector<std::string> check_run(const chaos_options& o);

/// Runs it. Errors: the model cannot be loaded, a node does not start, the
/// frontend is not ready in time (naming the node logs to read).
[[nodiscard]] caf::expected<chaos_report> run_chaos(const chaos_options& o);

} // namespace tessera::chaos
