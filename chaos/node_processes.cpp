#include "chaos/node_processes.hpp"

#include <algorithm>

#include <caf/sec.hpp>

#include "common/error.hpp"
#include "common/text_tail.hpp"

namespace tessera::chaos {

namespace {

caf::error node_error(const std::string& text) {
  return caf::make_error(caf::sec::runtime_error, text);
}

/// Time left until `deadline`, at least 0.
std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds{0});
}

} // namespace

node_processes::node_processes(node_launch launch, std::vector<std::string> ids)
  : launch_(std::move(launch)), ids_(std::move(ids)) {
}

node_processes::~node_processes() {
  (void) stop_all();
}

std::filesystem::path node_processes::log_of(const std::string& id) const {
  return launch_.log_dir / (id + ".log");
}

caf::error node_processes::spawn(const std::string& id) {
  // The node's stderr goes to its log (a shell that execs the node, so the
  // child's pid is the node's and signals reach it); its stdout, with the
  // "ready" line, stays on the pipe.
  std::vector<std::string> args{"-c", "exec \"$@\" 2>>\"$TESSERA_CHAOS_LOG\"", "sh", launch_.program,
                                "node", "--config", launch_.config.string(), "--node", id};
  args.insert(args.end(), launch_.extra_args.begin(), launch_.extra_args.end());
  child_options o;
  o.env.push_back("TESSERA_CHAOS_LOG=" + log_of(id).string());
  auto p = child_process::spawn("/bin/sh", args, o);
  if (!p)
    return p.error();
  procs_.insert_or_assign(id, std::move(*p));
  return {};
}

caf::error node_processes::start_all(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto it = ids_.rbegin(); it != ids_.rend(); ++it)
    if (auto err = spawn(*it))
      return err;
  for (const auto& id : ids_) {
    auto& p = procs_.at(id);
    for (;;) {
      auto line = p.read_line(std::max(left_until(deadline), std::chrono::milliseconds{1}));
      if (!line) {
        // What the node said last is the reason, and its log may not
        // outlive the run (a test's temporary folder): it goes in the error.
        const auto tail = file_tail(log_of(id), 12);
        return node_error("node " + id + " did not say it is ready (" + error_message(line.error()) + "); " +
                          (tail.empty() ? "its log " + log_of(id).string() + " is empty"
                                        : "the end of its log " + log_of(id).string() + ":\n" + tail));
      }
      if (line->find("ready") != std::string::npos)
        break;
    }
  }
  return {};
}

caf::error node_processes::restart(const std::string& id) {
  if (std::find(ids_.begin(), ids_.end(), id) == ids_.end())
    return node_error("no node " + id);
  if (auto it = procs_.find(id); it != procs_.end()) {
    if (it->second.running() && !it->second.wait(std::chrono::milliseconds{0})) {
      it->second.kill(SIGKILL);
      (void) it->second.wait(std::chrono::seconds{10});
    }
  }
  return spawn(id);
}

caf::error node_processes::signal(const std::string& id, int sig) {
  auto it = procs_.find(id);
  if (it == procs_.end())
    return node_error("no node " + id + " was started");
  auto& p = it->second;
  if (p.running())
    if (auto code = p.wait(std::chrono::milliseconds{0}); code)
      return node_error("node " + id + " is not running (it exited with " + std::to_string(*code) + ")");
  if (!p.running())
    return node_error("node " + id + " is not running");
  p.kill(sig);
  return {};
}

std::vector<std::string> node_processes::stop_all(std::chrono::milliseconds timeout) {
  std::vector<std::string> out;
  for (auto& [id, p] : procs_)
    if (p.running()) {
      p.kill(SIGCONT);
      p.kill(SIGTERM);
    }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [id, p] : procs_) {
    if (!p.running())
      continue;
    auto code = p.wait(left_until(deadline));
    if (!code) {
      p.kill(SIGKILL);
      (void) p.wait(std::chrono::seconds{5});
      out.push_back("node " + id + " did not stop within the time after SIGTERM (killed); see " + log_of(id).string());
    } else if (*code != 0) {
      out.push_back("node " + id + " exited with " + std::to_string(*code) + "; see " + log_of(id).string());
    }
  }
  procs_.clear();
  return out;
}

} // namespace tessera::chaos
