#include "actors/node/serve_node.hpp"

#include <random>
#include <thread>

#include "actors/bridge/bridge_actor.hpp"
#include "actors/frontend/frontend_actor.hpp"
#include "actors/worker/worker_actor.hpp"
#include "cluster/metrics.hpp"
#include "common/error.hpp"
#include "engine/cpu/cpu_backend.hpp"
#include "engine/engine_errc.hpp"
#include "engine/tokenizer.hpp"
#include "engine/weights.hpp"
#include "transport/loopback/loopback_transport.hpp"

namespace tessera::actors {

namespace wire = transport::wire;

struct serve_node::impl {
  caf::actor_system& sys;
  std::string model_name;
  std::string description;
  std::unique_ptr<bridge> br;
  router_local_actor router;
  std::vector<worker_actor> workers;
  std::unique_ptr<frontend::frontend> front;

  explicit impl(caf::actor_system& s) : sys(s) {}
  ~impl() {
    front.reset(); // no new requests, open streams closed
    for (auto& w : workers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    if (router)
      caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    br.reset();
  }
};

namespace {

constexpr const char* node_id = "local";

caf::error bad_option(const std::string& what) {
  return engine::make_engine_error(engine::engine_errc::bad_request, what);
}

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
  return bad_option("the workers did not join the router within 5 s");
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
    return bad_option("--mode must be disagg or agg, got '" + opts.mode + "'");
  if (opts.decode_workers < 1 || (disagg && opts.prefill_workers < 1))
    return bad_option("--decode (and with disagg --prefill) must be at least 1");
  const int n_workers = opts.decode_workers + (disagg ? opts.prefill_workers : 0);

  say("loading " + opts.model_dir.string());
  auto loaded = engine::load_model_weights(opts.model_dir);
  if (!loaded)
    return loaded.error();
  std::shared_ptr<const engine::model_weights> weights = std::move(*loaded);
  auto tok = engine::load_tokenizer(opts.model_dir, weights->config);
  if (!tok)
    return tok.error();
  std::shared_ptr<const engine::tokenizer> tokenizer = std::move(*tok);

  auto p = std::make_unique<impl>(sys);
  p->model_name = opts.model_name.empty() ? opts.model_dir.filename().string() : opts.model_name;
  auto protocol = std::make_shared<bridge_protocol>();
  protocol->add<worker_actor>().add<token_sink_actor>().add<router_actor>();
  p->br = std::make_unique<bridge>(
    sys, std::make_unique<transport::loopback_transport>(transport::loopback_fabric::make()),
    bridge_config{node_id, protocol, std::chrono::seconds{30}, {}});
  auto router = spawn_router(sys, opts.router);
  if (!router)
    return router.error();
  p->router = *router;
  caf::anon_send(p->br->actor(), publish_atom_v, std::string{"router"},
                 caf::actor_cast<caf::actor>(p->router));

  auto metrics = std::make_shared<cluster::metrics_registry>();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = opts.threads_per_worker > 0 ? opts.threads_per_worker
                                                  : std::max(1, cores / n_workers);
  const uint64_t id_base = std::random_device{}() * (uint64_t{1} << 32);
  std::string backend_name;
  int32_t max_model_len = 0;
  for (int i = 0; i < n_workers; ++i) {
    const bool prefill = disagg && i < opts.prefill_workers;
    const std::string name = disagg ? (prefill ? "prefill-" + std::to_string(i)
                                               : "decode-" + std::to_string(i - opts.prefill_workers))
                                    : "worker-" + std::to_string(i);
    say("starting " + name);
    engine::cpu::cpu_backend_options bo;
    bo.threads = threads;
    bo.kv_cache_bytes = opts.kv_cache_bytes;
    auto be = engine::cpu::make_cpu_backend(weights, bo);
    if (!be)
      return be.error();
    backend_name = (*be)->description();
    engine::engine_config ec;
    ec.max_model_len = opts.max_model_len;
    auto eng = std::make_unique<engine::engine>(std::move(*be), ec, tokenizer);
    max_model_len = eng->max_model_len();
    auto region = p->br->register_region(eng->get_backend().kv_pool_memory());
    if (!region)
      return region.error();
    worker_config wc;
    wc.node = node_id;
    wc.name = name;
    wc.bridge = p->br->actor();
    wc.pool_region = *region;
    wc.router = {node_id, "router"};
    wc.worker_id = id_base + static_cast<uint64_t>(i);
    wc.metrics = metrics;
    if (disagg)
      wc.roles = {prefill ? wire::node_role::prefill : wire::node_role::decode};
    auto w = spawn_worker(sys, std::move(eng), wc);
    caf::anon_send(p->br->actor(), publish_atom_v, name, caf::actor_cast<caf::actor>(w));
    p->workers.push_back(w);
  }
  p->description = disagg ? std::to_string(opts.prefill_workers) + " prefill + " +
                              std::to_string(opts.decode_workers) + " decode worker(s)"
                          : std::to_string(opts.decode_workers) + " worker(s)";
  p->description += ", " + backend_name + " each, router " + opts.router.policy;

  frontend::frontend_config fc;
  fc.node = node_id;
  fc.bridge = p->br->actor();
  fc.router = p->router;
  fc.tokenizer = tokenizer;
  auto chat = frontend::resolve_chat_template(tokenizer->settings().chat_template, opts.chat_template);
  if (auto* e = std::get_if<frontend::api_error>(&chat)) {
    if (!opts.chat_template.empty())
      return bad_option("--chat-template: " + e->message);
    fc.chat_error = e->message;
  } else {
    fc.chat = std::get<frontend::chat_template>(std::move(chat));
  }
  fc.model_name = p->model_name;
  fc.max_model_len = max_model_len;
  fc.limits = opts.limits;
  fc.http.host = opts.host;
  fc.http.port = opts.port;
  fc.http.threads = opts.http_threads;
  fc.metrics = metrics;
  auto front = frontend::frontend::start(sys, fc);
  if (!front)
    return front.error();
  p->front = std::move(*front);
  caf::anon_send(p->br->actor(), publish_atom_v, fc.name, caf::actor_cast<caf::actor>(p->front->actor()));
  if (auto err = await_workers(sys, p->router, static_cast<size_t>(n_workers)))
    return err;
  return std::unique_ptr<serve_node>(new serve_node(std::move(p)));
}

serve_node::serve_node(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
serve_node::~serve_node() = default;

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
