#pragma once
/// @file
/// The options that choose a backend, shared by every subcommand that runs
/// an engine (generate, serve, bench engine, bench serve): --engine cpu|sim
/// and the sim's --sim-* settings (engine/sim/sim_backend.hpp).

#include <CLI/CLI.hpp>

#include "engine/factory/backend_factory.hpp"

namespace tessera::cli {

/// Adds --engine, --sim-gpu, --sim-time-scale, --sim-payload-scale,
/// --sim-tp, --sim-memory-efficiency, --sim-compute-efficiency,
/// --sim-step-overhead-us and --sim-eos-probability to `sub`, parsed into
/// `choice` (which must outlive the parse). Values are range-checked here;
/// make_backend checks the rest.
void add_engine_options(CLI::App* sub, engine::backend_choice& choice);

} // namespace tessera::cli
