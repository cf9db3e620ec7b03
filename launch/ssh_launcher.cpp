#include "launch/ssh_launcher.hpp"

#include <filesystem>
#include <map>
#include <sstream>

#include <caf/sec.hpp>

#include "common/error.hpp"
#include "common/text_tail.hpp"

namespace tessera::launch {

namespace {

using namespace std::chrono_literals;

caf::error failed(const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, what);
}

/// Options every ssh and scp takes (`port_flag`: -p for ssh, -P for scp).
std::vector<std::string> ssh_common(const launch_plan& p, const rack_host& h, const char* port_flag) {
  std::vector<std::string> a{"-o", "BatchMode=yes", "-o", "ConnectTimeout=10"};
  if (h.ssh_port != 22)
    a.insert(a.end(), {port_flag, std::to_string(h.ssh_port)});
  if (!h.ssh_identity.empty())
    a.insert(a.end(), {"-i", h.ssh_identity});
  a.insert(a.end(), p.spec.ssh_options.begin(), p.spec.ssh_options.end());
  return a;
}

/// ssh to `h` running `script` in the remote shell.
std::vector<std::string> ssh_command(const launch_plan& p, const rack_host& h, const std::string& script) {
  std::vector<std::string> a{"ssh"};
  auto c = ssh_common(p, h, "-p");
  a.insert(a.end(), c.begin(), c.end());
  a.insert(a.end(), {"--", h.ssh, script});
  return a;
}

/// A shell function true while pid $1 runs (a zombie does not count).
const std::string alive_fn =
  "alive() { [ -r /proc/$1/stat ] && [ \"$(sed 's/.*) //' /proc/$1/stat | cut -c1)\" != Z ]; }\n";

std::string node_ids(const std::vector<const planned_node*>& nodes) {
  std::string ids;
  for (const auto* n : nodes)
    ids += (ids.empty() ? "" : " ") + n->id;
  return ids;
}

/// Per node, "<id> running <pid>" or "<id> stopped".
std::string status_script(const std::string& state, const std::vector<const planned_node*>& nodes) {
  return alive_fn + "for id in " + node_ids(nodes) + "; do\n  pid=$(cat " + state +
         "/$id.pid 2>/dev/null || true)\n  if [ -n \"$pid\" ] && alive \"$pid\"; then echo \"$id running $pid\"; "
         "else echo \"$id stopped\"; fi\ndone\n";
}

/// The state of every node of the plan: id -> pid ("" = stopped).
caf::expected<std::map<std::string, std::string>> node_states(const launch_plan& p, const runner& run) {
  std::map<std::string, std::string> out;
  for (size_t h = 0; h < p.hosts.size(); ++h) {
    const auto nodes = p.nodes_on(h);
    if (nodes.empty())
      continue;
    auto r = run.must("status on host " + p.hosts[h].name, ssh_command(p, p.hosts[h], status_script(p.spec.state_dir, nodes)), 30s);
    if (!r)
      return r.error();
    std::istringstream lines{r->output};
    std::string id, state, pid;
    while (lines >> id >> state) {
      pid.clear();
      if (state == "running")
        lines >> pid;
      out[id] = pid;
    }
    if (run.dry())
      for (const auto* n : nodes)
        out[n->id] = "dry";
  }
  return out;
}

/// The end of node `n`'s log on its host.
std::string log_tail(const launch_plan& p, const planned_node& n, const runner& run) {
  const std::string log = p.spec.state_dir + "/" + n.id + ".log";
  auto r = run.run(ssh_command(p, p.host_of(n), "tail -n 20 " + log), 30s);
  if (!r)
    return "  (its log could not be read: " + error_message(r.error()) + ")\n";
  return "the end of its log (" + p.host_of(n).name + ":" + log + "):\n" + tail_lines(r->output, 20);
}

/// Error naming every node that is not running, with its log's end.
caf::error dead_nodes(const launch_plan& p, const runner& run, const std::string& when) {
  auto states = node_states(p, run);
  if (!states)
    return states.error();
  std::string text;
  for (const auto& n : p.nodes)
    if ((*states)[n.id].empty())
      text += "node " + n.id + " on host " + p.host_of(n).name + " is not running " + when + "; " +
              log_tail(p, n, run);
  return text.empty() ? caf::error{} : failed(text);
}

} // namespace

caf::error ssh_start(const launch_plan& p, const launch_options& o, std::ostream& out) {
  const runner run{o.dry_run, out};
  const auto& state = p.spec.state_dir;
  const bool secret = !p.spec.cluster_secret_file.empty();
  if (secret && !o.dry_run && !std::filesystem::is_regular_file(p.spec.cluster_secret_file))
    return failed("the cluster secret file " + p.spec.cluster_secret_file +
                  " does not exist: make one (head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE)");
  auto config = write_cluster_config(p, o, secret ? state + "/cluster.secret" : "", out);
  if (!config)
    return config.error();
  const std::string bin = host_binary(p, o);
  // Every host ready (folder, files, nothing of this rack running) before
  // any node starts.
  for (size_t h = 0; h < p.hosts.size(); ++h) {
    const auto nodes = p.nodes_on(h);
    if (nodes.empty())
      continue;
    const auto& host = p.hosts[h];
    const std::string prepare = alive_fn + "mkdir -p " + state + " && chmod 700 " + state + " || exit 1\nfor id in " +
                                node_ids(nodes) + "; do\n  pid=$(cat " + state +
                                "/$id.pid 2>/dev/null || true)\n  if [ -n \"$pid\" ] && alive \"$pid\"; then echo "
                                "\"node $id is already running (pid $pid): stop the rack first\"; exit 3; fi\ndone\n";
    if (auto r = run.must("preparing host " + host.name, ssh_command(p, host, prepare), 60s); !r)
      return r.error();
    auto scp = [&](const std::string& from, const std::string& to) {
      std::vector<std::string> a{"scp", "-q"};
      auto c = ssh_common(p, host, "-P");
      a.insert(a.end(), c.begin(), c.end());
      a.insert(a.end(), {"--", from, host.ssh + ":" + state + "/" + to});
      return a;
    };
    if (auto r = run.must("copying the cluster config to host " + host.name, scp(config->string(), "cluster.toml"),
                          120s);
        !r)
      return r.error();
    if (secret)
      if (auto r = run.must("copying the cluster secret to host " + host.name,
                            scp(p.spec.cluster_secret_file, "cluster.secret"), 120s);
          !r)
        return r.error();
  }
  for (size_t h = 0; h < p.hosts.size(); ++h) {
    const auto nodes = p.nodes_on(h);
    if (nodes.empty())
      continue;
    std::string script = "cd " + state + " || exit 1\n" + (secret ? "chmod 600 cluster.secret || exit 1\n" : "");
    for (const auto* n : nodes) {
      const std::string env = n->gpu >= 0 ? "CUDA_VISIBLE_DEVICES=" + std::to_string(n->gpu) + " " : "";
      script += env + "nohup " + bin + " node --config " + state + "/cluster.toml --node " + n->id + " > " + state +
                "/" + n->id + ".log 2>&1 < /dev/null &\necho $! > " + state + "/" + n->id + ".pid\n";
    }
    if (auto r = run.must("starting nodes on host " + p.hosts[h].name, ssh_command(p, p.hosts[h], script), 60s); !r)
      return r.error();
    if (!o.dry_run)
      for (const auto* n : nodes)
        out << "started node " << n->id << " on host " << p.hosts[h].name << " (log " << state << "/" << n->id
            << ".log)\n";
  }
  const auto& front = p.host_of(p.frontend());
  if (o.dry_run) {
    out << "# then: wait up to " << o.ready_timeout.count() << " s for http://" << front.address << ":" << p.http_port
        << "/ready (200)\n";
    return {};
  }
  out << "waiting for http://" << front.address << ":" << p.http_port << "/ready ..." << std::endl;
  bool died = false;
  if (auto err = wait_ready(front.address, p.http_port, o.ready_timeout, [&] {
        auto dead = dead_nodes(p, run, "(it exited)");
        died = static_cast<bool>(dead);
        return dead;
      })) {
    // Which node did not come up: a dead one, else the frontend.
    std::string why = error_message(err) + "\n";
    if (!died)
      why += "every node is running; the frontend node " + p.frontend().id + "'s " + log_tail(p, p.frontend(), run);
    // Half a cluster serves nothing: the nodes that did start are stopped.
    std::ostringstream ignored;
    auto quick = o;
    quick.stop_grace = std::chrono::seconds{2};
    const auto stopped = ssh_stop(p, quick, ignored);
    return failed(why + (stopped ? "stopping the other nodes failed too: " + error_message(stopped)
                                 : std::string{"the rack's other nodes were stopped"}));
  }
  out << "rack " << p.spec.name << " is ready: http://" << front.address << ":" << p.http_port << "\n";
  return {};
}

caf::error ssh_stop(const launch_plan& p, const launch_options& o, std::ostream& out) {
  const runner run{o.dry_run, out};
  const auto& state = p.spec.state_dir;
  const auto tenths = std::to_string(o.stop_grace.count() * 10);
  const std::string stop_fn =
    alive_fn + "stop() {\n  id=$1; f=" + state +
    "/$id.pid\n  [ -f \"$f\" ] || { echo \"node $id: not started (no pid file)\"; return; }\n  pid=$(cat \"$f\")\n"
    "  if [ -z \"$pid\" ] || ! alive \"$pid\"; then echo \"node $id: not running\"; rm -f \"$f\"; return; fi\n"
    "  case \"$(tr '\\0' ' ' < /proc/$pid/cmdline)\" in\n    *\" node --config " +
    state +
    "/cluster.toml --node $id \"*) ;;\n    *) echo \"node $id: pid $pid is not this node; left alone\"; rm -f "
    "\"$f\"; return;;\n  esac\n  kill -TERM \"$pid\"; i=0\n  while alive \"$pid\" && [ $i -lt " +
    tenths +
    " ]; do sleep 0.1; i=$((i+1)); done\n  if alive \"$pid\"; then kill -KILL \"$pid\"; echo \"node $id: killed "
    "(SIGKILL: still running " +
    std::to_string(o.stop_grace.count()) +
    " s after SIGTERM)\"; else echo \"node $id: stopped\"; fi\n  rm -f \"$f\"\n}\n";
  // The frontend first: workers stopping under a running router are
  // workers lost to it.
  std::vector<std::pair<size_t, std::vector<const planned_node*>>> rounds{{p.frontend().host, {&p.frontend()}}};
  for (size_t h = 0; h < p.hosts.size(); ++h) {
    auto nodes = p.nodes_on(h);
    std::erase_if(nodes, [&](const planned_node* n) { return n == &p.frontend(); });
    if (!nodes.empty())
      rounds.emplace_back(h, nodes);
  }
  std::string errors;
  for (const auto& [h, nodes] : rounds) {
    std::string script = stop_fn;
    for (const auto* n : nodes)
      script += "stop " + n->id + "\n";
    auto r = run.must("stopping nodes on host " + p.hosts[h].name, ssh_command(p, p.hosts[h], script),
                      o.stop_grace + 60s);
    if (!r)
      errors += error_message(r.error()) + "\n";
    else
      out << r->output;
  }
  if (!errors.empty())
    return failed(errors);
  return {};
}

caf::error ssh_status(const launch_plan& p, const launch_options& o, std::ostream& out) {
  const runner run{o.dry_run, out};
  auto states = node_states(p, run);
  if (!states)
    return states.error();
  if (o.dry_run) {
    out << "# then: GET http://" << p.host_of(p.frontend()).address << ":" << p.http_port << "/health\n";
    return {};
  }
  size_t down = 0;
  for (const auto& n : p.nodes) {
    const auto& pid = (*states)[n.id];
    down += pid.empty() ? 1 : 0;
    out << "node " << n.id << " on host " << p.host_of(n).name << ": "
        << (pid.empty() ? std::string{"stopped"} : "running (pid " + pid + ")") << "\n";
  }
  bool healthy = false;
  out << health_line(p.host_of(p.frontend()).address, p.http_port, healthy) << "\n";
  if (down > 0 || !healthy)
    return failed(std::to_string(down) + " of " + std::to_string(p.nodes.size()) + " nodes not running" +
                  (healthy ? "" : "; the frontend is not healthy"));
  return {};
}

} // namespace tessera::launch
