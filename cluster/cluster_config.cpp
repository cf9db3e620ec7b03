#include "cluster/cluster_config.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <caf/sec.hpp>
#include <toml++/toml.h>

namespace tessera::cluster {

namespace {

/// Splits "host:port" into host and port; returns an error text naming
/// `key`, or "" when it is good.
std::string host_port(const std::string& value, const std::string& key, std::string& host, uint16_t& port) {
  auto colon = value.rfind(':');
  if (colon == std::string::npos)
    return key + " must be host:port";
  try {
    size_t used = 0;
    const auto tail = value.substr(colon + 1);
    int p = std::stoi(tail, &used);
    if (used != tail.size() || p < 0 || p > 65535)
      throw std::out_of_range("port");
    host = value.substr(0, colon);
    port = static_cast<uint16_t>(p);
  } catch (const std::exception&) {
    return key + " has a bad port: '" + value + "'";
  }
  return {};
}

std::string toml_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

caf::error bad(const std::string& name, const std::string& what) {
  return caf::make_error(caf::sec::invalid_argument, name + ": " + what);
}

const std::set<std::string> known_roles{"frontend", "router", "prefill", "decode", "worker"};

const std::set<std::string> sim_keys{"gpu",
                                     "time_scale",
                                     "payload_scale",
                                     "tensor_parallel",
                                     "memory_efficiency",
                                     "compute_efficiency",
                                     "step_overhead_us",
                                     "gpu_memory_utilization",
                                     "eos_probability"};

} // namespace

const std::vector<std::string>& sim_gpu_names() {
  // The sim backend's presets (engine/sim/sim_gpu.cpp); a test checks the two agree.
  static const std::vector<std::string> names{"a100", "h100", "h200"};
  return names;
}

bool node_spec::has(const std::string& role) const {
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

const node_spec* cluster_config::node(const std::string& id) const {
  for (const auto& n : nodes)
    if (n.id == id)
      return &n;
  return nullptr;
}

const node_spec& cluster_config::router_node() const {
  for (const auto& n : nodes)
    if (n.has("router"))
      return n;
  return nodes.front(); // unreachable for a checked config
}

caf::expected<cluster_config> parse_cluster_config(std::string_view text, const std::string& name) {
  toml::table t;
  try {
    t = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << e.description() << " (line " << e.source().begin.line << ")";
    return bad(name, os.str());
  }
  cluster_config c;
  // Each optional key must have the right type when present.
  std::string err;
  auto str = [&](const toml::node_view<toml::node>& v, const std::string& key, std::string& out) {
    if (!v)
      return;
    if (auto s = v.value<std::string>())
      out = *s;
    else if (err.empty())
      err = "'" + key + "' must be a string";
  };
  auto num = [&](const toml::node_view<toml::node>& v, const std::string& key, int64_t lo, int64_t hi,
                 auto& out) {
    if (!v)
      return;
    auto x = v.value<int64_t>();
    if (!x || *x < lo || *x > hi) {
      if (err.empty())
        err = "'" + key + "' must be an integer in [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]";
      return;
    }
    out = static_cast<std::remove_reference_t<decltype(out)>>(*x);
  };
  auto flt = [&](const toml::node_view<toml::node>& v, const std::string& key, double lo, double hi,
                 auto& out) {
    if (!v)
      return;
    auto x = v.value<double>();
    if (!x || !(*x >= lo && *x <= hi)) {
      if (err.empty())
        err = "'" + key + "' must be a number in [" + toml_number(lo) + ", " + toml_number(hi) +
              "]";
      return;
    }
    out = *x;
  };
  str(t["model"], "model", c.model);
  str(t["served_model_name"], "served_model_name", c.served_model_name);
  str(t["router_policy"], "router_policy", c.router_policy);
  num(t["max_local_prefill_tokens"], "max_local_prefill_tokens", 0, 1 << 24, c.max_local_prefill_tokens);
  str(t["transport"], "transport", c.transport);
  str(t["ucx_tls"], "ucx_tls", c.ucx_tls);
  str(t["cluster_secret_file"], "cluster_secret_file", c.cluster_secret_file);
  num(t["threads_per_worker"], "threads_per_worker", 0, 1024, c.threads_per_worker);
  num(t["kv_cache_mb"], "kv_cache_mb", 0, 1 << 20, c.kv_cache_mb);
  num(t["max_model_len"], "max_model_len", 0, 1 << 24, c.max_model_len);
  num(t["kvstore_host_mb"], "kvstore_host_mb", 0, int64_t{1} << 30, c.kvstore_host_mb);
  str(t["kvstore_disk_dir"], "kvstore_disk_dir", c.kvstore_disk_dir);
  num(t["kvstore_disk_mb"], "kvstore_disk_mb", 1, int64_t{1} << 40, c.kvstore_disk_mb);
  num(t["kvstore_offer_mb"], "kvstore_offer_mb", 0, int64_t{1} << 20, c.kvstore_offer_mb);
  auto flag = [&](const toml::node_view<toml::node>& v, const std::string& key, bool& out) {
    if (!v)
      return;
    if (auto b = v.value_exact<bool>())
      out = *b;
    else if (err.empty())
      err = "'" + key + "' must be true or false";
  };
  flag(t["kvstore_int8"], "kvstore_int8", c.kvstore_int8);
  flag(t["kv_remote_fetch"], "kv_remote_fetch", c.kv_remote_fetch);
  str(t["engine"], "engine", c.engine);
  if (auto sim = t["sim"]; sim) {
    auto* st = sim.as_table();
    if (st == nullptr)
      return bad(name, "'sim' must be a table ([sim])");
    for (const auto& [k, _] : *st)
      if (!sim_keys.contains(std::string{k.str()}))
        return bad(name, "unknown key 'sim." + std::string{k.str()} +
                           "' (known: gpu, time_scale, payload_scale, tensor_parallel, "
                           "memory_efficiency, compute_efficiency, step_overhead_us, "
                           "gpu_memory_utilization, eos_probability)");
    auto& m = c.sim;
    str(sim["gpu"], "sim.gpu", m.gpu);
    flt(sim["time_scale"], "sim.time_scale", 0.0, 1e6, m.time_scale);
    num(sim["payload_scale"], "sim.payload_scale", 1, 1 << 20, m.payload_scale);
    num(sim["tensor_parallel"], "sim.tensor_parallel", 1, 1024, m.tensor_parallel);
    flt(sim["memory_efficiency"], "sim.memory_efficiency", 0.001, 1.0, m.memory_efficiency);
    flt(sim["compute_efficiency"], "sim.compute_efficiency", 0.001, 1.0, m.compute_efficiency);
    flt(sim["step_overhead_us"], "sim.step_overhead_us", 0.0, 1e7, m.step_overhead_us);
    flt(sim["gpu_memory_utilization"], "sim.gpu_memory_utilization", 0.001, 1.0,
        m.gpu_memory_utilization);
    flt(sim["eos_probability"], "sim.eos_probability", 0.0, 1.0, m.eos_probability);
    if (err.empty()) {
      const auto& gpus = sim_gpu_names();
      if (std::find(gpus.begin(), gpus.end(), m.gpu) == gpus.end()) {
        std::string known;
        for (const auto& g : gpus)
          known += (known.empty() ? "" : ", ") + g;
        err = "'sim.gpu' must be one of " + known + ", got '" + m.gpu + "'";
      }
    }
  }
  if (!err.empty())
    return bad(name, err);
  if (c.engine != "cpu" && c.engine != "sim")
    return bad(name, "'engine' must be cpu or sim, got '" + c.engine + "'");
  if (c.transport != "ucx" && c.transport != "loopback")
    return bad(name, "'transport' must be ucx or loopback, got '" + c.transport + "'");
  auto* nodes = t["node"].as_array();
  if (nodes == nullptr || nodes->empty())
    return bad(name, "no [[node]] tables");
  std::set<std::string> ids, addresses;
  for (size_t i = 0; i < nodes->size(); ++i) {
    auto* nt = (*nodes)[i].as_table();
    const std::string at = "node[" + std::to_string(i) + "]";
    if (nt == nullptr)
      return bad(name, at + " is not a table");
    toml::node_view<toml::node> v{*nt};
    node_spec n;
    str(v["id"], at + ".id", n.id);
    str(v["address"], at + ".address", n.address);
    num(v["workers"], at + ".workers", 1, 64, n.workers);
    std::string http, metrics;
    str(v["http"], at + ".http", http);
    str(v["metrics"], at + ".metrics", metrics);
    if (!err.empty())
      return bad(name, err);
    if (n.id.empty())
      return bad(name, at + ".id is missing");
    if (n.address.empty() || n.address.rfind(':') == std::string::npos)
      return bad(name, at + ".address must be host:port");
    if (!ids.insert(n.id).second)
      return bad(name, at + ".id '" + n.id + "' is used twice");
    if (!addresses.insert(n.address).second)
      return bad(name, at + ".address '" + n.address + "' is used twice");
    auto* roles = v["roles"].as_array();
    if (roles == nullptr || roles->empty())
      return bad(name, at + ".roles must be a non-empty array");
    for (const auto& r : *roles) {
      auto role = r.value<std::string>();
      if (!role || !known_roles.contains(*role))
        return bad(name, at + ".roles: unknown role (use frontend, router, prefill, decode, worker)");
      n.roles.push_back(*role);
    }
    if (!http.empty())
      if (auto e = host_port(http, at + ".http", n.http_host, n.http_port); !e.empty())
        return bad(name, e);
    if (!metrics.empty()) {
      if (auto e = host_port(metrics, at + ".metrics", n.metrics_host, n.metrics_port); !e.empty())
        return bad(name, e);
      if (n.metrics_port == 0)
        return bad(name, at + ".metrics needs a port other than 0");
    }
    c.nodes.push_back(std::move(n));
  }
  const auto routers = std::count_if(c.nodes.begin(), c.nodes.end(),
                                     [](const node_spec& n) { return n.has("router"); });
  if (routers != 1)
    return bad(name, "exactly one node must have the role router, found " + std::to_string(routers));
  for (const auto& n : c.nodes)
    if (n.has("frontend") && !n.has("router"))
      return bad(name, "node '" + n.id + "': the frontend runs on the router's node");
  return c;
}

caf::expected<cluster_config> load_cluster_config(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return bad(file.string(), "cannot read the file");
  std::stringstream buf;
  buf << in.rdbuf();
  auto c = parse_cluster_config(buf.str(), file.string());
  if (c && !c->cluster_secret_file.empty() && std::filesystem::path{c->cluster_secret_file}.is_relative())
    c->cluster_secret_file = (file.parent_path() / c->cluster_secret_file).string();
  return c;
}

} // namespace tessera::cluster
