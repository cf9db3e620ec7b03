#include "actors/frontend/frontend_actor.hpp"

#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/frontend/api_tokenize.hpp"
#include "actors/frontend/frontend_state.hpp"
#include "actors/router/router_errc.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"

namespace tessera::actors::frontend {

namespace detail {

const std::string json_type = "application/json";

void send_error(const std::shared_ptr<http_response>& res, const api_error& e) {
  res->send(e.status, json_type, error_body(e));
}

/// The API error for a failure the router, a worker or the bridge reported.
api_error to_api_error(const caf::error& err) {
  if (err == engine::engine_errc::overloaded)
    return queue_full(error_message(err));
  if (err == engine::engine_errc::bad_request)
    return bad_request(error_message(err));
  if (err == router_errc::no_healthy_worker)
    return no_worker(error_message(err));
  api_error e = no_worker(error_text(err));
  return e;
}

worker_actor worker_at(frontend_pointer self, const wire::actor_address& at) {
  return self->state.workers.get(self->system(), self->state.cfg.bridge, at.node, at.actor);
}

/// Forgets job `key` (its choices are done or cancelled); the last job
/// of a drain answers it.
void forget_job(frontend_pointer self, uint64_t key) {
  auto& st = self->state;
  st.metrics->in_flight.add(-1);
  // However it ended (finished, failed, cancelled, client gone), its
  // tenant's slot is free again.
  if (auto it = st.jobs.find(key); it != st.jobs.end() && it->second.limited)
    st.limits.release(it->second.tenant->name, it->second.held_units, clock_type::now());
  if (auto it = st.jobs.find(key); it != st.jobs.end())
    sdk_forget(st, it->second);
  st.jobs.erase(key);
  if (st.draining && st.jobs.empty()) {
    for (auto& rp : st.drained)
      rp.deliver(caf::unit);
    st.drained.clear();
  }
}

/// Stops every choice of `j` still running and forgets the job.
void drop_job(frontend_pointer self, uint64_t key, const std::string& why) {
  auto& st = self->state;
  auto it = st.jobs.find(key);
  if (it == st.jobs.end())
    return;
  for (auto& c : it->second.choices) {
    st.by_engine_id.erase(c.engine_id);
    if (c.done)
      continue;
    self->send(st.cfg.router, finished_atom_v, c.engine_id);
    if (!c.admitted)
      continue;
    wire::request_cancel cancel{c.engine_id, why};
    self->send(worker_at(self, c.route.prefill), cancel_atom_v, cancel);
    if (c.route.disaggregated)
      self->send(worker_at(self, c.route.decode), cancel_atom_v, cancel);
  }
  forget_job(self, key);
}

/// Ends `j` with an error: an error status before the stream started, an
/// error event and [DONE] after.
void fail_job(frontend_pointer self, uint64_t key, const api_error& e) {
  auto it = self->state.jobs.find(key);
  if (it == self->state.jobs.end())
    return;
  auto& j = it->second;
  self->state.metrics->error(e.code.empty() ? e.type : e.code);
  if (j.sdk.id != 0) {
    sdk_fail(self, j, e);
  } else if (j.streaming) {
    j.res->write(error_event(e));
    j.res->write(std::string{done_event()});
    j.res->finish();
  } else {
    send_error(j.res, e);
  }
  drop_job(self, key, "the request failed");
}

std::string chunk_for(const job& j, const stream_delta& d) {
  return j.req.kind == api_kind::chat ? chat_chunk(j.meta, d, j.opts)
                                      : completion_chunk(j.meta, d, j.opts);
}

void stream_write(job& j, std::string chunk) {
  if (j.streaming)
    j.res->write(std::move(chunk));
  else if (j.req.stream)
    j.backlog.push_back(std::move(chunk));
}

void start_stream(job& j) {
  j.res->start_stream(200, "text/event-stream");
  j.streaming = true;
  if (j.req.kind == api_kind::chat)
    for (const auto& c : j.choices)
      j.res->write(chat_role_chunk(j.meta, c.out.index, j.opts));
  for (auto& chunk : j.backlog)
    j.res->write(std::move(chunk));
  j.backlog.clear();
}

void complete_job(frontend_pointer self, job& j) {
  auto& m = *self->state.metrics;
  std::vector<choice_output> outs;
  int32_t cached = 0;
  for (const auto& c : j.choices) {
    outs.push_back(c.out);
    cached = std::max(cached, c.cached_tokens);
  }
  auto usage = make_usage(j.prompt_tokens, outs);
  usage.cached_tokens = cached;
  m.duration.observe(std::chrono::duration<double>(clock_type::now() - j.start).count());
  m.prompt_tokens.inc(j.prompt_tokens);
  m.cached.inc(cached);
  if (j.sdk.id != 0)
    return; // its last chunk carried the finish (on_tokens)
  if (j.req.stream) {
    if (!j.streaming)
      start_stream(j);
    if (j.req.include_usage)
      j.res->write(usage_chunk(j.meta, j.req.kind, usage));
    j.res->write(std::string{done_event()});
    j.res->finish();
  } else {
    j.res->send(200, json_type,
                j.req.kind == api_kind::chat ? chat_response(j.meta, outs, usage, j.opts)
                                             : completion_response(j.meta, outs, usage, j.opts));
  }
}

void on_tokens(frontend_pointer self, wire::token_chunk chunk) {
  auto& st = self->state;
  auto where = st.by_engine_id.find(chunk.id);
  if (where == st.by_engine_id.end())
    return; // cancelled or failed meanwhile
  auto& j = st.jobs.at(where->second.first);
  auto& c = j.choices[where->second.second];
  const auto now = clock_type::now();
  auto ready = c.order.accept(std::move(chunk));
  if (!ready.empty()) {
    c.progress = now;
    c.unknown_rounds = 0;
  }
  for (auto& out : ready) {
    if (!out.tokens.empty()) {
      if (c.order.received() == static_cast<int32_t>(out.tokens.size()))
        st.metrics->ttft.observe(std::chrono::duration<double>(now - j.start).count());
      else
        st.metrics->itl.observe(std::chrono::duration<double>(now - c.last_token).count());
      c.last_token = now;
      st.metrics->generated.inc(static_cast<double>(out.tokens.size()));
      if (j.limited)
        st.limits.charge_output(j.tenant->name, static_cast<int64_t>(out.tokens.size()),
                                int64_t{j.prompt_tokens} + c.order.received() - static_cast<int64_t>(out.tokens.size()),
                                now, &j.held_units);
    }
    // The first chunk comes from the worker that computed the prompt: its
    // count is the prefix-cache hit (a decode worker that received the KV
    // reports the whole prompt as cached).
    if (c.order.received() == static_cast<int32_t>(out.tokens.size())) {
      c.cached_tokens = out.cached_prompt_tokens;
      self->send(st.cfg.router, prefilled_atom_v, c.engine_id);
    }
    auto delta = c.out.append(out);
    if (j.sdk.id != 0)
      sdk_forward(self, j, out);
    if (j.req.stream && (!delta.text.empty() || !delta.logprobs.empty() ||
                         delta.finish != engine::finish_reason::none))
      stream_write(j, chunk_for(j, delta));
    if (out.finish != engine::finish_reason::none && !c.done) {
      c.done = true;
      ++j.finished;
      self->send(st.cfg.router, finished_atom_v, c.engine_id);
    }
  }
  if (j.finished == j.choices.size()) {
    const auto key = j.key;
    complete_job(self, j);
    for (auto& ch : j.choices)
      st.by_engine_id.erase(ch.engine_id);
    forget_job(self, key);
  }
}

/// Choice `index` of `j` runs on a worker; the stream starts once all do.
void mark_admitted(job& j, size_t index) {
  auto& c = j.choices[index];
  c.progress = clock_type::now();
  c.moving = false;
  if (c.admitted)
    return;
  c.admitted = true;
  if (++j.admitted == j.choices.size() && j.req.stream && !j.streaming)
    start_stream(j);
}

/// The request of choice `index` of `j` as a worker receives it.
wire::request_handoff handoff_of(frontend_pointer self, const job& j, size_t index) {
  const auto& c = j.choices[index];
  wire::request_handoff h;
  h.request.id = c.engine_id;
  h.request.params = j.req.params;
  if (h.request.params.seed && j.req.n > 1)
    *h.request.params.seed += index; // n different choices
  h.request.priority = j.priority;
  h.request.cache_salt = j.cache_salt;
  h.reply_to = {self->state.cfg.node, self->state.cfg.name};
  return h;
}

/// Routes choice `index` of job `key` and starts it on its worker.
void admit(frontend_pointer self, uint64_t key, size_t index, std::vector<int32_t> prompt) {
  auto& st = self->state;
  auto& j = st.jobs.at(key);
  auto& c = j.choices[index];
  // A conversation sticks to its workers by session_id, else by user.
  route_query q{c.engine_id, prompt, j.cache_salt, j.req.session_id.empty() ? j.req.user : j.req.session_id,
                j.req.params.max_tokens};
  self->request(st.cfg.router, st.cfg.admit_timeout, route_atom_v, q)
    .then(
      [self, key, index, prompt = std::move(prompt), id = c.engine_id](route_answer& a) mutable {
        auto it = self->state.jobs.find(key);
        if (it == self->state.jobs.end()) {
          // The job ended while its route was on the way (or held for KV
          // room): the router counted it on its workers; it ends there too.
          self->send(self->state.cfg.router, finished_atom_v, id);
          return;
        }
        auto& j = it->second;
        auto& c = j.choices[index];
        c.route = a;
        c.routed = true;
        c.progress = clock_type::now();
        auto h = handoff_of(self, j, index);
        h.request.prompt = std::move(prompt);
        if (a.disaggregated)
          h.decode_at = a.decode;
        h.kv_source = a.kv_source;
        h.kv_source_blocks = a.kv_source_blocks;
        self->request(worker_at(self, a.prefill), self->state.cfg.admit_timeout, generate_atom_v, h)
          .then(
            [self, key, index, a, id = h.request.id]() {
              auto it = self->state.jobs.find(key);
              if (it != self->state.jobs.end() && it->second.choices[index].engine_id != id)
                return; // the watchdog moved it meanwhile (migrate stopped this attempt)
              if (it == self->state.jobs.end()) {
                // The job ended (client gone, another choice failed) while
                // this choice was being admitted: stop it again.
                wire::request_cancel cancel{id, "the request ended before it started"};
                self->send(worker_at(self, a.prefill), cancel_atom_v, cancel);
                if (a.disaggregated)
                  self->send(worker_at(self, a.decode), cancel_atom_v, cancel);
                self->send(self->state.cfg.router, finished_atom_v, id);
                return;
              }
              mark_admitted(it->second, index);
            },
            [self, key, index, a, id = h.request.id](caf::error& err) {
              auto it = self->state.jobs.find(key);
              if (it != self->state.jobs.end() && it->second.choices[index].engine_id != id)
                return; // the watchdog moved it meanwhile
              if (err != caf::sec::request_timeout)
                return fail_job(self, key, to_api_error(err));
              // The request or its answer was lost on the way (the worker may
              // run it): stop it there and place it again.
              wire::request_cancel cancel{id, "no answer to generate; placed again"};
              self->send(worker_at(self, a.prefill), cancel_atom_v, cancel);
              if (a.disaggregated)
                self->send(worker_at(self, a.decode), cancel_atom_v, cancel);
              migrate(self, key, index, no_worker("worker " + a.prefill.actor + " did not answer: " + error_text(err)));
            });
      },
      [self, key](caf::error& err) { fail_job(self, key, to_api_error(err)); });
}

/// Moves choice `index` of job `key` to another worker after its worker
/// failed (`why`): the old attempt is forgotten (its late chunks are
/// dropped) and stopped wherever it may still run, and the choice is
/// placed again after a backoff (none the first time) with the tokens its
/// client already received (request_handoff::resume_output), so the stream
/// goes on where it stopped, token for token as the uninterrupted run
/// (the sampler draws by (seed, position); start_job gives every request a
/// seed). After cfg.max_migrations moves the job fails with `why`.
void migrate(frontend_pointer self, uint64_t key, size_t index, const api_error& why) {
  auto& st = self->state;
  auto it = st.jobs.find(key);
  if (it == st.jobs.end())
    return;
  auto& j = it->second;
  auto& c = j.choices[index];
  if (c.done)
    return;
  if (c.migrations >= st.cfg.max_migrations ||
      static_cast<int32_t>(c.out.token_ids.size()) >= j.req.params.max_tokens)
    return fail_job(self, key, why);
  spdlog::info("frontend: request {} moves to another worker after {} token(s): {}", c.engine_id,
               c.out.token_ids.size(), why.message);
  st.metrics->migrated.inc();
  st.by_engine_id.erase(c.engine_id);
  self->send(st.cfg.router, finished_atom_v, c.engine_id);
  if (c.admitted) {
    wire::request_cancel cancel{c.engine_id, "moved to another worker"};
    self->send(worker_at(self, c.route.prefill), cancel_atom_v, cancel);
    if (c.route.disaggregated)
      self->send(worker_at(self, c.route.decode), cancel_atom_v, cancel);
  }
  c.moving = true;
  c.routed = false;
  c.unknown_rounds = 0;
  c.engine_id = st.id_base + st.next_id++;
  st.by_engine_id[c.engine_id] = {key, index};
  c.order.drop_waiting();
  const auto backoff = c.migrations == 0 ? std::chrono::milliseconds{0}
                                         : std::min(std::chrono::milliseconds{50 << c.migrations},
                                                    std::chrono::milliseconds{1000});
  ++c.migrations;
  self->delayed_send(self, backoff, start_atom_v, key, static_cast<uint64_t>(index));
}

/// Places migrated choice `index` of job `key` again: routed by prompt +
/// the tokens sent so far, run whole on one worker (the decode worker of a
/// disaggregated route), which computes what its caches lack.
void resume(frontend_pointer self, uint64_t key, size_t index) {
  auto& st = self->state;
  auto it = st.jobs.find(key);
  if (it == st.jobs.end() || index >= it->second.choices.size() || it->second.choices[index].done)
    return;
  auto& j = it->second;
  auto& c = j.choices[index];
  auto tokens = j.prompt;
  tokens.insert(tokens.end(), c.out.token_ids.begin(), c.out.token_ids.end());
  route_query q{c.engine_id, std::move(tokens), j.cache_salt,
                j.req.session_id.empty() ? j.req.user : j.req.session_id, j.req.params.max_tokens};
  const auto id = c.engine_id;
  auto retry = [self, key, index, id](const caf::error& err) {
    auto it = self->state.jobs.find(key);
    if (it != self->state.jobs.end() && it->second.choices[index].engine_id == id)
      migrate(self, key, index, to_api_error(err));
  };
  self->request(st.cfg.router, st.cfg.admit_timeout, route_atom_v, q)
    .then(
      [self, key, index, id, retry](route_answer& a) {
        auto it = self->state.jobs.find(key);
        if (it == self->state.jobs.end() || it->second.choices[index].engine_id != id) {
          // Ended or moved on while routed: the router forgets this attempt.
          self->send(self->state.cfg.router, finished_atom_v, id);
          return;
        }
        auto& j = it->second;
        auto& c = j.choices[index];
        const auto at = a.disaggregated ? a.decode : a.prefill;
        c.route = a;
        c.route.disaggregated = false;
        c.route.prefill = c.route.decode = at;
        c.routed = true;
        c.progress = clock_type::now();
        auto h = handoff_of(self, j, index);
        h.request.prompt = j.prompt;
        h.resume_output = c.out.token_ids;
        self->request(worker_at(self, at), self->state.cfg.admit_timeout, generate_atom_v, h)
          .then(
            [self, key, index, id]() {
              auto it = self->state.jobs.find(key);
              if (it != self->state.jobs.end() && it->second.choices[index].engine_id == id)
                mark_admitted(it->second, index);
            },
            [retry](caf::error& err) { retry(err); });
      },
      [retry](caf::error& err) { retry(err); });
}

std::variant<uint64_t, job_refusal> open_job(frontend_pointer self, api_request req,
                                             std::shared_ptr<const cluster::tenant_policy> tenant,
                                             std::shared_ptr<http_response> res, sdk_origin sdk) {
  auto& st = self->state;
  const auto kind = req.kind;
  if (req.model != st.cfg.model_name) {
    st.metrics->error("model_not_found");
    return job_refusal{unknown_model(req.model)};
  }
  if (kind == api_kind::chat && !st.cfg.chat) {
    st.metrics->error("no_chat_template");
    return job_refusal{bad_request("this model has no usable chat template: " +
                                                   st.cfg.chat_error + " (start the server with "
                                                   "--chat-template to set one)",
                                                 "messages")};
  }
  auto prompt = prepare_prompt(req, *st.cfg.tokenizer, st.cfg.chat ? &*st.cfg.chat : nullptr,
                               st.cfg.max_model_len);
  if (auto* e = std::get_if<api_error>(&prompt)) {
    st.metrics->error(e->code.empty() ? "invalid_request" : e->code);
    return job_refusal{*e};
  }
  // A tenant's limits are checked before any work is queued: a refused
  // request costs the cluster nothing.
  bool limited = false;
  double held = 0;
  if (tenant) {
    const tenant_limit lim{tenant->units_per_minute, tenant->max_concurrent};
    const auto prompt_tokens = static_cast<int64_t>(std::get<std::vector<int32_t>>(prompt).size());
    const double cost = st.cfg.units.admission(prompt_tokens);
    // Every choice may generate max_tokens tokens: the bucket holds that
    // much at admission and gets back what they did not use.
    const double output = req.n * st.cfg.units.decode(prompt_tokens, req.params.max_tokens);
    auto a = st.limits.admit(tenant->name, lim, cost, clock_type::now(), output);
    if (!a.admitted) {
      auto e = tenant_refusal_error(tenant->name, lim, a, cost);
      st.metrics->error(e.code);
      return job_refusal{e, e.status == 429 ? retry_after_header_s(a) : 0};
    }
    limited = true;
    held = a.held;
  }
  const uint64_t key = st.next_key++;
  job j;
  j.limited = limited;
  j.held_units = held;
  j.priority = request_priority(req.priority, tenant ? std::optional{tenant->priority} : std::nullopt);
  j.key = key;
  j.res = std::move(res);
  j.sdk = std::move(sdk);
  j.start = clock_type::now();
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  j.meta = {make_response_id(kind, st.id_base + key), now_s, req.model};
  j.opts = options_for(req, *st.cfg.tokenizer);
  j.prompt_tokens = static_cast<int32_t>(std::get<std::vector<int32_t>>(prompt).size());
  j.prompt = std::get<std::vector<int32_t>>(prompt);
  j.req = std::move(req);
  // The tenant's namespace salts every block hash of the request (engine,
  // router index, kv store, wire): its prefix cache is its own.
  j.cache_salt = compose_cache_salt(tenant ? std::string_view{tenant->cache_namespace} : std::string_view{},
                                    j.req.cache_salt);
  j.tenant = std::move(tenant);
  // A seed for every request, so a choice that moves to another worker
  // samples on exactly as it would have (migrate).
  if (!j.req.params.seed)
    j.req.params.seed = std::uniform_int_distribution<uint64_t>{}(st.rng);
  for (int i = 0; i < j.req.n; ++i) {
    job_choice c;
    c.engine_id = st.id_base + st.next_id++;
    c.out.index = i;
    c.out.tools = j.req.tools;
    st.by_engine_id[c.engine_id] = {key, j.choices.size()};
    j.choices.push_back(std::move(c));
  }
  const auto n = j.choices.size();
  st.jobs.emplace(key, std::move(j));
  st.metrics->in_flight.add(1);
  for (size_t i = 0; i < n; ++i)
    admit(self, key, i, st.jobs.at(key).prompt);
  return key;
}

/// Starts an HTTP completion of `tenant` (null without API keys).
void start_job(frontend_pointer self, api_kind kind, http_call call,
               std::shared_ptr<const cluster::tenant_policy> tenant) {
  auto& st = self->state;
  auto parsed = parse_request(kind, call.request.body, st.cfg.limits);
  if (auto* e = std::get_if<api_error>(&parsed)) {
    st.metrics->error(e->code.empty() ? "invalid_request" : e->code);
    return send_error(call.response, *e);
  }
  auto opened = open_job(self, std::get<api_request>(std::move(parsed)), std::move(tenant), call.response, {});
  if (auto* r = std::get_if<job_refusal>(&opened)) {
    if (r->error.status != 429)
      return send_error(call.response, r->error);
    return call.response->send(429, json_type, error_body(r->error),
                               {{"Retry-After", std::to_string(r->retry_after_s)}});
  }
  // A client that goes away cancels the request everywhere.
  auto handle = caf::actor_cast<frontend_impl>(self);
  call.response->on_close([handle, key = std::get<uint64_t>(opened)] { caf::anon_send(handle, closed_atom_v, key); });
}

void on_http(frontend_pointer self, http_call call) {
  auto& st = self->state;
  const auto& method = call.request.method;
  auto path = call.request.target.substr(0, call.request.target.find('?'));
  st.metrics->request(path);
  // The API (and /metrics if protected) needs a key when keys are set;
  // /health, /ready and /live stay open for load balancers and probes.
  std::shared_ptr<const cluster::tenant_policy> tenant;
  if (path.starts_with("/v1/") || (path == "/metrics" && st.cfg.protect_metrics)) {
    auto who = authenticate(st.cfg.api_keys, call.request.header("Authorization"));
    if (auto* e = std::get_if<api_error>(&who)) {
      st.metrics->error("invalid_api_key");
      return call.response->send(e->status, json_type, error_body(*e), {{"WWW-Authenticate", "Bearer"}});
    }
    tenant = std::get<0>(std::move(who));
  }
  auto wrong_method = [&](const char* allowed) {
    api_error e = bad_request("method " + quote_input(method) + " is not allowed on " + quote_input(path) + " (use " +
                              allowed + ")");
    e.status = 405;
    send_error(call.response, e);
  };
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (method != "POST")
      return wrong_method("POST");
    if (st.draining) {
      return send_error(call.response, shutting_down("it takes no new requests"));
    }
    return start_job(self, path == "/v1/completions" ? api_kind::completion : api_kind::chat,
                     std::move(call), std::move(tenant));
  }
  if (path.starts_with("/admin/"))
    return admin(self, call);
  if (path == "/v1/tokenize" || path == "/v1/detokenize") {
    if (method != "POST")
      return wrong_method("POST");
    const tokenize_context ctx{*st.cfg.tokenizer, st.cfg.chat ? &*st.cfg.chat : nullptr, st.cfg.model_name,
                               st.cfg.max_model_len, st.cfg.limits};
    auto body = path == "/v1/tokenize" ? tokenize_response(call.request.body, ctx)
                                       : detokenize_response(call.request.body, ctx);
    if (auto* e = std::get_if<api_error>(&body))
      return send_error(call.response, *e);
    return call.response->send(200, json_type, std::get<std::string>(body));
  }
  // A path served only by GET: 405 for another method; an unknown path is
  // 404 whatever the method (a POST to a base URL without /v1 is not a
  // method problem).
  const bool model_path = path.starts_with("/v1/models/") && path.size() > 11;
  const bool get_path =
    path == "/live" || path == "/health" || path == "/ready" || path == "/metrics" || path == "/v1/models" || model_path;
  if (get_path && method != "GET" && method != "HEAD")
    return wrong_method("GET");
  if (path == "/live")
    return call.response->send(200, json_type, "{\"status\":\"ok\"}");
  if (path == "/health" || path == "/ready") {
    if (st.draining)
      return call.response->send(503, json_type,
                                 "{\"status\":\"draining\",\"in_flight\":" + std::to_string(st.jobs.size())
                                   + "}");
    return health(self, call.response, path == "/ready");
  }
  if (path == "/metrics")
    return metrics(self, call.response);
  if (path == "/v1/models") {
    model_card card{st.cfg.model_name, st.created, "tessera", st.cfg.max_model_len};
    return call.response->send(200, json_type, models_response(std::span{&card, 1}));
  }
  if (model_path) {
    const auto id = path.substr(11);
    if (id != st.cfg.model_name)
      return send_error(call.response, unknown_model(id));
    model_card card{st.cfg.model_name, st.created, "tessera", st.cfg.max_model_len};
    return call.response->send(200, json_type, model_response(card));
  }
  api_error e = bad_request("no such endpoint: " + quote_input(method) + " " + quote_input(path));
  e.status = 404;
  e.type = "not_found_error";
  send_error(call.response, e);
}

frontend_impl::behavior_type frontend_fn(frontend_pointer self, frontend_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.limits = tenant_limits{st.cfg.units};
  st.metrics = std::make_unique<frontend_metrics>(*st.cfg.metrics);
  st.created = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  // Engine request ids must not collide with another frontend's: a random
  // 64-bit base with room for 2^32 requests.
  st.id_base = std::random_device{}() * (uint64_t{1} << 32);
  self->delayed_send(self, st.cfg.watch_interval, step_atom_v);
  return {
    [self](step_atom) { watch_streams(self); },
    [self](load_atom, api_keys_swap& swap) {
      // Requests in flight keep their tenant (job::tenant holds its table).
      self->state.cfg.api_keys = std::move(swap.keys);
      // Tenants the file no longer names leave the limits table (their
      // requests in flight still count until they end).
      std::set<std::string> names;
      if (self->state.cfg.api_keys)
        for (const auto& [name, policy] : self->state.cfg.api_keys->tenants())
          names.insert(name);
      self->state.limits.forget_absent(names);
    },
    [self](http_atom, http_call& call) { on_http(self, std::move(call)); },
    [self](submit_atom, wire::client_submit& m) { sdk_submit(self, std::move(m)); },
    [self](cancel_atom, const wire::client_cancel& m) { sdk_cancel(self, m); },
    [self](info_atom) { return sdk_info(self); },
    [self](token_atom, wire::token_chunk& c) { on_tokens(self, std::move(c)); },
    [self](failed_atom, const wire::request_cancel& c) {
      auto where = self->state.by_engine_id.find(c.request_id);
      if (where == self->state.by_engine_id.end())
        return;
      auto e = no_worker(c.reason);
      e.status = 500;
      e.type = "server_error";
      e.code = "worker_failed";
      const auto [key, index] = where->second;
      migrate(self, key, index, e);
    },
    [self](node_down_atom, const std::string& node) {
      sdk_node_down(self, node);
      std::vector<std::pair<uint64_t, size_t>> lost;
      for (const auto& [key, j] : self->state.jobs)
        for (size_t i = 0; i < j.choices.size(); ++i) {
          const auto& c = j.choices[i];
          if (!c.done && (c.route.prefill.node == node || c.route.decode.node == node))
            lost.emplace_back(key, i);
        }
      for (const auto& [key, index] : lost) {
        auto e = no_worker("node '" + node + "' failed while serving this request");
        e.code = "worker_failed";
        migrate(self, key, index, e);
      }
    },
    [self](start_atom, uint64_t key, uint64_t index) { resume(self, key, static_cast<size_t>(index)); },
    [self](closed_atom, uint64_t key) {
      if (!self->state.jobs.contains(key))
        return;
      self->state.metrics->cancelled.inc();
      drop_job(self, key, "the client went away");
    },
    [self](drain_atom, int64_t timeout_ms) -> caf::result<void> {
      auto& st = self->state;
      st.draining = true;
      st.drain_timeout_ms = timeout_ms;
      if (st.jobs.empty())
        return caf::unit;
      auto rp = self->make_response_promise<void>();
      st.drained.push_back(rp);
      self->delayed_send(self, std::chrono::milliseconds{timeout_ms}, expire_atom_v);
      return rp;
    },
    [self](expire_atom) {
      // The drain's deadline: what is still running is cut, each with an
      // error its client can tell from a finished answer (an error event
      // and [DONE] on a stream that started, a 503 before).
      auto& st = self->state;
      std::vector<uint64_t> left;
      for (const auto& [key, j] : st.jobs)
        left.push_back(key);
      for (auto key : left) {
        fail_job(self, key,
                 shutting_down("this request did not finish within the drain timeout ("
                               + std::to_string(st.drain_timeout_ms) + " ms)"));
      }
      for (auto& rp : st.drained)
        rp.deliver(caf::unit);
      st.drained.clear();
    },
  };
}

} // namespace detail

using namespace detail;

caf::expected<std::unique_ptr<frontend>> frontend::start(caf::actor_system& sys,
                                                         frontend_config cfg) {
  auto http = cfg.http;
  http.max_body_bytes = std::max(http.max_body_bytes, cfg.limits.max_body_bytes);
  std::unique_ptr<frontend> f{new frontend};
  auto impl = sys.spawn(frontend_fn, std::move(cfg));
  f->actor_ = caf::actor_cast<token_sink_actor>(impl);
  auto server = http_server::start(http, [impl](http_request req, std::shared_ptr<http_response> res) {
    caf::anon_send(impl, http_atom_v, http_call{std::move(req), std::move(res)});
  });
  if (!server) {
    caf::anon_send_exit(impl, caf::exit_reason::user_shutdown);
    return server.error();
  }
  f->server_ = std::move(*server);
  return f;
}

void frontend::set_api_keys(std::shared_ptr<const cluster::api_key_table> keys) {
  caf::anon_send(caf::actor_cast<frontend_impl>(actor_), load_atom_v, api_keys_swap{std::move(keys)});
}

void frontend::drain(std::chrono::milliseconds timeout) {
  caf::scoped_actor self{actor_->home_system()};
  auto impl = caf::actor_cast<frontend_impl>(actor_);
  // The actor answers by the deadline; the slack covers its own turn.
  self->request(impl, timeout + std::chrono::seconds{5}, drain_atom_v,
                static_cast<int64_t>(timeout.count()))
    .receive([] {}, [](caf::error&) {});
}

frontend::~frontend() {
  if (server_)
    server_->stop();
  caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
}

} // namespace tessera::actors::frontend
