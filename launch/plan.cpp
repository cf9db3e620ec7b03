#include "launch/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include <caf/error.hpp>
#include <caf/sec.hpp>

#include "cluster/cluster_config.hpp"

namespace tessera::launch {

namespace {

caf::error invalid(const std::string& what) {
  return caf::make_error(caf::sec::invalid_argument, what);
}

/// A TOML basic string.
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> cluster_roles(const std::string& role) {
  if (role == "frontend")
    return {"frontend", "router"};
  return {role};
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v)
    out += (out.empty() ? "" : sep) + s;
  return out;
}

} // namespace

std::string launch_plan::address(const planned_node& n) const {
  return hosts[n.host].address + ":" + std::to_string(n.port);
}

std::vector<const planned_node*> launch_plan::nodes_on(size_t h) const {
  std::vector<const planned_node*> out;
  for (const auto& n : nodes)
    if (n.host == h)
      out.push_back(&n);
  return out;
}

caf::expected<launch_plan> make_plan(const rack& r) {
  launch_plan p;
  p.spec = r;
  p.hosts = r.hosts;
  if (p.hosts.empty()) {
    // Slurm placement: the allocation's hosts, known when the job runs.
    p.hosts_from_allocation = true;
    for (int k = 0; k < r.slurm.nodes; ++k) {
      rack_host h;
      h.name = "slurm-host-" + std::to_string(k);
      h.address = h.name;
      h.ssh = h.name;
      h.gpus = r.slurm.gpus_per_node;
      p.hosts.push_back(std::move(h));
    }
  }
  if (p.hosts.empty())
    return invalid("rack " + r.name + ": no hosts");
  std::map<std::string, int> counters;
  auto add = [&](const std::string& role, size_t host, int gpu) {
    planned_node n;
    n.id = role == "frontend" ? std::string{"front"} : role + "-" + std::to_string(counters[role]++);
    n.host = host;
    n.roles = cluster_roles(role);
    n.gpu = gpu;
    p.nodes.push_back(std::move(n));
  };
  if (r.has_placement) {
    add("frontend", 0, -1);
    std::vector<int> used(p.hosts.size(), 0);
    const std::vector<std::pair<std::string, int>> wanted{
      {"prefill", r.placement.prefill}, {"decode", r.placement.decode}, {"worker", r.placement.worker}};
    for (const auto& [role, count] : wanted)
      for (int i = 0; i < count; ++i) {
        // The host with the most free GPUs (the first on a tie).
        size_t best = p.hosts.size();
        for (size_t h = 0; h < p.hosts.size(); ++h)
          if (p.hosts[h].gpus - used[h] > 0 &&
              (best == p.hosts.size() || p.hosts[h].gpus - used[h] > p.hosts[best].gpus - used[best]))
            best = h;
        if (best == p.hosts.size())
          return invalid("rack " + r.name + ": [placement] needs more GPUs than the hosts have");
        add(role, best, used[best]++);
      }
  } else {
    // The frontend first, then every host's nodes in order.
    for (size_t h = 0; h < p.hosts.size(); ++h)
      if (std::find(p.hosts[h].roles.begin(), p.hosts[h].roles.end(), "frontend") != p.hosts[h].roles.end())
        add("frontend", h, -1);
    for (size_t h = 0; h < p.hosts.size(); ++h) {
      int gpu = 0;
      for (const auto& role : p.hosts[h].roles)
        if (role != "frontend")
          add(role, h, p.hosts[h].gpus > 0 ? gpu++ : -1);
    }
  }
  if (static_cast<size_t>(r.ports_base) + p.nodes.size() > 65535)
    return invalid("rack " + r.name + ": ports_base " + std::to_string(r.ports_base) + " + " +
                   std::to_string(p.nodes.size()) + " nodes runs past port 65535");
  p.http_port = r.ports_base;
  for (size_t i = 0; i < p.nodes.size(); ++i)
    p.nodes[i].port = static_cast<uint16_t>(r.ports_base + 1 + i);
  return p;
}

caf::expected<std::string> cluster_config_text(const launch_plan& p, const std::string& secret_path) {
  const auto& r = p.spec;
  std::string t = "# Made by `tessera launch` from rack " + r.name + " (" + std::to_string(p.nodes.size()) +
                  " nodes). Every node reads this file.\n";
  t += "model = " + toml_string(r.model) + "\n";
  if (!r.served_model_name.empty())
    t += "served_model_name = " + toml_string(r.served_model_name) + "\n";
  t += "transport = \"ucx\"\n";
  if (!secret_path.empty())
    t += "cluster_secret_file = " + toml_string(secret_path) + "\n";
  t += r.cluster_options;
  for (const auto& n : p.nodes) {
    std::vector<std::string> roles;
    for (const auto& role : n.roles)
      roles.push_back(toml_string(role));
    t += "\n[[node]]\nid = " + toml_string(n.id) + "\naddress = " + toml_string(p.address(n)) +
         "\nroles = [" + joined(roles, ", ") + "]\n";
    if (std::find(n.roles.begin(), n.roles.end(), "frontend") != n.roles.end())
      t += "http = " + toml_string(p.host_of(n).address + ":" + std::to_string(p.http_port)) + "\n";
  }
  const auto reading = cluster::read_cluster_config(t, "the cluster config made for rack " + r.name);
  if (!reading.problems.empty())
    return invalid(joined(reading.problems, "\n"));
  return t;
}

std::string plan_text(const launch_plan& p, const std::string& launcher) {
  std::string out = "rack " + p.spec.name + ": " + std::to_string(p.nodes.size()) + " nodes on " +
                    std::to_string(p.hosts.size()) + (p.hosts.size() == 1 ? " host (" : " hosts (") + launcher + ")" +
                    (p.hosts_from_allocation ? ", hosts from the Slurm allocation" : "") + "\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-12s %-16s %-24s %-18s %s\n", "node", "host", "address", "roles", "gpu");
  out += line;
  for (const auto& n : p.nodes) {
    std::snprintf(line, sizeof line, "  %-12s %-16s %-24s %-18s %s\n", n.id.c_str(), p.host_of(n).name.c_str(),
                  p.address(n).c_str(), joined(n.roles, ",").c_str(),
                  n.gpu < 0 ? "-" : std::to_string(n.gpu).c_str());
    out += line;
  }
  out += "  frontend: http://" + p.host_of(p.frontend()).address + ":" + std::to_string(p.http_port) + "\n";
  return out;
}

} // namespace tessera::launch
