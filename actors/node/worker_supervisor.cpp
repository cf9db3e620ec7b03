#include "actors/node/worker_supervisor.hpp"

#include <deque>
#include <map>

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::detail::worker_spec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::detail::started_worker)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tessera::actors::worker_local_actor>)

namespace tessera::actors::detail {

namespace {

using clock_type = std::chrono::steady_clock;

struct supervised {
  worker_spec spec;
  worker_local_actor actor;
  std::deque<clock_type::time_point> restarts;
};

struct supervisor_state {
  static inline const char* name = "worker-supervisor";
  bridge* br = nullptr;
  loaded_model model;
  supervisor_options opts;
  std::shared_ptr<worker_supervisor::engine_keep> keep;
  std::map<std::string, supervised> workers; // by name
  uint64_t next_id = 0;
  bool stopping = false;
};

using supervisor_pointer = caf::stateful_actor<supervisor_state>*;

caf::expected<started_worker> launch(supervisor_pointer self, const worker_spec& spec) {
  auto& st = self->state;
  auto w = start_worker(self->system(), *st.br, st.model, spec);
  if (!w)
    return w.error();
  {
    std::lock_guard lock{st.keep->mutex};
    st.keep->engines.push_back(w->engine);
  }
  self->monitor(w->actor);
  st.workers[spec.name] = supervised{spec, w->actor, {}};
  return w;
}

void on_down(supervisor_pointer self, const caf::down_msg& down) {
  auto& st = self->state;
  auto it = st.workers.begin();
  while (it != st.workers.end() && it->second.actor.address() != down.source)
    ++it;
  if (it == st.workers.end() || st.stopping)
    return;
  auto& s = it->second;
  const auto& name = it->first;
  if (!down.reason || down.reason == caf::exit_reason::user_shutdown) {
    st.workers.erase(it);
    return;
  }
  const auto now = clock_type::now();
  while (!s.restarts.empty() && now - s.restarts.front() > st.opts.restart_window)
    s.restarts.pop_front();
  if (static_cast<int>(s.restarts.size()) >= st.opts.max_restarts) {
    spdlog::error("supervisor: worker {} failed ({}); {} restarts within {} s already, it stays down",
                  name, error_text(down.reason), s.restarts.size(), st.opts.restart_window.count());
    st.workers.erase(it);
    return;
  }
  auto spec = s.spec;
  spec.worker_id += ++st.next_id << 40; // a new worker to the router
  auto restarts = std::move(s.restarts);
  restarts.push_back(now);
  spdlog::warn("supervisor: worker {} failed ({}); restarting it", name, error_text(down.reason));
  if (st.opts.metrics)
    st.opts.metrics
      ->counter("tessera_worker_restarts_total", "Workers restarted after they failed, per worker.",
                {{"worker", name}})
      .inc();
  auto w = launch(self, spec);
  if (!w) {
    spdlog::error("supervisor: worker {} could not be restarted: {}", name, error_text(w.error()));
    st.workers.erase(name);
    return;
  }
  st.workers[name].restarts = std::move(restarts);
}

caf::behavior supervisor_fn(supervisor_pointer self, bridge* br, loaded_model model,
                            supervisor_options opts, std::shared_ptr<worker_supervisor::engine_keep> keep) {
  auto& st = self->state;
  st.br = br;
  st.model = std::move(model);
  st.opts = std::move(opts);
  st.keep = std::move(keep);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  return {
    [self](start_atom, const worker_spec& spec) -> caf::result<started_worker> {
      auto w = launch(self, spec);
      if (!w)
        return w.error();
      return std::move(*w);
    },
    [self](fault_atom, const std::string& worker, const std::string& fault) -> caf::result<void> {
      auto it = self->state.workers.find(worker);
      if (it == self->state.workers.end())
        return engine::make_engine_error(engine::engine_errc::bad_request,
                                         "this node has no worker named '" + worker + "'");
      self->send(it->second.actor, fault_atom_v, fault);
      return caf::unit;
    },
    [self](stop_atom) {
      self->state.stopping = true;
      std::vector<worker_local_actor> out;
      for (auto& [name, s] : self->state.workers)
        out.push_back(s.actor);
      return out;
    },
  };
}

} // namespace

worker_supervisor::worker_supervisor(caf::actor_system& sys, bridge& br, loaded_model model,
                                     supervisor_options opts)
    : sys_(sys), keep_(std::make_shared<engine_keep>()) {
  actor_ = sys.spawn(supervisor_fn, &br, std::move(model), std::move(opts), keep_);
}

worker_supervisor::~worker_supervisor() {
  stop();
}

caf::expected<started_worker> worker_supervisor::start(worker_spec spec) {
  caf::scoped_actor self{sys_};
  caf::expected<started_worker> out{caf::error{}};
  self->request(actor_, caf::infinite, start_atom_v, std::move(spec))
    .receive([&](started_worker& w) { out = std::move(w); }, [&](caf::error& err) { out = std::move(err); });
  return out;
}

void worker_supervisor::stop() {
  if (stopped_)
    return;
  stopped_ = true;
  caf::scoped_actor self{sys_};
  std::vector<worker_local_actor> workers;
  self->request(actor_, std::chrono::seconds{10}, stop_atom_v)
    .receive([&](std::vector<worker_local_actor>& ws) { workers = std::move(ws); },
             [&](caf::error& err) { spdlog::warn("supervisor: stop: {}", error_text(err)); });
  size_t waiting = 0;
  for (auto& w : workers) {
    self->monitor(w);
    self->send_exit(w, caf::exit_reason::user_shutdown);
    ++waiting;
  }
  self->monitor(actor_);
  self->send_exit(actor_, caf::exit_reason::user_shutdown);
  ++waiting;
  // A worker finishes its engine step before it sees the exit.
  for (bool timed_out = false; waiting > 0 && !timed_out; --waiting)
    self->receive([](const caf::down_msg&) {},
                  caf::after(std::chrono::seconds{30}) >> [&] { timed_out = true; });
}

} // namespace tessera::actors::detail
