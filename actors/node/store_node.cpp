#include "actors/node/store_node.hpp"

#include <algorithm>

#include "actors/node/worker_supervisor.hpp"
#include "engine/engine.hpp"
#include "engine/kv_int8.hpp"

namespace tessera::actors::detail {

namespace {

/// An engine of the cluster's model and KV settings with the smallest pool
/// the backend takes: its namespace, layout and fingerprint are what the
/// workers' engines have.
caf::expected<std::unique_ptr<engine::engine>> namespace_engine(const cluster::cluster_config& cfg,
                                                                const loaded_model& model,
                                                                const engine::backend_choice& choice,
                                                                const engine::kv_hash_key& key) {
  engine::backend_options bo;
  bo.choice = choice;
  bo.threads = 1;
  bo.kv_dtype = engine::parse_kv_dtype(cfg.kv_dtype).value_or(engine::dtype::bf16); // checked by the parser
  bo.kv_cache_bytes = size_t{4} << 20;
  auto be = engine::make_backend({model.config, model.weights, model.tokenizer}, bo);
  if (!be) { // a model whose block is larger than 4 MiB: the workers' pool size
    bo.kv_cache_bytes = cfg.kv_cache_mb << 20;
    be = engine::make_backend({model.config, model.weights, model.tokenizer}, bo);
  }
  if (!be)
    return be.error();
  engine::engine_config ec;
  ec.max_model_len = cfg.max_model_len;
  ec.hash_key = key;
  return std::make_unique<engine::engine>(std::move(*be), ec, model.tokenizer);
}

} // namespace

caf::expected<kvstore_intake_actor> start_store_node(node_actors& p, const cluster::cluster_config& cfg,
                                                     const loaded_model& model, const engine::backend_choice& choice,
                                                     const store_node_spec& spec) {
  if (!p.store) {
    auto store = open_kv_store({cfg.kvstore_host_mb << 20,
                                cfg.kvstore_disk_dir.empty() ? std::filesystem::path{}
                                                             : std::filesystem::path{cfg.kvstore_disk_dir} / spec.node,
                                cfg.kvstore_disk_mb << 20, cfg.kvstore_int8});
    if (!store)
      return store.error();
    if (!*store)
      return bad_option("node '" + spec.node + "' has the role kvstore but kvstore_host_mb = 0");
    p.store = std::move(*store);
  }
  if (!p.store_writer)
    p.store_writer = spawn_kvstore_writer(p.sys, p.store);
  auto eng = namespace_engine(cfg, model, choice, spec.hash_key);
  if (!eng)
    return eng.error();
  if (!p.store_actor)
    p.store_actor =
      start_kvstore_actor(p.sys, *p.br, p.store, spec.node, spec.router, **eng, spec.metrics, spec.more_routers);
  kvstore_intake_config ic;
  ic.writer = p.store_writer;
  ic.ns = (*eng)->hash_seed();
  ic.layout = (*eng)->get_backend().layout();
  ic.metrics = spec.metrics;
  auto intake = spawn_kvstore_intake(p.sys, std::move(ic));
  caf::anon_send(p.br->actor(), publish_atom_v, std::string{kvstore_intake_name}, caf::actor_cast<caf::actor>(intake));
  return intake;
}

std::map<std::string, std::string> store_nodes_of(const cluster::cluster_config& cfg) {
  std::map<std::string, std::string> out;
  for (const auto& n : cfg.nodes)
    if (!n.store.empty())
      out[n.id] = n.store;
  return out;
}

} // namespace tessera::actors::detail
