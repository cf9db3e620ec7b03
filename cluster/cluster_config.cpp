#include "cluster/cluster_config.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <caf/sec.hpp>
#include <toml++/toml.h>

#include "cluster/etcd_client.hpp"
#include "cluster/host_port.hpp"
#include "cluster/nearest_name.hpp"
#include "cluster/toml_reader.hpp"
#include "common/error.hpp"
#include "protocol/sampling_params.hpp"
#include "transport/wire/limits.hpp"

namespace tessera::cluster {

namespace {


const std::set<std::string> known_roles{"frontend", "router", "prefill", "decode", "worker", "kvstore"};

// Every key a config may have, in the order the header documents them (the
// order "did you mean" prefers on a tie).
const std::vector<std::string> top_keys{"model",
                                        "served_model_name",
                                        "router_policy",
                                        "max_local_prefill_tokens",
                                        "router_load",
                                        "router_sticky_break",
                                        "kv_admission",
                                        "kv_admission_wait_ms",
                                        "panic_routing",
                                        "router_index_max_entries",
                                        "late_grace_ms",
                                        "slo_ttft_ms",
                                        "slo_itl_ms",
                                        "transport",
                                        "ucx_tls",
                                        "cluster_secret_file",
                                        "admin_key_file",
                                        "api_keys_file",
                                        "protect_metrics",
                                        "threads_per_worker",
                                        "kv_cache_mb",
                                        "kv_dtype",
                                        "max_model_len",
                                        "speculative",
                                        "draft_model",
                                        "kvstore_host_mb",
                                        "kvstore_disk_dir",
                                        "kvstore_disk_mb",
                                        "kvstore_int8",
                                        "kvstore_offer_mb",
                                        "kv_remote_fetch",
                                        "engine",
                                        "fault_injection",
                                        "membership",
                                        "etcd_endpoints",
                                        "etcd_prefix",
                                        "membership_ttl_s",
                                        "sim",
                                        "node"};

const std::vector<std::string> node_keys{"id", "address", "roles", "workers", "http", "metrics", "store", "sim_gpu"};

const std::vector<std::string> sim_keys{"gpu",
                                        "time_scale",
                                        "payload_scale",
                                        "tensor_parallel",
                                        "memory_efficiency",
                                        "compute_efficiency",
                                        "step_overhead_us",
                                        "gpu_memory_utilization",
                                        "eos_probability"};



using reader = toml_reader;

void read_sim(reader& r, const toml::node_view<const toml::node>& sim, sim_config& m) {
  auto* st = sim.as_table();
  if (st == nullptr) {
    r.problem("'sim' must be a table ([sim])");
    return;
  }
  r.known_keys(*st, sim_keys, "sim.");
  r.str(sim["gpu"], "sim.gpu", m.gpu);
  r.flt(sim["time_scale"], "sim.time_scale", 0.0, 1e6, m.time_scale);
  r.num(sim["payload_scale"], "sim.payload_scale", 1, 1 << 20, m.payload_scale);
  r.num(sim["tensor_parallel"], "sim.tensor_parallel", 1, 1024, m.tensor_parallel);
  r.flt(sim["memory_efficiency"], "sim.memory_efficiency", 0.001, 1.0, m.memory_efficiency);
  r.flt(sim["compute_efficiency"], "sim.compute_efficiency", 0.001, 1.0, m.compute_efficiency);
  r.flt(sim["step_overhead_us"], "sim.step_overhead_us", 0.0, 1e7, m.step_overhead_us);
  r.flt(sim["gpu_memory_utilization"], "sim.gpu_memory_utilization", 0.001, 1.0, m.gpu_memory_utilization);
  r.flt(sim["eos_probability"], "sim.eos_probability", 0.0, 1.0, m.eos_probability);
  const auto& gpus = sim_gpu_names();
  if (std::find(gpus.begin(), gpus.end(), m.gpu) == gpus.end())
    r.problem("'sim.gpu' must be one of " + toml_reader::joined(gpus) + ", got " + quote_input(m.gpu));
}

/// Reads [[node]] number `i` into `n`, reporting each problem to `r`.
void read_node(reader& r, const toml::node& entry, size_t i, node_spec& n) {
  const std::string at = "node[" + std::to_string(i) + "]";
  auto* nt = r.entry_table(entry, at, node_keys);
  if (nt == nullptr)
    return;
  toml::node_view<const toml::node> v{*nt};
  r.str(v["id"], at + ".id", n.id);
  r.str(v["address"], at + ".address", n.address);
  r.num(v["workers"], at + ".workers", 1, 64, n.workers);
  std::string http, metrics;
  r.str(v["http"], at + ".http", http);
  r.str(v["metrics"], at + ".metrics", metrics);
  r.str(v["store"], at + ".store", n.store);
  r.str(v["sim_gpu"], at + ".sim_gpu", n.sim_gpu);
  if (const auto& gpus = sim_gpu_names();
      v["sim_gpu"] && std::find(gpus.begin(), gpus.end(), n.sim_gpu) == gpus.end())
    r.problem(at + ".sim_gpu must be one of " + toml_reader::joined(gpus) + ", got " + quote_input(n.sim_gpu));
  const size_t max_name = transport::wire::wire_limits{}.max_name_bytes;
  if (!v["id"])
    r.problem(at + ".id is missing");
  else if (n.id.empty())
    r.problem(at + ".id is empty");
  else if (n.id.size() > max_name)
    r.problem(at + ".id is " + std::to_string(n.id.size()) + " bytes; the wire carries node ids of at most " +
              std::to_string(max_name) + " bytes: use a shorter id");
  else if (n.id.find('/') != std::string::npos || n.id == "." || n.id == "..")
    r.problem(at + ".id " + quote_input(n.id) + " names a directory (kvstore_disk_dir/<id>): use no '/', '.' or '..'");
  if (!v["address"])
    r.problem(at + ".address is missing (host:port where its transport listens)");
  else if (n.address.size() > max_name)
    r.problem(at + ".address is " + std::to_string(n.address.size()) + " bytes; the wire carries at most " +
              std::to_string(max_name));
  else if (auto a = parse_host_port(n.address, at + ".address", address_family::ipv4_only); !a)
    r.problem(error_message(a.error()));
  else if (a->port == 0)
    r.problem(at + ".address " + quote_input(n.address) + " needs a port other than 0 (other nodes dial it)");
  auto* roles = v["roles"].as_array();
  if (roles == nullptr || roles->empty()) {
    r.problem(at + ".roles must be a non-empty array (of frontend, router, prefill, decode, worker, kvstore)");
  } else {
    for (const auto& role_node : *roles) {
      auto role = role_node.value_exact<std::string>();
      if (!role || !known_roles.contains(*role)) {
        const std::vector<std::string> names{known_roles.begin(), known_roles.end()};
        r.problem(at + ".roles: unknown role" + (role ? " " + quote_input(*role) + did_you_mean(*role, names) : "") +
                  " (use frontend, router, prefill, decode, worker, kvstore)");
        continue;
      }
      n.roles.push_back(*role);
    }
  }
  if (!http.empty()) {
    if (auto a = parse_host_port(http, at + ".http", address_family::any); !a) {
      r.problem(error_message(a.error()));
    } else {
      n.http_host = a->host;
      n.http_port = a->port;
    }
  }
  if (!metrics.empty()) {
    if (auto a = parse_host_port(metrics, at + ".metrics", address_family::any); !a) {
      r.problem(error_message(a.error()));
    } else if (a->port == 0) {
      r.problem(at + ".metrics needs a port other than 0");
    } else {
      n.metrics_host = a->host;
      n.metrics_port = a->port;
    }
  }
}

/// The membership keys: etcd's URLs parse, the prefix is a path of its
/// own, the TTL is one etcd grants.
void read_membership(reader& r, const toml::node_view<const toml::node>& root, cluster_config& c) {
  r.str(root["membership"], "membership", c.membership);
  if (c.membership != "static" && c.membership != "etcd")
    r.problem("'membership' must be static or etcd, got " + quote_input(c.membership));
  if (auto eps = root["etcd_endpoints"]; eps) {
    auto* a = eps.as_array();
    if (a == nullptr || a->empty() || a->size() > 16) {
      r.problem("'etcd_endpoints' must be an array of 1 to 16 URLs (\"http://host:port\")");
    } else {
      c.etcd_endpoints.clear();
      for (size_t i = 0; i < a->size(); ++i) {
        auto url = (*a)[i].value_exact<std::string>();
        if (!url) {
          r.problem("'etcd_endpoints[" + std::to_string(i) + "]' must be a string");
          continue;
        }
        if (auto ep = parse_etcd_url(*url); !ep)
          r.problem("'etcd_endpoints[" + std::to_string(i) + "]': " + error_message(ep.error()));
        c.etcd_endpoints.push_back(*url);
      }
    }
  }
  r.str(root["etcd_prefix"], "etcd_prefix", c.etcd_prefix);
  const bool printable = std::all_of(c.etcd_prefix.begin(), c.etcd_prefix.end(),
                                     [](char ch) { return ch > 0x20 && ch < 0x7f; });
  if (c.etcd_prefix.size() < 2 || c.etcd_prefix.size() > 256 || c.etcd_prefix.front() != '/' ||
      c.etcd_prefix.back() != '/' || !printable)
    r.problem("'etcd_prefix' must start and end with '/', be 2 to 256 bytes of printable ASCII without spaces "
              "(e.g. \"/tessera/my-cluster/\"), got " +
              quote_input(c.etcd_prefix));
  // etcd grants at least ~2 s; a node renews every TTL/3.
  r.num(root["membership_ttl_s"], "membership_ttl_s", 2, 300, c.membership_ttl_s);
  if (c.membership == "static")
    for (const char* key : {"etcd_endpoints", "etcd_prefix", "membership_ttl_s"})
      if (root[key])
        r.problem(std::string{"'"} + key + "' needs membership = \"etcd\"");
}

/// speculative and draft_model: the setting as tessera serve's
/// --speculative reads it, and draft:K only with a draft model (whether
/// the folder loads is the node's to find out: it loads it).
void read_speculative(reader& r, const toml::node_view<const toml::node>& root, cluster_config& c) {
  r.str(root["speculative"], "speculative", c.speculative);
  r.str(root["draft_model"], "draft_model", c.draft_model);
  auto spec = protocol::parse_speculative(c.speculative);
  if (!spec)
    r.problem("'speculative' must be ngram:K or draft:K with K in [1, " +
              std::to_string(protocol::speculative_params::max_tokens) + "], or none, got " +
              quote_input(c.speculative));
  else if (spec->method == protocol::speculative_params::method_kind::draft && c.draft_model.empty())
    r.problem("'speculative' " + quote_input(c.speculative) +
              " needs a draft model: set draft_model = \"DIR\" (a smaller model with the model's tokenizer), "
              "or use ngram:K");
}

/// The kv store nodes: a node's `store` names a node with the role
/// kvstore, and is set only on a node with workers and no store of its
/// own; a kvstore node keeps a store (kvstore_host_mb > 0).
void check_store_nodes(reader& r, const cluster_config& c) {
  std::vector<std::string> stores;
  for (const auto& n : c.nodes)
    if (n.has("kvstore"))
      stores.push_back(n.id);
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const auto& n = c.nodes[i];
    const std::string at = "node[" + std::to_string(i) + "] (" + quote_input(n.id) + ")";
    if (n.has("kvstore") && c.kvstore_host_mb == 0)
      r.problem(at + " has the role kvstore but kvstore_host_mb = 0 keeps no store: give it host memory");
    if (n.store.empty())
      continue;
    if (!n.has_workers())
      r.problem(at + ".store " + quote_input(n.store) + ": only a node with workers (prefill, decode, worker) "
                "uses another node's kv store");
    else if (n.has("kvstore"))
      r.problem(at + ".store " + quote_input(n.store) + ": the node has the role kvstore, so its workers use its "
                "own store; drop the key or the role");
    const auto* target = c.node(n.store);
    if (target == nullptr)
      r.problem(at + ".store " + quote_input(n.store) + " names no node of this config" +
                did_you_mean(n.store, stores));
    else if (!target->has("kvstore"))
      r.problem(at + ".store " + quote_input(n.store) + " names a node without the role kvstore" +
                (stores.empty() ? std::string{" (no node has it)"} : " (nodes with it: " + toml_reader::joined(stores) + ")"));
  }
}

caf::error problems_error(const std::vector<std::string>& problems) {
  std::string text;
  for (const auto& p : problems)
    text += (text.empty() ? "" : "\n") + p;
  return caf::make_error(caf::sec::invalid_argument, text);
}

} // namespace

const std::vector<std::string>& cluster_config_keys() {
  return top_keys;
}

const std::vector<std::string>& sim_gpu_names() {
  // The sim backend's presets (engine/sim/sim_gpu.cpp); a test checks the two agree.
  static const std::vector<std::string> names{"a100", "h100", "h200"};
  return names;
}

bool node_spec::has(const std::string& role) const {
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

bool node_spec::has_workers() const {
  return has("prefill") || has("decode") || has("worker");
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

std::vector<const node_spec*> cluster_config::router_nodes() const {
  std::vector<const node_spec*> out;
  for (const auto& n : nodes)
    if (n.has("router"))
      out.push_back(&n);
  return out;
}

const node_spec* cluster_config::frontend_node() const {
  for (const auto& n : nodes)
    if (n.has("frontend"))
      return &n;
  return nullptr;
}

config_reading read_cluster_config(std::string_view text, const std::string& name) {
  config_reading out;
  reader r{name};
  toml::table t;
  try {
    t = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << e.description() << " (line " << e.source().begin.line << ")";
    r.problem(os.str());
    out.problems = r.take_problems();
    return out;
  }
  auto& c = out.config;
  r.known_keys(t, top_keys, "");
  const toml::node_view<const toml::node> root{t};
  const auto max_tokens = static_cast<int64_t>(transport::wire::wire_limits{}.max_tokens);
  r.str(root["model"], "model", c.model);
  r.str(root["served_model_name"], "served_model_name", c.served_model_name);
  r.str(root["router_policy"], "router_policy", c.router_policy);
  r.num(root["max_local_prefill_tokens"], "max_local_prefill_tokens", 0, 1 << 24, c.max_local_prefill_tokens);
  r.str(root["router_load"], "router_load", c.router_load);
  if (c.router_load != "units" && c.router_load != "blocks")
    r.problem("'router_load' must be units or blocks, got " + quote_input(c.router_load));
  r.flt(root["router_sticky_break"], "router_sticky_break", 0.0, 1e6, c.router_sticky_break);
  if (c.router_sticky_break > 0 && c.router_sticky_break < 1)
    r.problem("'router_sticky_break' must be 0 (never) or >= 1, got " + std::to_string(c.router_sticky_break));
  r.flag(root["kv_admission"], "kv_admission", c.kv_admission);
  r.num(root["kv_admission_wait_ms"], "kv_admission_wait_ms", 0, 20000, c.kv_admission_wait_ms);
  r.flag(root["panic_routing"], "panic_routing", c.panic_routing);
  r.num(root["router_index_max_entries"], "router_index_max_entries", 0, int64_t{1} << 32,
        c.router_index_max_entries);
  r.num(root["late_grace_ms"], "late_grace_ms", 0, 600000, c.late_grace_ms);
  r.flt(root["slo_ttft_ms"], "slo_ttft_ms", 0.0, 1e7, c.slo_ttft_ms);
  r.flt(root["slo_itl_ms"], "slo_itl_ms", 0.0, 1e7, c.slo_itl_ms);
  r.str(root["transport"], "transport", c.transport);
  r.str(root["ucx_tls"], "ucx_tls", c.ucx_tls);
  r.str(root["cluster_secret_file"], "cluster_secret_file", c.cluster_secret_file);
  r.str(root["admin_key_file"], "admin_key_file", c.admin_key_file);
  r.str(root["api_keys_file"], "api_keys_file", c.api_keys_file);
  r.flag(root["protect_metrics"], "protect_metrics", c.protect_metrics);
  r.num(root["threads_per_worker"], "threads_per_worker", 0, 1024, c.threads_per_worker);
  r.num(root["kv_cache_mb"], "kv_cache_mb", 0, 1 << 20, c.kv_cache_mb);
  r.str(root["kv_dtype"], "kv_dtype", c.kv_dtype);
  if (c.kv_dtype != "bf16" && c.kv_dtype != "int8" && c.kv_dtype != "f32" && c.kv_dtype != "f16")
    r.problem("'kv_dtype' must be bf16, int8, f32 or f16, got " + quote_input(c.kv_dtype));
  // A prompt longer than the wire carries could never reach a worker.
  r.num(root["max_model_len"], "max_model_len", 0, max_tokens, c.max_model_len);
  read_speculative(r, root, c);
  r.num(root["kvstore_host_mb"], "kvstore_host_mb", 0, int64_t{1} << 30, c.kvstore_host_mb);
  r.str(root["kvstore_disk_dir"], "kvstore_disk_dir", c.kvstore_disk_dir);
  r.num(root["kvstore_disk_mb"], "kvstore_disk_mb", 1, int64_t{1} << 30, c.kvstore_disk_mb);
  r.num(root["kvstore_offer_mb"], "kvstore_offer_mb", 0, int64_t{1} << 20, c.kvstore_offer_mb);
  r.flag(root["kvstore_int8"], "kvstore_int8", c.kvstore_int8);
  r.flag(root["kv_remote_fetch"], "kv_remote_fetch", c.kv_remote_fetch);
  r.str(root["engine"], "engine", c.engine);
  r.flag(root["fault_injection"], "fault_injection", c.fault_injection);
  read_membership(r, root, c);
  if (auto sim = root["sim"]; sim)
    read_sim(r, sim, c.sim);
  const std::vector<std::string> policies{"kv", "round-robin", "random", "least-loaded"};
  if (std::find(policies.begin(), policies.end(), c.router_policy) == policies.end())
    r.problem("'router_policy' must be one of " + toml_reader::joined(policies) + ", got " +
              quote_input(c.router_policy) +
              did_you_mean(c.router_policy, policies));
  if (c.engine != "cpu" && c.engine != "sim")
    r.problem("'engine' must be cpu or sim, got " + quote_input(c.engine));
  if (c.transport != "ucx" && c.transport != "loopback")
    r.problem("'transport' must be ucx or loopback, got " + quote_input(c.transport));
  auto nodes = root["node"];
  auto* array = nodes.as_array();
  if (nodes && array == nullptr) {
    r.problem("'node' must be an array of tables: write each node as [[node]], not [node]");
  } else if (array == nullptr || array->empty()) {
    r.problem("no [[node]] tables");
  } else {
    std::set<std::string> ids, addresses;
    for (size_t i = 0; i < array->size(); ++i) {
      const size_t before = r.count();
      node_spec n;
      read_node(r, (*array)[i], i, n);
      const std::string at = "node[" + std::to_string(i) + "]";
      if (!n.id.empty() && !ids.insert(n.id).second)
        r.problem(at + ".id " + quote_input(n.id) + " is used twice");
      if (!n.address.empty() && !addresses.insert(n.address).second)
        r.problem(at + ".address " + quote_input(n.address) + " is used twice");
      if (r.count() == before)
        c.nodes.push_back(std::move(n));
    }
    if (r.count() == 0) {
      const auto routers = std::count_if(c.nodes.begin(), c.nodes.end(),
                                         [](const node_spec& n) { return n.has("router"); });
      // Several routers: every worker joins each, and each frontend routes
      // through any live one (actors/node/router_client.hpp).
      if (routers < 1)
        r.problem("at least one node must have the role router, found none");
      check_store_nodes(r, c);
    }
  }
  out.problems = r.take_problems();
  return out;
}

std::vector<std::string> resolve_cluster_addresses(const cluster_config& c, const std::string& name) {
  std::vector<std::string> problems;
  // Every endpoint some node listens on, resolved: two that share a port
  // and an address clash however they are spelt (localhost, 127.0.0.1).
  struct endpoint {
    std::string what;    // "node[1].address 'localhost:14000'"
    std::vector<std::string> ips;
    uint16_t port = 0;
  };
  std::vector<endpoint> endpoints;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const auto& n = c.nodes[i];
    const std::string at = "node[" + std::to_string(i) + "]";
    auto add = [&](const std::string& key, const std::string& host, uint16_t port, address_family family,
                   const std::string& spelt) {
      auto ips = resolve_host(host, family);
      if (!ips) {
        problems.push_back(name + ": " + at + "." + key + " " + quote_input(spelt) + ": " + error_message(ips.error()));
        return;
      }
      endpoints.push_back({at + "." + key + " " + quote_input(spelt), std::move(*ips), port});
    };
    auto a = parse_host_port(n.address, at + ".address", address_family::ipv4_only);
    if (a)
      add("address", a->host, a->port, address_family::ipv4_only, n.address);
    if (n.has("frontend"))
      add("http", n.http_host, n.http_port, address_family::any, join_host_port(n.http_host, n.http_port));
    if (n.metrics_port != 0)
      add("metrics", n.metrics_host, n.metrics_port, address_family::any,
          join_host_port(n.metrics_host, n.metrics_port));
  }
  for (size_t i = 0; i < endpoints.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const auto& x = endpoints[i];
      const auto& y = endpoints[j];
      if (x.port == 0 || x.port != y.port)
        continue;
      for (const auto& ip : x.ips)
        if (std::find(y.ips.begin(), y.ips.end(), ip) != y.ips.end()) {
          problems.push_back(name + ": " + x.what + " is the same address as " + y.what + " (both " +
                             join_host_port(ip, x.port) + "): give each a port of its own");
          break;
        }
    }
  return problems;
}

config_reading read_cluster_config_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    config_reading out;
    out.problems.push_back(file.string() + ": cannot read the file (does it exist?)");
    return out;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  auto out = read_cluster_config(buf.str(), file.string());
  auto& c = out.config;
  if (!c.cluster_secret_file.empty() && std::filesystem::path{c.cluster_secret_file}.is_relative())
    c.cluster_secret_file = (file.parent_path() / c.cluster_secret_file).string();
  if (!c.admin_key_file.empty() && std::filesystem::path{c.admin_key_file}.is_relative())
    c.admin_key_file = (file.parent_path() / c.admin_key_file).string();
  if (!c.api_keys_file.empty() && std::filesystem::path{c.api_keys_file}.is_relative())
    c.api_keys_file = (file.parent_path() / c.api_keys_file).string();
  // The nodes that did read are resolved even when others did not: every
  // problem at once.
  for (auto& p : resolve_cluster_addresses(c, file.string()))
    out.problems.push_back(std::move(p));
  return out;
}

caf::expected<node_spec> check_node_entry(const node_entry& e, const std::string& name) {
  toml::table t;
  t.insert("id", e.id);
  t.insert("address", e.address);
  toml::array roles;
  for (const auto& role : e.roles)
    roles.push_back(role);
  t.insert("roles", std::move(roles));
  t.insert("workers", e.workers);
  if (!e.http.empty())
    t.insert("http", e.http);
  if (!e.metrics.empty())
    t.insert("metrics", e.metrics);
  reader r{name};
  node_spec n;
  read_node(r, t, 0, n);
  if (!r.ok())
    return r.error();
  return n;
}

std::string node_entry_text(const node_spec& n) {
  toml::table t;
  t.insert("id", n.id);
  t.insert("address", n.address);
  toml::array roles;
  for (const auto& role : n.roles)
    roles.push_back(role);
  t.insert("roles", std::move(roles));
  t.insert("workers", int64_t{n.workers});
  if (n.has("frontend"))
    t.insert("http", join_host_port(n.http_host, n.http_port));
  if (n.metrics_port != 0)
    t.insert("metrics", join_host_port(n.metrics_host, n.metrics_port));
  if (!n.store.empty())
    t.insert("store", n.store);
  std::ostringstream os;
  os << t;
  return os.str();
}

caf::expected<node_spec> read_node_entry(std::string_view text, const std::string& name) {
  reader r{name};
  constexpr size_t max_entry_bytes = 16 << 10;
  if (text.size() > max_entry_bytes) {
    r.problem("an entry of " + std::to_string(text.size()) + " bytes (at most " + std::to_string(max_entry_bytes) +
              ")");
    return r.error();
  }
  toml::table t;
  try {
    t = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "not a node entry (TOML): " << e.description() << " (line " << e.source().begin.line << ")";
    r.problem(os.str());
    return r.error();
  }
  node_spec n;
  read_node(r, t, 0, n);
  if (!r.ok())
    return r.error();
  return n;
}

caf::expected<cluster_config> parse_cluster_config(std::string_view text, const std::string& name) {
  auto r = read_cluster_config(text, name);
  if (!r.problems.empty())
    return problems_error(r.problems);
  return std::move(r.config);
}

caf::expected<cluster_config> load_cluster_config(const std::filesystem::path& file) {
  auto r = read_cluster_config_file(file);
  if (!r.problems.empty())
    return problems_error(r.problems);
  return std::move(r.config);
}

} // namespace tessera::cluster
