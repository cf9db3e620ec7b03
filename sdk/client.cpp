#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <unordered_map>

#include "common/error.hpp"
#include "sdk/secret_file.hpp"
#include <tessera/sdk.hpp>
#include "transport/transport.hpp"
#include "transport/transport_errc.hpp"
#include "transport/ucx/ucx_transport.hpp"
#include "transport/wire/codec.hpp"

// The bridge's protocol, spoken without an actor system (actors/bridge/
// bridge.cpp is the other side): after the transport's secret handshake, a
// hello request (membership with our node id) to actor "bridge"; then
// envelopes addressed to the frontend (tell submit / cancel, request info),
// and tells from the frontend to our actor "sdk" (accepted, token, failed).

namespace tessera::sdk {

namespace wire = transport::wire;
using clock_type = std::chrono::steady_clock;

error::error(client_errc code, int http_status, std::string message, std::string type, std::string error_code,
             std::string param)
    : std::runtime_error(""), code_(code), status_(http_status), message_(std::move(message)),
      type_(std::move(type)), error_code_(std::move(error_code)), param_(std::move(param)) {}

namespace {

error unavailable(const std::string& message) {
  return error(client_errc::unavailable, 503, message, "service_unavailable");
}

/// A transport or bridge failure as an SDK error.
error from_caf(const caf::error& err, const std::string& context) {
  if (err == transport::transport_errc::unauthenticated)
    return error(client_errc::unauthorized, 401, context + ": " + error_text(err), "authentication_error");
  if (err == transport::transport_errc::invalid_message || err == transport::transport_errc::message_too_large)
    return error(client_errc::bad_request, 400, context + ": " + error_message(err), "invalid_request_error");
  return unavailable(context + ": " + error_text(err));
}

std::string random_node_id() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  static const char* hex = "0123456789abcdef";
  std::string out = "sdk-";
  for (int i = 15; i >= 0; --i)
    out += hex[(v >> (i * 4)) & 15];
  return out;
}

std::string finish_name(protocol::finish_reason f) {
  switch (f) {
    case protocol::finish_reason::none: return "";
    case protocol::finish_reason::stop: return "stop";
    case protocol::finish_reason::length: return "length";
    case protocol::finish_reason::abort: return "abort";
  }
  return "abort";
}

using call_reply = caf::expected<std::optional<wire::wire_message>>;

} // namespace

namespace detail {

struct stream_state {
  uint64_t id = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<chunk> chunks;
  bool done = false;
  std::optional<error> failure;
  result res;
  chunk_callback on_chunk;
  std::optional<std::promise<result>> promise;
  clock_type::time_point news = clock_type::now();
};

class client_impl final : public transport::transport_handler {
public:
  explicit client_impl(options o) : opts(std::move(o)) {}

  ~client_impl() override {
    // The transport first: no callback runs into this object after it.
    tr.reset();
  }

  void open(const std::string& address) {
    if (opts.node_id.empty())
      opts.node_id = random_node_id();
    std::string secret = opts.cluster_secret;
    if (secret.empty() && !opts.cluster_secret_file.empty())
      secret = read_secret_file(opts.cluster_secret_file);
    transport::transport_options to;
    to.cluster_secret = secret;
    to.identity = opts.node_id;
    to.grants_only = !secret.empty(); // nobody writes into our memory
    to.peer_timeout = opts.connect_timeout;
    transport::ucx_options uo;
    uo.tls = opts.ucx_tls;
    uo.peer_error_handling = opts.ucx_tls.find("sm") == std::string::npos;
    // A client shares its machine (often with the cluster itself): its
    // progress thread sleeps as soon as it is idle instead of spinning
    // after every chunk, which with many streams kept a core busy.
    uo.progress_spin = std::chrono::microseconds{0};
    auto made = transport::ucx_transport::make(to, uo);
    if (!made)
      throw from_caf(made.error(), "cannot start the transport");
    tr = std::move(*made);
    tr->set_handler(this);
    auto p = tr->connect(address);
    if (!p)
      throw from_caf(p.error(), "cannot connect to " + address);
    peer = *p;
    wire::membership hello;
    hello.node_id = opts.node_id;
    auto r = call("bridge", "hello", wire::wire_message{hello}, opts.connect_timeout);
    if (!r)
      throw from_caf(r.error(), "the frontend at " + address + " refused the hello");
    auto* m = *r ? std::get_if<wire::membership>(&**r) : nullptr;
    if (m == nullptr)
      throw unavailable("the node at " + address + " answered the hello without its name");
    frontend_node = m->node_id;
  }

  // -- transport events (its progress thread) -------------------------------

  void on_peer_connected(transport::peer_id, const std::string&) override {}
  void on_blocks_arrived(transport::peer_id, const transport::transfer_batch&) override {}

  void on_peer_failed(transport::peer_id p, const caf::error& why) override {
    if (p != peer)
      return;
    const auto e = unavailable("the connection to the frontend failed: " + error_text(why));
    {
      std::lock_guard lock{mu};
      down = true;
      down_reason = e.what();
      for (auto& [id, c] : calls)
        c.set_value(call_reply{why});
      calls.clear();
    }
    fail_all(e);
  }

  void on_message(transport::peer_id from, transport::message msg) override {
    if (from != peer)
      return;
    auto m = decoder.decode(msg.frame, "the frontend");
    auto* env = m ? std::get_if<wire::envelope>(&*m) : nullptr;
    if (env == nullptr)
      return; // counted and logged by the decoder, or not an envelope
    std::optional<wire::wire_message> arg;
    if (!env->payload.empty()) {
      auto inner = decoder.decode(env->payload, "the frontend");
      if (!inner) {
        if (env->kind == wire::envelope_kind::response || env->kind == wire::envelope_kind::failure)
          settle(env->call_id, inner.error());
        return;
      }
      arg = std::move(*inner);
    }
    switch (env->kind) {
      case wire::envelope_kind::response: return settle(env->call_id, std::move(arg));
      case wire::envelope_kind::failure: {
        auto* e = arg ? std::get_if<wire::wire_error>(&*arg) : nullptr;
        caf::error err = e ? caf::error(e->code, caf::atom_from_string(e->category), caf::make_message(e->message))
                           : transport::make_transport_error(transport::transport_errc::invalid_message,
                                                             "a failure without an error");
        return settle(env->call_id, std::move(err));
      }
      case wire::envelope_kind::tell: return on_tell(env->operation, std::move(arg));
      case wire::envelope_kind::request: return; // we serve nothing
    }
  }

  // -- calls -----------------------------------------------------------------

  /// A request envelope to `actor`, waited for up to `timeout`.
  call_reply call(const std::string& actor, const std::string& op, std::optional<wire::wire_message> arg,
                  std::chrono::milliseconds timeout) {
    std::vector<std::byte> payload;
    if (arg) {
      auto f = wire::encode(*arg);
      if (!f)
        return f.error();
      payload = std::move(*f);
    }
    const uint64_t id = next_call++;
    std::future<call_reply> reply;
    {
      std::lock_guard lock{mu};
      if (down)
        throw unavailable(down_reason);
      reply = calls[id].get_future();
    }
    send(actor, wire::envelope{wire::envelope_kind::request, id, op, std::move(payload)}, [this, id](const caf::error& err) {
      if (err)
        settle(id, err);
    });
    if (reply.wait_for(timeout) != std::future_status::ready) {
      std::lock_guard lock{mu};
      calls.erase(id);
      return transport::make_transport_error(transport::transport_errc::timeout,
                                             op + ": no answer within " + std::to_string(timeout.count()) + " ms");
    }
    return reply.get();
  }

  void settle(uint64_t id, call_reply r) {
    std::lock_guard lock{mu};
    auto it = calls.find(id);
    if (it == calls.end())
      return;
    it->second.set_value(std::move(r));
    calls.erase(it);
  }

  /// Sends `env` to `actor` on the frontend's node; `done` gets a send error.
  void send(const std::string& actor, const wire::envelope& env, transport::completion done) {
    auto frame = wire::encode(wire::wire_message{env});
    if (!frame) {
      done(frame.error());
      return;
    }
    tr->send(peer, transport::message{actor, std::move(*frame)}, std::move(done));
  }

  /// A one-way message to the frontend. Throws error when it cannot be encoded.
  void tell(const std::string& op, const wire::wire_message& arg, transport::completion done) {
    auto payload = wire::encode(arg);
    if (!payload)
      throw from_caf(payload.error(), std::string(wire::to_string(wire::type_of(arg))) + " refused");
    send(opts.frontend, wire::envelope{wire::envelope_kind::tell, 0, op, std::move(*payload)}, std::move(done));
  }

  // -- streams -----------------------------------------------------------------

  std::shared_ptr<stream_state> find(uint64_t id) {
    std::lock_guard lock{mu};
    auto it = streams.find(id);
    return it == streams.end() ? nullptr : it->second;
  }

  std::shared_ptr<stream_state> take(uint64_t id) {
    std::lock_guard lock{mu};
    auto it = streams.find(id);
    if (it == streams.end())
      return nullptr;
    auto s = std::move(it->second);
    streams.erase(it);
    return s;
  }

  static void finish(stream_state& s, std::optional<error> failure) {
    std::unique_lock lock{s.mu};
    if (s.done)
      return;
    s.done = true;
    s.failure = std::move(failure);
    auto promise = std::move(s.promise);
    s.promise.reset();
    lock.unlock();
    s.cv.notify_all();
    if (promise) {
      if (s.failure)
        promise->set_exception(std::make_exception_ptr(*s.failure));
      else
        promise->set_value(s.res);
    }
  }

  void fail_all(const error& e) {
    std::unordered_map<uint64_t, std::shared_ptr<stream_state>> all;
    {
      std::lock_guard lock{mu};
      all.swap(streams);
    }
    for (auto& [id, s] : all)
      finish(*s, e);
  }

  void on_tell(const std::string& op, std::optional<wire::wire_message> arg) {
    if (!arg)
      return;
    if (auto* c = std::get_if<wire::token_chunk>(&*arg); c && op == "token")
      return on_chunk(*c);
    if (auto* a = std::get_if<wire::client_accepted>(&*arg); a && op == "accepted") {
      if (auto s = find(a->request_id)) {
        std::lock_guard lock{s->mu};
        s->res.prompt_token_ids = std::move(a->prompt_token_ids);
        s->res.model = std::move(a->model);
        s->news = clock_type::now();
      }
      return;
    }
    if (auto* f = std::get_if<wire::client_failed>(&*arg); f && op == "failed") {
      if (auto s = take(f->request_id))
        finish(*s, error(f->code, f->http_status, f->message, f->type, f->error_code, f->param));
    }
  }

  void on_chunk(const wire::token_chunk& c) {
    auto s = find(c.id);
    if (!s)
      return; // cancelled or failed meanwhile
    chunk out;
    out.tokens = c.tokens;
    out.text = c.text;
    out.finish_reason = finish_name(c.finish);
    out.stop_reason = c.stop_reason;
    out.prompt_tokens = c.prompt_tokens;
    out.cached_prompt_tokens = c.cached_prompt_tokens;
    out.output_tokens = c.output_tokens;
    out.logprobs = c.logprobs;
    chunk_callback cb;
    {
      std::lock_guard lock{s->mu};
      s->news = clock_type::now();
      s->res.token_ids.insert(s->res.token_ids.end(), c.tokens.begin(), c.tokens.end());
      s->res.text += c.text;
      s->res.logprobs.insert(s->res.logprobs.end(), c.logprobs.begin(), c.logprobs.end());
      if (!out.finish_reason.empty()) {
        s->res.finish_reason = out.finish_reason;
        s->res.cached_prompt_tokens = c.cached_prompt_tokens;
      }
      cb = s->on_chunk;
      if (!cb && !s->promise)
        s->chunks.push_back(out);
    }
    if (cb)
      cb(out);
    s->cv.notify_all();
    if (c.finish != protocol::finish_reason::none) {
      take(c.id);
      finish(*s, std::nullopt);
    }
  }

  std::shared_ptr<stream_state> submit(request r, chunk_callback cb, bool with_promise) {
    if (r.top_logprobs != 0 && !r.logprobs)
      throw error(client_errc::bad_request, 400, "top_logprobs requires logprobs to be true",
                  "invalid_request_error", "", "top_logprobs");
    constexpr int32_t max_top = sampling_params::max_logprobs;
    if (r.top_logprobs < 0 || r.top_logprobs > max_top)
      throw error(client_errc::bad_request, 400,
                  "top_logprobs must be in [0, " + std::to_string(max_top) + "], got " +
                    std::to_string(r.top_logprobs),
                  "invalid_request_error", "", "top_logprobs");
    if (r.logprobs)
      r.params.logprobs = r.top_logprobs;
    wire::client_submit m;
    auto s = std::make_shared<stream_state>();
    s->id = m.request_id = next_id++;
    m.model = std::move(r.model);
    if (!r.messages.empty())
      m.kind = protocol::prompt_kind::chat;
    else if (!r.prompt_ids.empty())
      m.kind = protocol::prompt_kind::token_ids;
    else
      m.kind = protocol::prompt_kind::text;
    m.prompt_ids = std::move(r.prompt_ids);
    m.prompt_text = std::move(r.prompt);
    m.messages = std::move(r.messages);
    m.params = std::move(r.params);
    m.priority = r.priority;
    m.api_key = std::move(r.api_key);
    m.detokenize = r.detokenize;
    s->on_chunk = std::move(cb);
    if (with_promise)
      s->promise.emplace();
    {
      std::lock_guard lock{mu};
      if (down)
        throw unavailable(down_reason);
      streams[s->id] = s;
    }
    try {
      tell("submit", wire::wire_message{std::move(m)}, [this, id = s->id](const caf::error& err) {
        if (err)
          if (auto st = take(id))
            finish(*st, from_caf(err, "the request was not sent"));
      });
    } catch (...) {
      take(s->id);
      throw;
    }
    return s;
  }

  void cancel(stream_state& s) {
    {
      std::lock_guard lock{s.mu};
      if (s.done)
        return;
    }
    take(s.id);
    try {
      tell("cancel", wire::wire_message{wire::client_cancel{s.id, {}}}, [](const caf::error&) {});
    } catch (const error&) {
      // cannot happen for a valid id; the stream ends below either way
    }
    finish(s, error(client_errc::cancelled, 499, "the request was cancelled", "cancelled"));
  }

  /// Waits for news on `s` (a chunk, the end) up to the timeout since
  /// the last; on timeout the request is cancelled and the error thrown.
  void wait_news(stream_state& s, std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready) {
    while (!ready()) {
      const auto deadline = s.news + opts.timeout;
      if (s.cv.wait_until(lock, deadline, ready))
        return;
      if (clock_type::now() >= s.news + opts.timeout) {
        lock.unlock();
        take(s.id);
        try {
          tell("cancel", wire::wire_message{wire::client_cancel{s.id, {}}}, [](const caf::error&) {});
        } catch (const error&) {
        }
        finish(s, unavailable("no answer from the frontend within " + std::to_string(opts.timeout.count()) +
                              " ms; the request was cancelled"));
        lock.lock();
        return;
      }
    }
  }

  cluster_info info() {
    auto r = call(opts.frontend, "info", std::nullopt, opts.timeout);
    if (!r)
      throw from_caf(r.error(), "info");
    auto* i = *r ? std::get_if<wire::cluster_info>(&**r) : nullptr;
    if (i == nullptr)
      throw unavailable("info: the frontend answered without cluster info");
    return *i;
  }

  options opts;
  std::string frontend_node;
  transport::peer_id peer = 0;
  wire::frame_decoder decoder;
  std::mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<stream_state>> streams;
  std::unordered_map<uint64_t, std::promise<call_reply>> calls;
  bool down = false;
  std::string down_reason;
  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> next_call{1};
  /// Last: destroyed first, so no callback outlives the members above.
  std::unique_ptr<transport::transport> tr;
};

} // namespace detail

// -- stream -----------------------------------------------------------------

std::optional<chunk> stream::next() {
  auto& s = *state_;
  std::unique_lock lock{s.mu};
  client_->wait_news(s, lock, [&] { return !s.chunks.empty() || s.done; });
  if (!s.chunks.empty()) {
    auto c = std::move(s.chunks.front());
    s.chunks.pop_front();
    return c;
  }
  if (s.failure)
    throw *s.failure;
  return std::nullopt;
}

bool stream::wait_for(std::chrono::milliseconds max_wait) {
  auto& s = *state_;
  const auto timeout = client_->opts.timeout;
  std::unique_lock lock{s.mu};
  // A timeout without news counts as news: next() then cancels and throws.
  return s.cv.wait_for(lock, max_wait, [&] {
    return !s.chunks.empty() || s.done || clock_type::now() >= s.news + timeout;
  });
}

bool stream::done() const {
  std::lock_guard lock{state_->mu};
  return state_->done;
}

result stream::wait() {
  auto& s = *state_;
  std::unique_lock lock{s.mu};
  client_->wait_news(s, lock, [&] { return s.done; });
  s.chunks.clear();
  if (s.failure)
    throw *s.failure;
  return s.res;
}

void stream::cancel() {
  client_->cancel(*state_);
}

uint64_t stream::id() const {
  return state_->id;
}

// -- client -----------------------------------------------------------------

client::client(std::shared_ptr<detail::client_impl> impl) : impl_(std::move(impl)) {}

client::~client() {
  if (impl_ && impl_->tr) {
    impl_->fail_all(unavailable("the client was closed"));
    impl_->tr->disconnect(impl_->peer);
  }
}

std::unique_ptr<client> client::connect(const std::string& address, options opts) {
  auto impl = std::make_shared<detail::client_impl>(std::move(opts));
  impl->open(address);
  return std::unique_ptr<client>(new client(std::move(impl)));
}

stream client::submit(request r, chunk_callback on_chunk) {
  stream s;
  s.state_ = impl_->submit(std::move(r), std::move(on_chunk), false);
  s.client_ = impl_;
  return s;
}

std::future<result> client::complete(request r) {
  auto st = impl_->submit(std::move(r), {}, true);
  std::lock_guard lock{st->mu};
  if (st->done) { // failed before we got here: the promise was already used
    std::promise<result> p;
    if (st->failure)
      p.set_exception(std::make_exception_ptr(*st->failure));
    else
      p.set_value(st->res);
    return p.get_future();
  }
  return st->promise->get_future();
}

std::vector<std::string> client::models() {
  return impl_->info().models;
}

cluster_info client::health() {
  return impl_->info();
}

const std::string& client::node_id() const {
  return impl_->opts.node_id;
}

} // namespace tessera::sdk
