#include "actors/node/node_parts.hpp"

#include <random>

#include "actors/common/token_sink.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors::detail {

node_actors::~node_actors() {
  front.reset();
  for (auto& w : workers)
    caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  if (router)
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  br.reset();
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

std::shared_ptr<const bridge_protocol> node_protocol() {
  auto p = std::make_shared<bridge_protocol>();
  p->add<worker_actor>().add<token_sink_actor>().add<router_actor>();
  return p;
}

caf::expected<started_worker> start_worker(caf::actor_system& sys, bridge& br,
                                           const loaded_model& model, const worker_spec& spec) {
  engine::backend_options bo;
  bo.choice = spec.engine;
  bo.threads = spec.threads;
  bo.kv_cache_bytes = spec.kv_cache_bytes;
  auto be = engine::make_backend({model.config, model.weights, model.tokenizer}, bo);
  if (!be)
    return be.error();
  started_worker out;
  out.backend = (*be)->description();
  engine::engine_config ec;
  ec.max_model_len = spec.max_model_len;
  auto eng = std::make_unique<engine::engine>(std::move(*be), ec, model.tokenizer);
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
  wc.worker_id = spec.worker_id;
  wc.roles = spec.roles;
  wc.metrics = spec.metrics;
  out.actor = spawn_worker(sys, std::move(eng), wc);
  caf::anon_send(br.actor(), publish_atom_v, spec.name, caf::actor_cast<caf::actor>(out.actor));
  return out;
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
  auto front = frontend::frontend::start(sys, fc);
  if (!front)
    return front.error();
  caf::anon_send(br.actor(), publish_atom_v, fc.name,
                 caf::actor_cast<caf::actor>((*front)->actor()));
  return front;
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
