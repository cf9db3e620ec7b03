#pragma once
/// @file
/// The node processes of a chaos run: one `tessera node --config C --node
/// ID` child per node of the cluster config, each with its stderr appended
/// to <log_dir>/<id>.log, started, signalled (kill, term, stop, cont) and
/// started again by id. Not thread-safe: one thread at a time (the harness
/// starts the nodes, then its event thread owns them, then it stops them).

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "common/child_process.hpp"

namespace tessera::chaos {

/// How to start a node.
struct node_launch {
  /// The tessera binary.
  std::string program;
  /// The cluster config every node reads.
  std::filesystem::path config;
  /// Arguments added after `--node ID` (e.g. --fault-injection).
  std::vector<std::string> extra_args;
  /// Where each node's stderr goes (<id>.log, appended across restarts).
  std::filesystem::path log_dir;
};

class node_processes {
public:
  /// Nodes `ids`, none started yet.
  node_processes(node_launch launch, std::vector<std::string> ids);
  node_processes(const node_processes&) = delete;
  node_processes& operator=(const node_processes&) = delete;
  /// Stops every node still running (stop_all).
  ~node_processes();

  /// Starts every node (in reverse order: the router's node usually comes
  /// first in a config and dials the others) and waits, at most `timeout`
  /// in all, until each printed its "ready" line. Errors name the node and
  /// its log, and quote the log's last lines.
  [[nodiscard]] caf::error start_all(std::chrono::milliseconds timeout);

  /// Starts node `id` again: a process of it still running is killed
  /// (SIGKILL) and reaped first. Does not wait for it to be ready.
  [[nodiscard]] caf::error restart(const std::string& id);

  /// Sends `sig` to node `id`. Errors: no such node, or it is not running
  /// (it exited: the error says with which code).
  [[nodiscard]] caf::error signal(const std::string& id, int sig);

  /// Resumes stopped nodes, sends SIGTERM to every running one, waits up
  /// to `timeout` for each and SIGKILLs the rest. Returns one line per node
  /// that did not exit cleanly.
  std::vector<std::string> stop_all(std::chrono::milliseconds timeout = std::chrono::seconds{15});

  /// The log file of node `id`.
  [[nodiscard]] std::filesystem::path log_of(const std::string& id) const;

private:
  [[nodiscard]] caf::error spawn(const std::string& id);

  node_launch launch_;
  std::vector<std::string> ids_;
  std::map<std::string, child_process> procs_;
};

} // namespace tessera::chaos
