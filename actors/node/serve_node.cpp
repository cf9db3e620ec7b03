#include "actors/node/serve_node.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include "actors/node/node_parts.hpp"
#include "actors/node/worker_supervisor.hpp"
#include "cluster/cluster_secret.hpp"
#include "common/error.hpp"
#include "engine/draft_model.hpp"
#include "engine/engine_errc.hpp"
#include "engine/kv_int8.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {

namespace wire = transport::wire;

struct serve_node::impl : detail::node_actors {
  using node_actors::node_actors;
  std::string model_name;
  std::string description;
  std::filesystem::path api_keys_file;
};

namespace {

constexpr const char* node_id = "local";

/// Waits (bounded) until the router knows `n` workers.
caf::error await_workers(caf::actor_system& sys, const router_local_actor& router, size_t n) {
  caf::scoped_actor self{sys};
  for (int tries = 0; tries < 500; ++tries) {
    size_t seen = 0;
    self->request(router, std::chrono::seconds{5}, workers_atom_v)
      .receive([&](const std::vector<router_worker_view>& ws) { seen = ws.size(); },
               [](caf::error&) {});
    if (seen >= n)
      return {};
    self->receive(caf::after(std::chrono::milliseconds{10}) >> [] {});
  }
  return detail::bad_option("the workers did not join the router within 5 s");
}

} // namespace

caf::expected<std::unique_ptr<serve_node>> serve_node::start(caf::actor_system& sys,
                                                             serve_options opts) {
  auto say = [&](const std::string& line) {
    if (opts.progress)
      opts.progress(line);
  };
  const bool disagg = opts.mode == "disagg";
  if (!disagg && opts.mode != "agg")
    return detail::bad_option("--mode must be disagg or agg, got '" + opts.mode + "'");
  if (opts.decode_workers < 1 || (disagg && opts.prefill_workers < 1))
    return detail::bad_option("--decode (and with disagg --prefill) must be at least 1");
  const int n_workers = opts.decode_workers + (disagg ? opts.prefill_workers : 0);
  if (!opts.sim_worker_gpus.empty() && opts.engine.kind != engine::backend_kind::sim)
    return detail::bad_option("--sim-worker-gpus needs --engine sim");

  // A bad key file stops the start before the model loads.
  auto api_keys = detail::load_api_keys(opts.api_keys_file);
  if (!api_keys)
    return api_keys.error();

  say("loading " + opts.model_dir.string());
  auto model = detail::load_model(opts.model_dir, opts.engine.kind);
  if (!model)
    return model.error();
  std::shared_ptr<const detail::loaded_model> draft;
  if (!opts.draft_model_dir.empty()) {
    say("loading draft model " + opts.draft_model_dir.string());
    auto d = detail::load_model(opts.draft_model_dir, opts.engine.kind);
    if (!d)
      return d.error();
    if (auto err = engine::check_draft_tokenizer(*model->tokenizer, *d->tokenizer))
      return err;
    draft = std::make_shared<const detail::loaded_model>(std::move(*d));
  }

  auto p = std::make_unique<impl>(sys);
  p->model_name = opts.model_name.empty() ? opts.model_dir.filename().string() : opts.model_name;
  p->api_keys_file = opts.api_keys_file;
  p->br = std::make_unique<bridge>(
    sys, std::make_unique<transport::loopback_transport>(transport::loopback_fabric::make()),
    bridge_config{node_id, detail::node_protocol(), std::chrono::seconds{30}, {}});
  // Each device's units, read once per preset: the router's and the
  // frontend's default are engine.sim.gpu's (or the CPU's).
  std::map<std::string, engine::model_units> units_by_gpu;
  auto units_for = [&](const std::string& gpu) -> caf::expected<engine::model_units> {
    if (auto it = units_by_gpu.find(gpu); it != units_by_gpu.end())
      return it->second;
    auto u = engine::serving_units(opts.model_dir.string(),
                                   engine::units_engine_key(engine::to_string(opts.engine.kind), gpu));
    if (u)
      units_by_gpu[gpu] = *u;
    return u;
  };
  auto units = units_for(opts.engine.sim.gpu);
  if (!units)
    return units.error();
  auto metrics = std::make_shared<cluster::metrics_registry>();
  auto store = detail::open_kv_store(
    {opts.kv_store_host_bytes, opts.kv_store_disk_dir, opts.kv_store_disk_bytes, opts.kv_store_int8});
  if (!store)
    return store.error();
  p->store = std::move(*store);
  if (p->store)
    p->store_writer = spawn_kvstore_writer(sys, p->store);
  // The block-hash key of the router and every engine: kept beside the
  // disk tier (opened above, so a reset has already happened) or per process.
  auto hash_key = detail::node_kv_hash_key({}, p->store.get());
  if (!hash_key)
    return hash_key.error();
  auto rc = opts.router;
  rc.hash_key = *hash_key;
  rc.options.units = *units;
  rc.metrics = metrics; // the autoscaling signal
  if (rc.autoscale.worker_units_per_second <= 0) // units are ms of (modelled) worker time
    rc.autoscale.worker_units_per_second =
      opts.engine.kind == engine::backend_kind::sim && opts.engine.sim.time_scale > 0 ? 1000.0 / opts.engine.sim.time_scale
                                                                                       : 1000.0;
  rc.bridge = caf::actor_cast<caf::actor>(p->br->actor());
  rc.node = node_id; // health canaries' tokens come back here
  auto router = spawn_router(sys, rc);
  if (!router)
    return router.error();
  p->router = *router;
  caf::anon_send(p->br->actor(), publish_atom_v, std::string{"router"},
                 caf::actor_cast<caf::actor>(p->router));

  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const uint64_t id_base = detail::random_id_base();
  std::vector<std::string> backend_names; // distinct, in start order
  std::shared_ptr<engine::engine> any_engine;
  p->supervisor = std::make_unique<detail::worker_supervisor>(sys, *p->br, *model,
                                                              detail::supervisor_options{3, std::chrono::seconds{60}, metrics});
  for (int i = 0; i < n_workers; ++i) {
    const bool prefill = disagg && i < opts.prefill_workers;
    detail::worker_spec spec;
    spec.node = node_id;
    spec.name = disagg ? (prefill ? "prefill-" + std::to_string(i)
                                  : "decode-" + std::to_string(i - opts.prefill_workers))
                       : "worker-" + std::to_string(i);
    spec.roles = {wire::node_role::prefill, wire::node_role::decode};
    if (disagg)
      spec.roles = {prefill ? wire::node_role::prefill : wire::node_role::decode};
    spec.threads = opts.threads_per_worker > 0 ? opts.threads_per_worker : std::max(1, cores / n_workers);
    spec.kv_cache_bytes = opts.kv_cache_bytes;
    spec.kv_dtype = opts.kv_dtype;
    spec.engine = opts.engine;
    spec.units = *units;
    if (!opts.sim_worker_gpus.empty()) {
      const int k = disagg && !prefill ? i - opts.prefill_workers : i; // index within its role
      spec.engine.sim.gpu = opts.sim_worker_gpus[static_cast<size_t>(k) % opts.sim_worker_gpus.size()];
      auto own = units_for(spec.engine.sim.gpu);
      if (!own)
        return own.error();
      spec.units = *own;
    }
    spec.max_model_len = opts.max_model_len;
    spec.speculative = opts.speculative;
    spec.draft = draft;
    spec.worker_id = id_base + static_cast<uint64_t>(i);
    spec.router = {node_id, "router"};
    spec.metrics = metrics;
    spec.fault_injection = opts.fault_injection;
    spec.store = p->store;
    spec.store_writer = p->store_writer;
    spec.offer_max_bytes = opts.kv_offer_max_bytes;
    spec.hash_key = *hash_key;
    say("starting " + spec.name);
    auto w = p->supervisor->start(spec);
    if (!w)
      return w.error();
    if (std::find(backend_names.begin(), backend_names.end(), w->backend) == backend_names.end())
      backend_names.push_back(w->backend);
    any_engine = w->engine;
  }
  p->description = disagg ? std::to_string(opts.prefill_workers) + " prefill + " +
                              std::to_string(opts.decode_workers) + " decode worker(s)"
                          : std::to_string(opts.decode_workers) + " worker(s)";
  std::string backends;
  for (const auto& b : backend_names)
    backends += (backends.empty() ? "" : " or ") + b;
  p->description += ", " + backends + " each, " + std::string{engine::kv_dtype_name(opts.kv_dtype)} +
                    " KV, router " + opts.router.policy;
  if (p->store) {
    p->store_actor = detail::start_kvstore_actor(sys, *p->br, p->store, node_id, {node_id, "router"},
                                                 *any_engine, metrics);
    p->description += ", kv store " + std::to_string(opts.kv_store_host_bytes >> 20) + " MiB host" +
                      (opts.kv_store_disk_dir.empty() ? std::string{}
                                                      : " + " + std::to_string(opts.kv_store_disk_bytes >> 20) +
                                                          " MiB disk at " + opts.kv_store_disk_dir.string()) +
                      (opts.kv_store_int8 ? ", int8 blocks" : "");
  }

  detail::frontend_spec fs;
  fs.node = node_id;
  fs.model_name = p->model_name;
  fs.max_model_len = detail::model_len(*model, opts.max_model_len);
  fs.chat_template = opts.chat_template;
  fs.host = opts.host;
  fs.port = opts.port;
  fs.http_threads = opts.http_threads;
  fs.late_grace = opts.late_grace;
  fs.limits = opts.limits;
  fs.metrics = metrics;
  fs.units = *units;
  fs.store = p->store;
  if (opts.fault_injection)
    fs.supervisor = p->supervisor->actor();
  if (!opts.admin_key_file.empty()) {
    auto key = cluster::load_cluster_secret(opts.admin_key_file);
    if (!key)
      return key.error();
    fs.admin_key = std::move(*key);
  }
  fs.api_keys = std::move(*api_keys);
  fs.protect_metrics = opts.protect_metrics;
  auto front = detail::start_frontend(sys, *p->br, p->router, *model, fs);
  if (!front)
    return front.error();
  p->front = std::move(*front);
  if (auto err = await_workers(sys, p->router, static_cast<size_t>(n_workers)))
    return err;
  return std::unique_ptr<serve_node>(new serve_node(std::move(p)));
}

serve_node::serve_node(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
serve_node::~serve_node() = default;

void serve_node::drain(std::chrono::milliseconds timeout) {
  impl_->draining(timeout);
  impl_->front->drain(timeout);
}

caf::error serve_node::reload_api_keys() {
  if (impl_->api_keys_file.empty())
    return detail::bad_option("no API key file to reload (start with --api-keys FILE)");
  return detail::reload_api_keys(*impl_->front, impl_->api_keys_file);
}

std::string serve_node::url() const {
  return impl_->front->url();
}

const std::string& serve_node::model_name() const {
  return impl_->model_name;
}

const std::string& serve_node::description() const {
  return impl_->description;
}

} // namespace tessera::actors
