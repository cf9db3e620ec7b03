#include "launch/rack.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <caf/error.hpp>
#include <caf/sec.hpp>
#include <toml++/toml.h>

#include "cluster/cluster_config.hpp"
#include "cluster/host_port.hpp"
#include "cluster/nearest_name.hpp"

namespace tessera::launch {

namespace {

using cluster::did_you_mean;
using cluster::quote_input;

const std::vector<std::string> top_keys{"rack", "cluster", "placement", "slurm", "host"};
const std::vector<std::string> rack_keys{"name",      "model",  "served_model_name", "cluster_secret_file",
                                         "ports_base", "state_dir", "binary",          "ssh_options"};
const std::vector<std::string> placement_keys{"prefill", "decode", "worker"};
const std::vector<std::string> slurm_keys{"partition", "time", "nodes", "gpus_per_node", "sbatch_args"};
const std::vector<std::string> host_keys{"name", "address", "ssh", "ssh_port", "ssh_identity", "gpus", "roles"};
const std::vector<std::string> host_roles{"frontend", "prefill", "decode", "worker"};
// Cluster config keys the rack sets itself.
const std::vector<std::string> rack_owned{"model", "served_model_name", "transport", "cluster_secret_file", "node"};

/// Problems with "<file>:<line>: " in front.
class reader {
public:
  explicit reader(std::string file) : file_(std::move(file)) {}

  void problem(const toml::node* at, const std::string& what) {
    const auto line = at != nullptr ? at->source().begin.line : 0;
    problems_.push_back(file_ + (line > 0 ? ":" + std::to_string(line) : std::string{}) + ": " + what);
  }

  void known(const toml::table& t, const std::vector<std::string>& keys, const std::string& prefix) {
    for (const auto& [k, v] : t) {
      const std::string key{k.str()};
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        problem(&v, "unknown key " + quote_input(prefix + key) + did_you_mean(key, keys));
    }
  }

  const toml::table* table(const toml::table& t, const std::string& key) {
    const auto* n = t.get(key);
    if (n == nullptr)
      return nullptr;
    if (auto* tt = n->as_table())
      return tt;
    problem(n, "'" + key + "' must be a table ([" + key + "])");
    return nullptr;
  }

  void str(const toml::table& t, const std::string& key, const std::string& name, std::string& out) {
    const auto* n = t.get(key);
    if (n == nullptr)
      return;
    if (auto s = n->value_exact<std::string>()) {
      if (std::any_of(s->begin(), s->end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
        problem(n, "'" + name + "' holds a control character");
      else
        out = *s;
    } else {
      problem(n, "'" + name + "' must be a string");
    }
  }

  template <class T>
  void num(const toml::table& t, const std::string& key, const std::string& name, int64_t lo, int64_t hi, T& out) {
    const auto* n = t.get(key);
    if (n == nullptr)
      return;
    auto x = n->value_exact<int64_t>();
    if (!x || *x < lo || *x > hi) {
      problem(n, "'" + name + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
                   (x ? ", got " + std::to_string(*x) : std::string{}));
      return;
    }
    out = static_cast<T>(*x);
  }

  void strings(const toml::table& t, const std::string& key, const std::string& name, std::vector<std::string>& out) {
    const auto* n = t.get(key);
    if (n == nullptr)
      return;
    auto* a = n->as_array();
    if (a == nullptr) {
      problem(n, "'" + name + "' must be an array of strings");
      return;
    }
    for (const auto& e : *a) {
      auto s = e.value_exact<std::string>();
      if (!s) {
        problem(&e, "'" + name + "' must be an array of strings");
        return;
      }
      out.push_back(*s);
    }
  }

  [[nodiscard]] bool ok() const { return problems_.empty(); }
  [[nodiscard]] caf::error error() const {
    std::string text;
    for (const auto& p : problems_)
      text += (text.empty() ? "" : "\n") + p;
    return caf::make_error(caf::sec::invalid_argument, text);
  }

private:
  std::string file_;
  std::vector<std::string> problems_;
};

/// Names that become file names and node ids: letters, digits, '.', '-', '_'.
bool plain_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && s.front() != '-' && s.front() != '.' &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '_' || c == '.';
         });
}

void read_host(reader& r, const toml::node& entry, size_t i, const std::filesystem::path& dir, rack_host& h) {
  const std::string at = "host[" + std::to_string(i) + "]";
  auto* t = entry.as_table();
  if (t == nullptr) {
    r.problem(&entry, at + " is not a table: write each host as [[host]]");
    return;
  }
  r.known(*t, host_keys, at + ".");
  r.str(*t, "name", at + ".name", h.name);
  r.str(*t, "address", at + ".address", h.address);
  r.str(*t, "ssh", at + ".ssh", h.ssh);
  r.num(*t, "ssh_port", at + ".ssh_port", 1, 65535, h.ssh_port);
  r.str(*t, "ssh_identity", at + ".ssh_identity", h.ssh_identity);
  r.num(*t, "gpus", at + ".gpus", 0, 1024, h.gpus);
  r.strings(*t, "roles", at + ".roles", h.roles);
  if (!t->contains("name"))
    r.problem(t, at + ".name is missing");
  else if (!plain_name(h.name))
    r.problem(t->get("name"), at + ".name " + quote_input(h.name) +
                                  " must be 1-64 letters, digits, '.', '-' or '_' (not starting with '-' or '.')");
  if (!t->contains("address")) {
    r.problem(t, at + ".address is missing (the host or IPv4 address its nodes listen on)");
  } else {
    auto a = cluster::parse_host_port(h.address + ":1", at + ".address", cluster::address_family::ipv4_only);
    if (!a || a->host != h.address || h.address.front() == '-' ||
        h.address.find_first_of(" '\"\\$`;&|<>@/") != std::string::npos)
      r.problem(t->get("address"), at + ".address " + quote_input(h.address) +
                                       " must be a host name or an IPv4 address, without a port");
  }
  if (h.ssh.empty())
    h.ssh = h.address;
  else if (h.ssh.front() == '-' || h.ssh.find_first_of(" '\"\\$`;&|<>:/") != std::string::npos)
    // A target starting with '-' would be an option to ssh (-oProxyCommand=...).
    r.problem(t->get("ssh"), at + ".ssh " + quote_input(h.ssh) +
                                 " must be host or user@host (no '-' in front, no spaces, quotes or ':')");
  if (!h.ssh_identity.empty()) {
    if (h.ssh_identity.starts_with("~/")) {
      if (const char* home = std::getenv("HOME"); home != nullptr)
        h.ssh_identity = std::string{home} + h.ssh_identity.substr(1);
    } else if (std::filesystem::path{h.ssh_identity}.is_relative()) {
      h.ssh_identity = (dir / h.ssh_identity).lexically_normal().string();
    }
  }
  for (const auto& role : h.roles)
    if (std::find(host_roles.begin(), host_roles.end(), role) == host_roles.end())
      r.problem(t->get("roles"), at + ".roles: unknown role " + quote_input(role) + did_you_mean(role, host_roles) +
                                     " (use frontend, prefill, decode, worker; one node each)");
  if (t->contains("roles") && h.roles.empty())
    r.problem(t->get("roles"), at + ".roles is empty: leave it out (with [placement]) or name this host's nodes");
}

/// The [cluster] table: keys of the cluster config, checked by the real
/// parser on a config made of them and one node.
void read_cluster_options(reader& r, const toml::table& t, rack& out) {
  auto known = cluster::cluster_config_keys();
  std::erase_if(known, [](const std::string& k) {
    return std::find(rack_owned.begin(), rack_owned.end(), k) != rack_owned.end();
  });
  for (const auto& [k, v] : t) {
    const std::string key{k.str()};
    if (std::find(rack_owned.begin(), rack_owned.end(), key) != rack_owned.end())
      r.problem(&v, "'cluster." + key + "' is set by the rack (" +
                        (key == "node" ? std::string{"[[host]] or [placement]"} : "[rack]." + key) + "), not [cluster]");
    else if (std::find(known.begin(), known.end(), key) == known.end())
      r.problem(&v, "unknown key " + quote_input("cluster." + key) + did_you_mean(key, known) +
                        " (the keys of a cluster config: cluster/cluster_config.hpp)");
  }
  std::ostringstream os;
  os << toml::default_formatter{t, toml::format_flags::none};
  out.cluster_options = os.str();
  if (!out.cluster_options.empty() && out.cluster_options.back() != '\n')
    out.cluster_options += '\n';
  const std::string probe =
    out.cluster_options + "\n[[node]]\nid = \"probe\"\naddress = \"127.0.0.1:1\"\nroles = [\"frontend\", \"router\"]\n";
  const auto reading = cluster::read_cluster_config(probe, "[cluster]");
  for (const auto& p : reading.problems)
    r.problem(&t, p);
}

} // namespace

bool is_safe_path(std::string_view s) {
  return !s.empty() && s.front() != '-' && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.' || c == '/' || c == '+';
  });
}

caf::expected<rack> parse_rack(std::string_view text, const std::filesystem::path& file) {
  const std::string name = file.string();
  const auto dir = file.parent_path();
  reader r{name};
  toml::table t;
  try {
    t = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    return caf::make_error(caf::sec::invalid_argument, name + ":" + std::to_string(e.source().begin.line) + ": " +
                                                         std::string{e.description()});
  }
  rack out;
  r.known(t, top_keys, "");
  const auto* rt = r.table(t, "rack");
  if (rt == nullptr) {
    if (!t.contains("rack"))
      r.problem(nullptr, "no [rack] table (name, model, cluster_secret_file, ...)");
  } else {
    r.known(*rt, rack_keys, "rack.");
    r.str(*rt, "name", "rack.name", out.name);
    r.str(*rt, "model", "rack.model", out.model);
    r.str(*rt, "served_model_name", "rack.served_model_name", out.served_model_name);
    r.str(*rt, "cluster_secret_file", "rack.cluster_secret_file", out.cluster_secret_file);
    r.num(*rt, "ports_base", "rack.ports_base", 1024, 65000, out.ports_base);
    r.str(*rt, "state_dir", "rack.state_dir", out.state_dir);
    r.str(*rt, "binary", "rack.binary", out.binary);
    r.strings(*rt, "ssh_options", "rack.ssh_options", out.ssh_options);
    if (!rt->contains("name"))
      r.problem(rt, "rack.name is missing");
    else if (!plain_name(out.name))
      r.problem(rt->get("name"), "rack.name " + quote_input(out.name) +
                                     " must be 1-64 letters, digits, '.', '-' or '_' (not starting with '-' or '.')");
    if (out.state_dir.empty())
      out.state_dir = "/tmp/tessera-" + out.name;
    else if (out.state_dir.front() != '/' || out.state_dir.find("..") != std::string::npos ||
             !is_safe_path(out.state_dir))
      r.problem(rt->get("state_dir"), "rack.state_dir " + quote_input(out.state_dir) +
                                          " must be an absolute path without '..', of letters, digits and -_./+");
    if (out.binary.empty() || out.binary.front() == '-' || !is_safe_path(out.binary))
      r.problem(rt->get("binary"), "rack.binary " + quote_input(out.binary) +
                                       " must be a path or a command name, of letters, digits and -_./+");
    if (!out.cluster_secret_file.empty() && std::filesystem::path{out.cluster_secret_file}.is_relative())
      out.cluster_secret_file = (dir / out.cluster_secret_file).lexically_normal().string();
  }
  if (const auto* ct = r.table(t, "cluster"))
    read_cluster_options(r, *ct, out);
  if (const auto* pt = r.table(t, "placement")) {
    out.has_placement = true;
    r.known(*pt, placement_keys, "placement.");
    r.num(*pt, "prefill", "placement.prefill", 0, 4096, out.placement.prefill);
    r.num(*pt, "decode", "placement.decode", 0, 4096, out.placement.decode);
    r.num(*pt, "worker", "placement.worker", 0, 4096, out.placement.worker);
    if (out.placement.total() == 0)
      r.problem(pt, "[placement] places no node: give prefill, decode or worker a count");
  }
  if (const auto* st = r.table(t, "slurm")) {
    r.known(*st, slurm_keys, "slurm.");
    r.str(*st, "partition", "slurm.partition", out.slurm.partition);
    r.str(*st, "time", "slurm.time", out.slurm.time);
    r.num(*st, "nodes", "slurm.nodes", 1, 4096, out.slurm.nodes);
    r.num(*st, "gpus_per_node", "slurm.gpus_per_node", 1, 1024, out.slurm.gpus_per_node);
    r.strings(*st, "sbatch_args", "slurm.sbatch_args", out.slurm.sbatch_args);
  }
  const auto* hosts = t.get("host");
  if (hosts != nullptr && hosts->as_array() == nullptr) {
    r.problem(hosts, "'host' must be an array of tables: write each host as [[host]], not [host]");
  } else if (hosts != nullptr) {
    std::set<std::string> names;
    const auto& a = *hosts->as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      rack_host h;
      read_host(r, a[i], i, dir, h);
      if (!h.name.empty() && !names.insert(h.name).second)
        r.problem(&a[i], "host[" + std::to_string(i) + "].name " + quote_input(h.name) + " is used twice");
      out.hosts.push_back(std::move(h));
    }
  }
  // Where the nodes go: roles per host, or [placement].
  const bool any_roles =
    std::any_of(out.hosts.begin(), out.hosts.end(), [](const rack_host& h) { return !h.roles.empty(); });
  if (out.has_placement && any_roles) {
    r.problem(t.get("placement"), "[placement] and [[host]] roles both place nodes: use one of them");
  } else if (out.has_placement) {
    if (out.hosts.empty() && (out.slurm.nodes == 0 || out.slurm.gpus_per_node == 0))
      r.problem(t.get("placement"), "[placement] needs [[host]] tables with gpus, or [slurm] nodes and gpus_per_node");
    int gpus = 0;
    for (const auto& h : out.hosts)
      gpus += h.gpus;
    if (out.hosts.empty())
      gpus = out.slurm.nodes * out.slurm.gpus_per_node;
    if (out.placement.total() > gpus && gpus > 0)
      r.problem(t.get("placement"), "[placement] asks for " + std::to_string(out.placement.total()) +
                                        " worker nodes (one GPU each); the rack has " + std::to_string(gpus) +
                                        " GPUs");
    else if (gpus == 0 && !out.hosts.empty())
      r.problem(t.get("placement"), "[placement] spreads nodes by GPU count: give the hosts 'gpus'");
  } else if (out.hosts.empty()) {
    r.problem(nullptr, "no [[host]] tables and no [placement]: say where the nodes run");
  } else if (!any_roles) {
    r.problem(t.get("host"), "no host has roles: give each host roles = [...] or add [placement]");
  } else {
    size_t frontends = 0;
    for (size_t i = 0; i < out.hosts.size(); ++i) {
      const auto& h = out.hosts[i];
      frontends += static_cast<size_t>(std::count(h.roles.begin(), h.roles.end(), "frontend"));
      const auto workers = static_cast<int>(h.roles.size()) -
                           static_cast<int>(std::count(h.roles.begin(), h.roles.end(), "frontend"));
      if (h.gpus > 0 && workers > h.gpus)
        r.problem(&(*hosts->as_array())[i], "host[" + std::to_string(i) + "] " + quote_input(h.name) + " has " +
                                                std::to_string(workers) + " worker nodes but " +
                                                std::to_string(h.gpus) + " GPUs (one each)");
    }
    if (frontends != 1)
      r.problem(t.get("host"), "exactly one host role must be frontend (it runs the router too), found " +
                                   std::to_string(frontends));
  }
  if (!r.ok())
    return r.error();
  return out;
}

caf::expected<rack> load_rack(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return caf::make_error(caf::sec::invalid_argument, file.string() + ": cannot read the rack file (does it exist?)");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_rack(buf.str(), file);
}

} // namespace tessera::launch
