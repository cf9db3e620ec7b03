#include "actors/node/node_parts.hpp"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/common/token_sink.hpp"
#include "actors/frontend/sdk_gateway.hpp"
#include "actors/kvstore/kvstore_intake.hpp"
#include "actors/node/router_gateway.hpp"
#include "actors/node/worker_supervisor.hpp"
#include "cluster/host_port.hpp"
#include "cluster/kv_hash_key.hpp"
#include "kvstore/heap_retention.hpp"
#include "kvstore/tiered_block_store.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors::detail {

namespace {

/// Waits (bounded) until `a` is gone after `stop` (a function of the
/// scoped actor that tells it to stop).
template <class Handle, class Stop>
void stop_and_wait(caf::actor_system& sys, const Handle& a, Stop stop) {
  caf::scoped_actor self{sys};
  self->monitor(a);
  stop(self);
  self->receive([](const caf::down_msg&) {}, caf::after(std::chrono::seconds{10}) >> [] {});
}

/// Whether `host` names this machine's loopback only (what a listener on
/// it can be reached from).
bool loopback_only(const std::string& host) {
  if (host == "localhost")
    return true;
  auto ips = cluster::resolve_host(host, cluster::address_family::any);
  if (!ips || ips->empty())
    return false;
  return std::all_of(ips->begin(), ips->end(),
                     [](const std::string& ip) { return ip.starts_with("127.") || ip == "::1"; });
}

} // namespace

node_actors::~node_actors() {
  front.reset();
  if (supervisor)
    supervisor->stop();
  // Wait for the store's actors: they use the store, which must close below
  // (a node started next on the same directory needs RocksDB's lock).
  if (store_actor)
    stop_and_wait(sys, store_actor,
                  [&](caf::scoped_actor& self) { self->send_exit(store_actor, caf::exit_reason::user_shutdown); });
  if (store_writer) { // after the offers the workers sent before they stopped
    const auto t0 = std::chrono::steady_clock::now();
    stop_and_wait(sys, store_writer, [&](caf::scoped_actor& self) {
      if (!stop_by)
        return self->send(store_writer, stop_atom_v);
      const auto budget = std::max<caf::timespan>(*stop_by - t0, std::chrono::seconds{1});
      self->send<caf::message_priority::high>(store_writer, stop_atom_v, caf::make_timestamp() + budget);
    });
    spdlog::info("kv store writer stopped in {:.2f} s",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (router)
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  br.reset();
  supervisor.reset();
  if (store) {
    const auto t0 = std::chrono::steady_clock::now();
    store.reset(); // writes the spills still queued, if it has a disk tier
    spdlog::info("kv store closed in {:.2f} s",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

caf::error bad_option(const std::string& what) {
  return engine::make_engine_error(engine::engine_errc::bad_request, what);
}

caf::expected<loaded_model> load_model(const std::filesystem::path& dir,
                                       engine::backend_kind kind) {
  auto files = engine::load_model_files(dir, kind);
  if (!files)
    return files.error();
  return loaded_model{std::move(files->config), std::move(files->weights),
                      std::move(files->tokenizer)};
}

caf::expected<engine::kv_hash_key> node_kv_hash_key(const std::string& cluster_secret,
                                                    const kvstore::block_store* store) {
  auto key_of = [](const cluster::kv_hash_key_bytes& b) { return engine::kv_hash_key_from_bytes(b); };
  if (!cluster_secret.empty())
    return key_of(cluster::kv_hash_key_from_secret(cluster_secret));
  if (store != nullptr) {
    const auto disk = store->disk_report();
    using outcome = kvstore::disk_open_report::outcome;
    if (disk.result == outcome::opened || disk.result == outcome::reset) {
      auto b = cluster::load_or_create_kv_hash_key(disk.dir);
      if (!b)
        return b.error();
      return key_of(*b);
    }
  }
  return engine::process_kv_hash_key();
}

std::shared_ptr<const bridge_protocol> node_protocol() {
  auto p = std::make_shared<bridge_protocol>();
  p->add<worker_actor>().add<token_sink_actor>().add<router_actor>().add<kvstore_actor>().add<router_api_actor>();
  p->add<sdk_gateway_actor>(); // SDK clients (sdk/)
  p->add<kvstore_intake_actor>(); // offers from workers of other nodes (store_node.hpp)
  return p;
}

caf::expected<started_worker> start_worker(caf::actor_system& sys, bridge& br,
                                           const loaded_model& model, const worker_spec& spec) {
  engine::backend_options bo;
  bo.choice = spec.engine;
  bo.threads = spec.threads;
  bo.kv_cache_bytes = spec.kv_cache_bytes;
  bo.kv_dtype = spec.kv_dtype;
  auto be = engine::make_backend({model.config, model.weights, model.tokenizer}, bo);
  if (!be)
    return be.error();
  started_worker out;
  out.backend = (*be)->description();
  engine::engine_config ec;
  ec.max_model_len = spec.max_model_len;
  ec.speculative = spec.speculative;
  ec.hash_key = spec.hash_key;
  auto eng = std::make_shared<engine::engine>(std::move(*be), ec, model.tokenizer);
  if (spec.draft) {
    auto dbe = engine::make_backend({spec.draft->config, spec.draft->weights, spec.draft->tokenizer}, bo);
    if (!dbe)
      return dbe.error();
    if (auto err = eng->attach_draft_model(std::move(*dbe)))
      return err;
  }
  out.max_model_len = eng->max_model_len();
  auto region = br.register_region(eng->get_backend().kv_pool_memory());
  if (!region)
    return region.error();
  worker_config wc;
  wc.node = spec.node;
  wc.name = spec.name;
  wc.bridge = br.actor();
  wc.pool_region = *region;
  wc.router = spec.router;
  wc.more_routers = spec.more_routers;
  wc.worker_id = spec.worker_id;
  wc.roles = spec.roles;
  wc.metrics = spec.metrics;
  wc.fault_injection = spec.fault_injection;
  wc.units = spec.units;
  wc.store = spec.store;
  wc.store_writer = spec.store_writer;
  wc.offer_max_bytes = spec.offer_max_bytes;
  if (spec.store) {
    wc.store_at = {spec.node, kvstore_config{}.name}; // start_kvstore_actor publishes it there
  } else if (!spec.store_node.empty()) { // store_node.hpp publishes both there
    wc.store_at = {spec.store_node, kvstore_config{}.name};
    wc.remote_store = {spec.store_node, kvstore_intake_name};
  }
  out.engine = eng;
  out.actor = spawn_worker(sys, std::move(eng), wc);
  caf::anon_send(br.actor(), publish_atom_v, spec.name, caf::actor_cast<caf::actor>(out.actor));
  return out;
}

caf::expected<std::shared_ptr<kvstore::block_store>> open_kv_store(const kv_store_spec& spec) {
  if (spec.host_bytes == 0)
    return std::shared_ptr<kvstore::block_store>{};
  kvstore::tiered_store_options o;
  o.host_capacity_bytes = spec.host_bytes;
  o.tier_codec = spec.int8 ? kvstore::block_codec::int8 : kvstore::block_codec::exact;
  if (!spec.disk_dir.empty()) {
    kvstore::rocksdb_tier_options d;
    d.dir = spec.disk_dir;
    d.capacity_bytes = spec.disk_bytes;
    o.disk = std::move(d);
  }
  // The store's reads and evictions churn block-sized buffers: keep freed
  // ones in the heap, up to what the store may hold (heap_retention.hpp).
  (void)kvstore::retain_freed_heap(o.host_capacity_bytes + o.spill_queue_bytes);
  auto s = kvstore::tiered_block_store::open(std::move(o));
  if (!s)
    return s.error();
  return std::shared_ptr<kvstore::block_store>{std::move(*s)};
}

kvstore_actor start_kvstore_actor(caf::actor_system& sys, bridge& br, std::shared_ptr<kvstore::block_store> store,
                                  const std::string& node, const transport::wire::actor_address& router,
                                  const engine::engine& eng, std::shared_ptr<cluster::metrics_registry> metrics,
                                  std::vector<transport::wire::actor_address> more_routers) {
  kvstore_config kc;
  kc.node = node;
  kc.bridge = br.actor();
  kc.store = std::move(store);
  kc.router = router;
  kc.more_routers = std::move(more_routers);
  kc.store_id = random_id_base() | 0xffffffull; // never a worker's id (those count up from a base)
  kc.hash_seed = eng.hash_seed();
  kc.model_fingerprint = eng.get_backend().model_fingerprint();
  kc.block_tokens = eng.get_backend().layout().block_tokens;
  kc.metrics = std::move(metrics);
  auto a = spawn_kvstore(sys, kc);
  caf::anon_send(br.actor(), publish_atom_v, kc.name, caf::actor_cast<caf::actor>(a));
  return a;
}

caf::expected<std::unique_ptr<frontend::frontend>>
start_frontend(caf::actor_system& sys, bridge& br, const router_local_actor& router,
               const loaded_model& model, const frontend_spec& spec) {
  frontend::frontend_config fc;
  fc.node = spec.node;
  fc.bridge = br.actor();
  fc.router = router;
  fc.tokenizer = model.tokenizer;
  auto chat = frontend::resolve_chat_template(model.tokenizer->settings().chat_template,
                                              spec.chat_template);
  if (auto* e = std::get_if<frontend::api_error>(&chat)) {
    if (!spec.chat_template.empty())
      return engine::make_engine_error(engine::engine_errc::bad_request,
                                       "--chat-template: " + e->message);
    // A template the model has but that cannot render: refuse to start.
    if (!model.tokenizer->settings().chat_template.empty())
      return engine::make_engine_error(engine::engine_errc::bad_request, e->message);
    fc.chat_error = e->message;
  } else {
    fc.chat = std::get<frontend::chat_template>(std::move(chat));
  }
  fc.model_name = spec.model_name;
  fc.max_model_len = spec.max_model_len;
  fc.limits = spec.limits;
  fc.http.host = spec.host;
  fc.http.port = spec.port;
  fc.http.threads = spec.http_threads;
  fc.metrics = spec.metrics;
  fc.supervisor = spec.supervisor;
  fc.admin_key = spec.admin_key;
  fc.api_keys = spec.api_keys;
  fc.protect_metrics = spec.protect_metrics;
  fc.units = spec.units;
  fc.late_grace = spec.late_grace;
  if (!spec.api_keys && !loopback_only(spec.host))
    spdlog::warn("frontend: listening on {} without API keys: anyone who can reach it may use the API "
                 "(give --api-keys FILE, or api_keys_file in the cluster config)",
                 spec.host);
  fc.health_kv_store = kv_store_health(spec.store.get());
  auto front = frontend::frontend::start(sys, fc);
  if (!front)
    return front.error();
  caf::anon_send(br.actor(), publish_atom_v, fc.name,
                 caf::actor_cast<caf::actor>((*front)->actor()));
  return front;
}

std::string kv_store_health(const kvstore::block_store* store) {
  if (!store)
    return {};
  const auto r = store->disk_report();
  using outcome = kvstore::disk_open_report::outcome;
  if (r.result != outcome::reset && r.result != outcome::disabled)
    return {};
  nlohmann::json j = {{"disk", kvstore::to_string(r.result)},
                      {"disk_reset", r.result == outcome::reset},
                      {"dir", r.dir.string()},
                      {"reason", r.reason}};
  if (!r.moved_to.empty())
    j["moved_to"] = r.moved_to.string();
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

caf::expected<std::shared_ptr<const cluster::api_key_table>> load_api_keys(const std::filesystem::path& file) {
  if (file.empty())
    return std::shared_ptr<const cluster::api_key_table>{};
  auto t = cluster::api_key_table::load(file);
  if (!t)
    return t.error();
  return std::make_shared<const cluster::api_key_table>(std::move(*t));
}

caf::error reload_api_keys(frontend::frontend& front, const std::filesystem::path& file) {
  auto t = load_api_keys(file);
  if (!t)
    return t.error();
  spdlog::info("frontend: API keys reloaded from {}: {} key(s) of {} tenant(s)", file.string(), (*t)->key_count(),
               (*t)->tenants().size());
  front.set_api_keys(std::move(*t));
  return {};
}

int32_t model_len(const loaded_model& model, int32_t max_model_len) {
  const auto positions = static_cast<int32_t>(model.config.max_position_embeddings);
  return max_model_len > 0 ? std::min(max_model_len, positions) : positions;
}

uint64_t random_id_base() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ (static_cast<uint64_t>(rd()) << 16);
}

} // namespace tessera::actors::detail
