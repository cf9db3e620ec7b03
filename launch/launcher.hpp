#pragma once
/// @file
/// What the ssh and Slurm launchers share: their options, waiting for the
/// frontend's /ready, and the frontend's /health for `status`.

#include <chrono>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "launch/command.hpp"
#include "launch/plan.hpp"

namespace tessera::launch {

/// How a launcher runs.
struct launch_options {
  /// tessera on the hosts; "" = the rack's binary.
  std::string binary;
  /// This machine's folder for the launch's files (the cluster config, the
  /// Slurm job id and script). Default: /tmp/tessera-launch-<rack>.
  std::filesystem::path local_dir;
  /// Where the Slurm job id is kept (<job_dir>/job_id): the launch's
  /// folder even in a dry run (whose local_dir is a temporary one), so that
  /// a dry stop or status shows the job it would act on.
  std::filesystem::path job_dir;
  /// Print the plan and every command; run nothing, write only to local_dir.
  bool dry_run = false;
  /// How long start waits for the frontend's /ready.
  std::chrono::seconds ready_timeout{120};
  /// How long stop waits after SIGTERM before SIGKILL.
  std::chrono::seconds stop_grace{20};
};

/// The binary the hosts run.
[[nodiscard]] inline std::string host_binary(const launch_plan& p, const launch_options& o) {
  return o.binary.empty() ? p.spec.binary : o.binary;
}

/// Polls GET http://host:port/ready until it answers 200, at most
/// `timeout`; every 2 s (and on the timeout) calls `check`, whose error (a
/// node that died, with its log) ends the wait. The timeout's error names
/// the frontend's URL and its last answer.
[[nodiscard]] caf::error wait_ready(const std::string& host, uint16_t port, std::chrono::seconds timeout,
                                    const std::function<caf::error()>& check);

/// "frontend http://host:port/health: 200 {...}" or why it did not answer;
/// `ok` says whether it answered 200.
[[nodiscard]] std::string health_line(const std::string& host, uint16_t port, bool& ok);

/// The plan, the cluster config (written to local_dir/cluster.toml) and
/// its text, shared by both launchers' start. `secret_path` goes into the
/// config.
[[nodiscard]] caf::expected<std::filesystem::path> write_cluster_config(const launch_plan& p,
                                                                        const launch_options& o,
                                                                        const std::string& secret_path,
                                                                        std::ostream& out);

} // namespace tessera::launch
