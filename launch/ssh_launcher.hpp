#pragma once
/// @file
/// The ssh launcher: copies the cluster config (and the cluster secret) to
/// every host's state_dir with scp, starts `tessera node` there detached
/// (nohup; log <state_dir>/<id>.log, pid file <state_dir>/<id>.pid), waits
/// for the frontend's /ready; stops with SIGTERM, then SIGKILL after a
/// grace period, the frontend first. Every ssh and scp runs with
/// BatchMode=yes (never a password prompt), the host's port and identity
/// and the rack's ssh_options.

#include <ostream>

#include <caf/error.hpp>

#include "launch/launcher.hpp"
#include "launch/plan.hpp"

namespace tessera::launch {

/// Starts every node. Refuses (before starting any) when a node of the
/// rack is already running. Errors name the host or node that failed, with
/// the end of its output or log.
[[nodiscard]] caf::error ssh_start(const launch_plan& p, const launch_options& o, std::ostream& out);

/// Stops every node (the frontend first); a pid file whose process is not
/// that node is left alone.
[[nodiscard]] caf::error ssh_stop(const launch_plan& p, const launch_options& o, std::ostream& out);

/// Prints each node (running with its pid, or stopped) and the frontend's
/// /health. Error when a node is not running or /health is not 200.
[[nodiscard]] caf::error ssh_status(const launch_plan& p, const launch_options& o, std::ostream& out);

} // namespace tessera::launch
