#pragma once
/// @file
/// The `tessera` subcommands. Each registers its options on a CLI11 app and
/// returns the process exit code when run.

#include <functional>

#include <CLI/CLI.hpp>

namespace tessera::cli {

/// A registered subcommand: run() is called when the user chose `sub`.
struct command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

/// `tessera generate`: offline generation with one engine.
command add_generate_command(CLI::App& app);
/// `tessera model init`: writes a random-weight model.
command add_model_command(CLI::App& app);
/// `tessera serve`: the whole cluster in one process behind the HTTP API.
command add_serve_command(CLI::App& app);

/// `tessera node`: one node of a multi-process cluster.
command add_node_command(CLI::App& app);

/// `tessera bench engine`: engine micro-benchmarks.
command add_bench_command(CLI::App& app);

/// `tessera check`: a cluster's preflight and, when it runs, its health.
command add_check_command(CLI::App& app);

/// `tessera chaos`: a cluster under a scenario's faults, with known answers.
command add_chaos_command(CLI::App& app);

/// `tessera launch`: a cluster on a rack's hosts over ssh or Slurm.
command add_launch_command(CLI::App& app);

} // namespace tessera::cli
