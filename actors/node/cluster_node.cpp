#include "actors/node/cluster_node.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/node/metrics_endpoint.hpp"
#include "actors/node/engine_choice.hpp"
#include "actors/node/node_parts.hpp"
#include "actors/node/peer_links.hpp"
#include "actors/node/router_client.hpp"
#include "actors/node/router_gateway.hpp"
#include "actors/node/store_node.hpp"
#include "actors/node/worker_supervisor.hpp"
#include "cluster/cluster_secret.hpp"
#include "cluster/kv_hash_key.hpp"
#include "common/error.hpp"
#include "engine/draft_model.hpp"
#include "engine/engine_errc.hpp"
#include "engine/kv_int8.hpp"
#include "engine/speculative.hpp"
#include "transport/faults/fault_transport.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace tessera::actors {

namespace wire = transport::wire;

struct cluster_node::impl : detail::node_actors {
  using node_actors::node_actors;
  std::filesystem::path api_keys_file;
  /// Its connections to the other nodes (static list or etcd).
  std::unique_ptr<detail::peer_links> links;
  std::unique_ptr<frontend::http_server> metrics_http;
  /// With a router: its gateway for frontends on other nodes. With a
  /// frontend and several routers (or none here): the frontend's router.
  router_api_actor router_gateway;
  router_local_actor router_client;
  /// With the role kvstore: the store's intake (store_node.hpp).
  kvstore_intake_actor store_intake;

  ~impl() {
    links.reset(); // leaves etcd first: peers drop this node at once
    if (router_gateway)
      caf::anon_send_exit(router_gateway, caf::exit_reason::user_shutdown);
    if (router_client)
      caf::anon_send_exit(router_client, caf::exit_reason::user_shutdown);
    if (store_intake)
      caf::anon_send_exit(store_intake, caf::exit_reason::user_shutdown);
  }
};

caf::expected<std::unique_ptr<cluster_node>>
cluster_node::start(caf::actor_system& sys, const cluster::cluster_config& cfg,
                    const std::string& node_id, const std::filesystem::path& model_dir,
                    std::function<void(const std::string&)> progress, bool insecure) {
  auto say = [&](const std::string& line) {
    if (progress)
      progress(line);
  };
  const auto* me = cfg.node(node_id);
  if (me == nullptr)
    return detail::bad_option("the config has no node '" + node_id + "'");
  if (cfg.transport != "ucx")
    return detail::bad_option("a multi-process cluster needs transport = \"ucx\" (loopback is in-process: "
                      "use tessera serve)");
  // With etcd, nodes the file does not list may join: never a lone node.
  const bool several_nodes = cfg.nodes.size() > 1 || cfg.membership == "etcd";
  std::string secret;
  if (!cfg.cluster_secret_file.empty()) {
    auto s = cluster::load_cluster_secret(cfg.cluster_secret_file);
    if (!s)
      return s.error();
    secret = std::move(*s);
  } else if (several_nodes && !insecure) {
    return detail::bad_option(
      "a cluster of several nodes needs a cluster secret: set cluster_secret_file in the config "
      "(or --cluster-secret-file; make one with: umask 077; head -c 32 /dev/urandom | base64 > "
      "cluster.secret, and copy it to every host), or pass --insecure to run without one");
  } else if (several_nodes) {
    spdlog::warn("node '{}': --insecure: no cluster secret, so any process that reaches {} (or "
                 "UCX's ports) can join this cluster, call its actors and write into its memory",
                 node_id, me->address);
  }
  // A frontend's bad key file stops the start before the model loads.
  auto api_keys = detail::load_api_keys(me->has("frontend") ? cfg.api_keys_file : std::string{});
  if (!api_keys)
    return api_keys.error();
  // Every node names KV blocks with the same key: derived from the cluster
  // secret. Without one, several (insecure) nodes share a key anyone can
  // derive, and a lone node keeps a random one per process.
  const engine::kv_hash_key hash_key =
    !secret.empty() || several_nodes
      ? engine::kv_hash_key_from_bytes(cluster::kv_hash_key_from_secret(secret))
      : engine::process_kv_hash_key();
  if (secret.empty() && several_nodes)
    spdlog::warn("node '{}': --insecure: KV block hashes use a key anyone can derive, so cached prompts "
                 "can be probed by hash",
                 node_id);
  say("loading " + model_dir.string());
  const auto engine = detail::backend_choice_of(cfg);
  auto model = detail::load_model(model_dir, engine.kind);
  if (!model)
    return model.error();
  auto units = engine::serving_units(model_dir.string(),
                                     engine::units_engine_key(engine::to_string(engine.kind), engine.sim.gpu));
  if (!units)
    return units.error();
  // This node's workers' units: their own device's (node sim_gpu), else
  // the cluster's.
  auto worker_units = me->sim_gpu.empty() || engine.kind != engine::backend_kind::sim
                        ? units
                        : engine::serving_units(model_dir.string(),
                                                engine::units_engine_key(engine::to_string(engine.kind), me->sim_gpu));
  if (!worker_units)
    return worker_units.error();
  // The draft model, for the workers only: each attaches it to its engine
  // (a prefill worker too, so it takes the requests that name method draft
  // as the decode worker does; the decode worker drafts).
  std::shared_ptr<const detail::loaded_model> draft;
  if (me->has_workers() && !cfg.draft_model.empty()) {
    say("loading draft model " + cfg.draft_model);
    auto refused = [&](const caf::error& why) {
      return detail::bad_option("draft_model '" + cfg.draft_model + "': " + error_message(why));
    };
    auto d = detail::load_model(cfg.draft_model, engine.kind);
    if (!d)
      return refused(d.error());
    if (auto err = engine::check_draft_tokenizer(*model->tokenizer, *d->tokenizer))
      return refused(err);
    draft = std::make_shared<const detail::loaded_model>(std::move(*d));
  }
  engine::speculative_params speculative; // read_cluster_config refused what the parser does not take
  if (auto s = engine::parse_speculative(cfg.speculative))
    speculative = *s;

  transport::transport_options to;
  to.cluster_secret = secret;
  to.identity = node_id;
  to.grants_only = !secret.empty();
  transport::ucx_options uo;
  uo.tls = cfg.ucx_tls;
  // UCX listens only on the configured address's interface.
  uo.net_address = me->address.substr(0, me->address.rfind(':'));
  // UCX 1.13 keeps peer error handling to tcp lanes only (FACTS.md): with
  // shared memory selected it is off, so a dead peer is noticed later.
  uo.peer_error_handling = cfg.ucx_tls.find("sm") == std::string::npos;
  auto tr = transport::ucx_transport::make(to, uo);
  if (!tr)
    return tr.error();
  std::unique_ptr<transport::transport> wire = std::move(*tr);
  // Fault injection (a test cluster under tessera chaos): the transport
  // goes through the fault decorator, with no fault until a plan comes
  // (POST /admin/faults on the metrics endpoint). The bridge owns it and
  // outlives the endpoint (impl's members go before node_actors').
  transport::fault_transport* faults = nullptr;
  // The operator's admin key: the frontend's /admin/* and a fault-injecting
  // node's POST /admin/faults take it (none: /admin/* is closed, and fault
  // injection is refused, since its endpoint would be open to anyone).
  std::string admin_key;
  if (!cfg.admin_key_file.empty()) {
    auto key = cluster::load_cluster_secret(cfg.admin_key_file);
    if (!key)
      return key.error();
    admin_key = std::move(*key);
  }
  if (cfg.fault_injection && admin_key.empty())
    return caf::make_error(caf::sec::invalid_argument,
                           "node '" + node_id + "': fault injection needs admin_key_file in the cluster config "
                           "(POST /admin/faults takes the admin key; without one anyone reaching the metrics port "
                           "could cut the node off)");
  if (cfg.fault_injection) {
    auto f = std::make_unique<transport::fault_transport>(std::move(wire), transport::fault_plan{});
    faults = f.get();
    wire = std::move(f);
    spdlog::warn("node '{}': fault injection is on: POST /admin/faults on its metrics endpoint changes what its "
                 "transport drops, delays or cuts off (a test cluster only)",
                 node_id);
  }
  auto p = std::make_unique<impl>(sys);
  auto metrics = std::make_shared<cluster::metrics_registry>();
  p->br = std::make_unique<bridge>(sys, std::move(wire),
                                   bridge_config{node_id, detail::node_protocol(),
                                                 std::chrono::seconds{30}, {}, metrics});
  auto bound = p->br->transport().listen(me->address);
  if (!bound)
    return bound.error();
  say("node '" + node_id + "' listening on " + *bound + " (ucx " + cfg.ucx_tls + ")");

  // Every worker and store joins every router (each keeps the whole prefix
  // index); the first is worker_spec::router, the rest more_routers.
  const wire::actor_address router_at{cfg.router_node().id, "router"};
  std::vector<wire::actor_address> more_routers;
  for (const auto* n : cfg.router_nodes())
    if (n->id != router_at.node)
      more_routers.push_back({n->id, "router"});
  if (me->has("router")) {
    router_config rc;
    rc.policy = cfg.router_policy;
    rc.options.max_local_prefill_tokens = cfg.max_local_prefill_tokens;
    rc.options.remote_fetch = cfg.kv_remote_fetch;
    rc.options.units = *units;
    rc.options.load = cfg.router_load == "blocks" ? load_measure::blocks : load_measure::units;
    rc.options.sticky_break_factor = cfg.router_sticky_break;
    rc.options.panic_routing = cfg.panic_routing;
    rc.index.max_entries = static_cast<size_t>(cfg.router_index_max_entries);
    rc.kv_admission.enabled = cfg.kv_admission;
    rc.kv_admission.max_wait = std::chrono::milliseconds{cfg.kv_admission_wait_ms};
    rc.autoscale.slo_ttft_ms = cfg.slo_ttft_ms;
    rc.autoscale.slo_itl_ms = cfg.slo_itl_ms;
    rc.autoscale.worker_units_per_second = // units are ms of (modelled) worker time
      engine.kind == engine::backend_kind::sim && engine.sim.time_scale > 0 ? 1000.0 / engine.sim.time_scale : 1000.0;
    rc.metrics = metrics; // the autoscaling signal (with the frontend's latency, on its node)
    rc.bridge = caf::actor_cast<caf::actor>(p->br->actor());
    rc.node = node_id; // health canaries' tokens come back here
    rc.hash_key = hash_key;
    rc.store_nodes = detail::store_nodes_of(cfg); // workers that use a store node's store
    auto router = spawn_router(sys, rc);
    if (!router)
      return router.error();
    p->router = *router;
    caf::anon_send(p->br->actor(), publish_atom_v, std::string{"router"},
                   caf::actor_cast<caf::actor>(p->router));
    caf::anon_send(p->br->actor(), watch_atom_v, caf::actor_cast<caf::actor>(p->router));
    // Frontends on other nodes route through it (router_gateway.hpp).
    p->router_gateway = spawn_router_gateway(sys, p->router);
    caf::anon_send(p->br->actor(), publish_atom_v, std::string{router_api_name},
                   caf::actor_cast<caf::actor>(p->router_gateway));
  }
  std::vector<wire::node_role> roles;
  if (me->has("prefill") || me->has("worker"))
    roles.push_back(wire::node_role::prefill);
  if (me->has("decode") || me->has("worker"))
    roles.push_back(wire::node_role::decode);
  if (!roles.empty()) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const uint64_t id_base = detail::random_id_base();
    const std::string kind = roles.size() == 2 ? "worker" : me->has("prefill") ? "prefill" : "decode";
    // A node that names a store node (`store`) keeps none of its own: its
    // workers offer to and fetch from that one (store_node.hpp).
    auto store = detail::open_kv_store(
      {me->store.empty() ? cfg.kvstore_host_mb << 20 : 0,
       cfg.kvstore_disk_dir.empty() ? std::filesystem::path{} : std::filesystem::path{cfg.kvstore_disk_dir} / node_id,
       cfg.kvstore_disk_mb << 20, cfg.kvstore_int8});
    if (!store)
      return store.error();
    p->store = std::move(*store);
    if (p->store)
      p->store_writer = spawn_kvstore_writer(sys, p->store);
    std::shared_ptr<engine::engine> any_engine;
    p->supervisor = std::make_unique<detail::worker_supervisor>(
      sys, *p->br, *model, detail::supervisor_options{3, std::chrono::seconds{60}, metrics});
    for (int i = 0; i < me->workers; ++i) {
      detail::worker_spec spec;
      spec.node = node_id;
      spec.name = kind + "-" + std::to_string(i);
      spec.roles = roles;
      spec.threads = cfg.threads_per_worker > 0 ? cfg.threads_per_worker
                                                : std::max(1, cores / me->workers);
      spec.kv_cache_bytes = cfg.kv_cache_mb << 20;
      spec.kv_dtype = engine::parse_kv_dtype(cfg.kv_dtype).value_or(engine::dtype::bf16); // checked by the parser
      spec.engine = engine;
      if (!me->sim_gpu.empty())
        spec.engine.sim.gpu = me->sim_gpu;
      spec.max_model_len = cfg.max_model_len;
      spec.speculative = speculative;
      spec.draft = draft;
      spec.worker_id = id_base + static_cast<uint64_t>(i);
      spec.router = router_at;
      spec.more_routers = more_routers;
      spec.metrics = metrics;
      spec.store = p->store;
      spec.store_writer = p->store_writer;
      spec.store_node = me->store;
      spec.offer_max_bytes = cfg.kvstore_offer_mb << 20;
      spec.units = *worker_units;
      spec.hash_key = hash_key;
      say("starting " + spec.name);
      auto w = p->supervisor->start(spec);
      if (!w)
        return w.error();
      any_engine = w->engine;
    }
    if (p->store)
      p->store_actor =
        detail::start_kvstore_actor(sys, *p->br, p->store, node_id, router_at, *any_engine, metrics, more_routers);
  }
  if (me->has("kvstore")) {
    // A store for the workers of other nodes (and this node's, if any).
    auto intake = detail::start_store_node(*p, cfg, *model, engine,
                                           {node_id, router_at, more_routers, metrics, hash_key});
    if (!intake)
      return intake.error();
    p->store_intake = *intake;
    say("kv store '" + node_id + "' serving other nodes (" + std::to_string(cfg.kvstore_host_mb) + " MiB host" +
        (cfg.kvstore_disk_dir.empty() ? std::string{}
                                      : ", disk under " + cfg.kvstore_disk_dir + "/" + node_id) + ")");
  }
  if (me->has("frontend")) {
    detail::frontend_spec fs;
    fs.node = node_id;
    fs.model_name = cfg.served_model_name.empty() ? model_dir.filename().string()
                                                  : cfg.served_model_name;
    fs.max_model_len = detail::model_len(*model, cfg.max_model_len);
    fs.host = me->http_host;
    fs.port = me->http_port;
    fs.metrics = metrics;
    fs.store = p->store;
    fs.units = *units;
    fs.late_grace = std::chrono::milliseconds{cfg.late_grace_ms};
    fs.admin_key = admin_key;
    fs.api_keys = std::move(*api_keys);
    fs.protect_metrics = cfg.protect_metrics;
    p->api_keys_file = cfg.api_keys_file;
    // The frontend's router: this node's, else (or also, with several) the
    // routers of other nodes through a router client that fails over.
    router_local_actor front_router = p->router;
    if (!p->router || !more_routers.empty()) {
      router_client_config rcc;
      rcc.bridge = p->br->actor();
      if (p->router)
        rcc.routers.push_back({node_id, p->router});
      for (const auto* n : cfg.router_nodes())
        if (n->id != node_id)
          rcc.routers.push_back({n->id, {}});
      auto client = spawn_router_client(sys, std::move(rcc));
      if (!client)
        return client.error();
      p->router_client = *client;
      caf::anon_send(p->br->actor(), watch_atom_v, caf::actor_cast<caf::actor>(p->router_client));
      front_router = p->router_client;
    }
    auto front = detail::start_frontend(sys, *p->br, front_router, *model, fs);
    if (!front)
      return front.error();
    p->front = std::move(*front);
    caf::anon_send(p->br->actor(), watch_atom_v, caf::actor_cast<caf::actor>(p->front->actor()));
  }
  if (me->metrics_port != 0) {
    detail::fault_control control;
    if (faults)
      control = [faults, node_id](const std::string& text) -> caf::error {
        auto plan = transport::fault_plan::parse(text);
        if (!plan)
          return std::move(plan.error());
        spdlog::warn("node '{}': fault plan now '{}'", node_id, plan->to_string());
        faults->set_plan(std::move(*plan));
        return {};
      };
    auto http = detail::start_metrics_endpoint(me->metrics_host, me->metrics_port, metrics, std::move(control),
                                             admin_key);
    if (!http)
      return http.error();
    p->metrics_http = std::move(*http);
    say("metrics on " + p->metrics_http->url() + "/metrics");
  }
  // One connection per pair of nodes, to the nodes the config lists or
  // etcd knows (peer_links.hpp).
  auto links = detail::peer_links::start(sys, p->br->actor(), p->router, cfg, *me);
  if (!links)
    return links.error();
  p->links = std::move(*links);
  return std::unique_ptr<cluster_node>(new cluster_node(std::move(p)));
}

cluster_node::cluster_node(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
cluster_node::~cluster_node() = default;

void cluster_node::drain(std::chrono::milliseconds timeout) {
  impl_->draining(timeout);
  if (impl_->front)
    impl_->front->drain(timeout);
}

caf::error cluster_node::reload_api_keys() {
  if (!impl_->front || impl_->api_keys_file.empty())
    return detail::bad_option("no API key file to reload (this node runs no frontend, or its config has no "
                              "api_keys_file)");
  return detail::reload_api_keys(*impl_->front, impl_->api_keys_file);
}

std::string cluster_node::url() const {
  return impl_->front ? impl_->front->url() : std::string{};
}

} // namespace tessera::actors
