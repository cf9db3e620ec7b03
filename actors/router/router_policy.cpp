#include "actors/router/router_policy.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "actors/router/kv_policy.hpp"
#include "actors/router/load_policies.hpp"
#include "actors/router/router_errc.hpp"
#include "common/assert.hpp"

namespace tessera::actors {

namespace {

// splitmix64 (Steele, Lea, Flood 2014): tiny, and its output is the same on
// every standard library, unlike std:: distributions.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string str(int64_t v) {
  return std::to_string(v);
}

caf::error check_request(const route_request& req) {
  if (req.block_tokens < 1)
    return make_router_error(router_errc::invalid_request,
                             "block_tokens must be >= 1, got " + str(req.block_tokens));
  if (req.prompt_tokens < 1)
    return make_router_error(router_errc::invalid_request,
                             "prompt_tokens must be >= 1, got " + str(req.prompt_tokens));
  const auto full_blocks = static_cast<size_t>(req.prompt_tokens / req.block_tokens);
  if (req.block_hashes.size() > full_blocks)
    return make_router_error(router_errc::invalid_request,
                             str(static_cast<int64_t>(req.block_hashes.size()))
                               + " block hashes for a prompt of " + str(req.prompt_tokens)
                               + " tokens holds at most " + str(static_cast<int64_t>(full_blocks))
                               + " full blocks of " + str(req.block_tokens) + " tokens");
  return {};
}

const worker_overlap* overlap_of(const std::vector<worker_overlap>& overlaps, uint64_t id) {
  auto it = std::lower_bound(overlaps.begin(), overlaps.end(), id,
                             [](const worker_overlap& o, uint64_t v) { return o.worker_id < v; });
  return it != overlaps.end() && it->worker_id == id ? &*it : nullptr;
}

/// Leading prompt blocks `w` can use without computing them: those in its
/// pool, and beyond them those in its node's store.
int32_t local_blocks_of(const std::vector<worker_overlap>& overlaps, const worker_load& w) {
  const auto* own = overlap_of(overlaps, w.id);
  const auto* store = w.store_id != 0 ? overlap_of(overlaps, w.store_id) : nullptr;
  return std::max(own ? own->blocks : 0, store ? store->blocks : 0);
}

/// The store of another node than `w`'s holding the most leading blocks of
/// the prompt, if it holds more than `w` can use locally; else null.
const worker_overlap* remote_store_of(const std::vector<worker_overlap>& overlaps,
                                      std::span<const uint64_t> store_ids, const worker_load& w) {
  const worker_overlap* best = nullptr;
  for (auto id : store_ids)
    if (id != w.store_id)
      if (const auto* o = overlap_of(overlaps, id); o != nullptr && (best == nullptr || o->blocks > best->blocks))
        best = o;
  return best != nullptr && best->blocks > local_blocks_of(overlaps, w) ? best : nullptr;
}

/// The leading prompt blocks `w` holds in its pool, plus those beyond that
/// its node's store holds, credited by tier, plus those beyond both that
/// another node's store holds, credited as remote (router_options).
int32_t cached_blocks_of(const std::vector<worker_overlap>& overlaps, std::span<const uint64_t> store_ids,
                         const worker_load& w, const router_options& opts) {
  const auto* own = overlap_of(overlaps, w.id);
  const int32_t pool = own ? own->blocks : 0;
  double credited = pool;
  const auto* store = w.store_id != 0 ? overlap_of(overlaps, w.store_id) : nullptr;
  if (store != nullptr && store->blocks > pool) {
    const auto host = static_cast<double>(store->tier_blocks[static_cast<size_t>(transport::wire::kv_tier::g2_host)]);
    const auto disk = static_cast<double>(store->tier_blocks[static_cast<size_t>(transport::wire::kv_tier::g3_disk)]);
    if (host + disk > 0)
      credited += static_cast<double>(store->blocks - pool) *
                  (host * opts.host_tier_credit + disk * opts.disk_tier_credit) / (host + disk);
  }
  if (const auto* remote = remote_store_of(overlaps, store_ids, w))
    credited += static_cast<double>(remote->blocks - local_blocks_of(overlaps, w)) * opts.remote_tier_credit;
  return static_cast<int32_t>(credited);
}

/// Whether `w` may take a request: healthy (or late, in panic), under
/// max_requests, and with KV room for it (worker_load::kv_full).
bool eligible(const worker_load& w, bool panic) {
  return (w.healthy || (panic && w.late)) && (w.max_requests <= 0 || w.active_requests < w.max_requests) &&
         !w.kv_full;
}

int64_t uncached_tokens(const route_request& req, int32_t cached_blocks) {
  return std::max<int64_t>(0, int64_t{req.prompt_tokens}
                                - int64_t{cached_blocks} * int64_t{req.block_tokens});
}

} // namespace

router_policy::router_policy(router_options opts)
  : opts_(std::move(opts)), rng_state_(opts_.seed), sessions_(opts_.max_sessions) {}

router_policy::~router_policy() = default;

void router_policy::forget_session(std::string_view session_id) {
  sessions_.erase(session_table::key_of(session_id));
}

bool router_policy::prefills_locally(const route_context& ctx, const candidate& d) const {
  const bool remote_exists = std::any_of(ctx.prefill.begin(), ctx.prefill.end(), [&](const candidate& p) {
    return p.load->id != d.load->id;
  });
  return !remote_exists
         || uncached_tokens(ctx.request, d.cached_blocks) <= int64_t{opts_.max_local_prefill_tokens};
}

uint64_t router_policy::next_random() {
  return opts_.random_source ? opts_.random_source() : splitmix64(rng_state_);
}

size_t router_policy::random_index(size_t n) {
  TESSERA_ASSERT(n >= 1, "random_index of an empty range");
  return n == 1 ? 0 : static_cast<size_t>(next_random() % n);
}

size_t router_policy::pick_lowest(std::span<const candidate> c, std::span<const double> cost) {
  TESSERA_ASSERT(!c.empty() && c.size() == cost.size(), "one cost per candidate");
  auto requests = [&](size_t i) { return std::max(0, c[i].load->active_requests); };
  std::vector<size_t> best{0};
  for (size_t i = 1; i < c.size(); ++i) {
    const size_t b = best.front();
    if (cost[i] < cost[b] || (cost[i] == cost[b] && requests(i) < requests(b)))
      best.assign(1, i);
    else if (cost[i] == cost[b] && requests(i) == requests(b))
      best.push_back(i);
  }
  return best[random_index(best.size())];
}

caf::expected<route_decision> router_policy::route(const route_request& req,
                                                   std::span<const worker_load> workers,
                                                   const prefix_index& index) {
  if (auto err = check_request(req))
    return err;

  std::vector<const worker_load*> sorted;
  sorted.reserve(workers.size());
  for (const auto& w : workers)
    sorted.push_back(&w);
  std::sort(sorted.begin(), sorted.end(),
            [](const worker_load* a, const worker_load* b) { return a->id < b->id; });
  for (size_t i = 1; i < sorted.size(); ++i)
    TESSERA_ASSERT(sorted[i - 1]->id != sorted[i]->id, "worker ids passed to route() are unique");

  const auto overlaps = index.overlap(req.block_hashes);
  std::vector<uint64_t> store_ids; // the stores a worker may fetch from, beyond its node's
  for (const worker_load* w : sorted)
    if (opts_.remote_fetch && w->store_id != 0 && std::find(store_ids.begin(), store_ids.end(), w->store_id) == store_ids.end())
      store_ids.push_back(w->store_id);
  std::vector<candidate> decode;
  std::vector<candidate> prefill;
  const bool panic = panic_applies(workers, opts_);
  int64_t unhealthy = 0;
  int64_t late = 0;
  int64_t full = 0;
  int64_t prefill_only = 0;
  for (const worker_load* w : sorted) {
    if (!w->healthy && !(panic && w->late)) {
      ++unhealthy;
      continue;
    }
    late += w->healthy ? 0 : 1;
    if (!eligible(*w, panic)) {
      ++full;
      continue;
    }
    const candidate c{w, cached_blocks_of(overlaps, store_ids, *w, opts_)};
    if (w->role == worker_role::prefill)
      ++prefill_only;
    else
      decode.push_back(c);
    if (w->role == worker_role::prefill
        || (w->role == worker_role::both && opts_.remote_prefill_on_both))
      prefill.push_back(c);
  }
  if (decode.empty())
    return make_router_error(router_errc::no_healthy_worker,
                             "no healthy worker can decode: " + str(static_cast<int64_t>(workers.size()))
                               + " known, " + str(unhealthy) + " unhealthy, " + str(full)
                               + " at max_requests or without KV room, " + str(prefill_only) + " prefill-only"
                               + (panic ? " (panic routing: " + str(late) + " late)" : std::string{}));
  const route_context ctx{req, decode, prefill};

  // Step 1: the decode worker.
  const bool sticky_sessions = !req.session_id.empty() && opts_.max_sessions > 0;
  const uint64_t session_key = sticky_sessions ? session_table::key_of(req.session_id) : 0;
  std::optional<session_binding> binding;
  if (sticky_sessions)
    binding = sessions_.find(session_key);
  auto find_in = [](std::span<const candidate> list, uint64_t id) -> const candidate* {
    auto it = std::find_if(list.begin(), list.end(), [&](const candidate& c) { return c.load->id == id; });
    return it == list.end() ? nullptr : &*it;
  };
  route_decision out;
  out.panic = panic;
  std::string reason{name()};
  if (panic)
    reason += " (panic: no healthy worker can decode; " + str(late) + " late ones used)";
  const candidate* d = binding ? find_in(decode, binding->decode_worker) : nullptr;
  std::string broke;
  if (d && opts_.sticky_break_factor > 0) {
    // The sticky worker is given up when it carries more than the factor
    // times what the least-loaded one would with this request.
    // The request is priced on the least-loaded worker, in its units.
    double least = std::numeric_limits<double>::infinity();
    const worker_load* least_worker = d->load;
    for (const auto& c : decode)
      if (const double l = load_in(opts_.load, *c.load, req.block_tokens); l < least) {
        least = l;
        least_worker = c.load;
      }
    const double mine = load_in(opts_.load, *d->load, req.block_tokens);
    const double bar = opts_.sticky_break_factor
                       * (least + request_load(opts_.load, units_of(*least_worker, opts_.units), req));
    if (mine > bar) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "load %.6g %s > %g x %.6g", mine, to_string(opts_.load),
                    opts_.sticky_break_factor, bar / opts_.sticky_break_factor);
      broke = buf;
      d = nullptr;
      ++sticky_breaks_;
    }
  }
  if (d) {
    out.sticky = true;
    reason += ": decode " + str(static_cast<int64_t>(d->load->id)) + " (sticky session)";
  } else {
    auto c = choose_decode(ctx);
    TESSERA_ASSERT(c.index < decode.size(), "choose_decode returns a candidate");
    d = &decode[c.index];
    reason += ": decode " + str(static_cast<int64_t>(d->load->id));
    if (binding)
      reason += " (sticky worker " + str(static_cast<int64_t>(binding->decode_worker)) + " replaced"
                + (broke.empty() ? std::string{} : ": " + broke) + ")";
    if (!c.why.empty())
      reason += " (" + c.why + ")";
  }

  // Step 2: prefill here or on another worker.
  const int64_t local_uncached = uncached_tokens(req, d->cached_blocks);
  std::vector<candidate> remote;
  for (const auto& p : prefill)
    if (p.load->id != d->load->id)
      remote.push_back(p);
  const candidate* p = d;
  if (remote.empty()) {
    reason += "; prefill local (no prefill worker)";
  } else if (local_uncached <= int64_t{opts_.max_local_prefill_tokens}) {
    reason += "; prefill local (uncached " + str(local_uncached)
              + " <= " + str(opts_.max_local_prefill_tokens) + " tokens)";
  } else {
    // Step 3: the remote prefill worker.
    p = binding && binding->prefill_worker ? find_in(remote, *binding->prefill_worker) : nullptr;
    if (p) {
      reason += "; prefill " + str(static_cast<int64_t>(p->load->id)) + " (sticky session)";
    } else {
      auto c = choose_prefill(ctx, remote);
      TESSERA_ASSERT(c.index < remote.size(), "choose_prefill returns a candidate");
      p = &remote[c.index];
      reason += "; prefill " + str(static_cast<int64_t>(p->load->id));
      if (!c.why.empty())
        reason += " (" + c.why + ")";
    }
    reason += ", uncached on decode " + str(local_uncached) + " > "
              + str(opts_.max_local_prefill_tokens) + " tokens";
  }

  out.decode_worker = d->load->id;
  out.prefill_worker = p->load->id;
  out.disaggregated = p != d;
  out.cached_blocks = p->cached_blocks;
  reason += "; cached " + str(out.cached_blocks) + "/"
            + str(static_cast<int64_t>(req.block_hashes.size())) + " blocks";
  if (const auto* remote = remote_store_of(overlaps, store_ids, *p->load)) {
    out.fetch_store = remote->worker_id;
    out.fetch_store_blocks = remote->blocks;
    reason += " (" + str(remote->blocks) + " in store " + str(static_cast<int64_t>(remote->worker_id)) + ")";
  }
  out.reason = std::move(reason);
  if (panic)
    ++panic_routes_;

  if (sticky_sessions) {
    session_binding b;
    b.decode_worker = out.decode_worker;
    if (out.disaggregated)
      b.prefill_worker = out.prefill_worker;
    else if (binding)
      b.prefill_worker = binding->prefill_worker;
    sessions_.put(session_key, b);
  }
  return out;
}

bool panic_applies(std::span<const worker_load> workers, const router_options& opts) {
  if (!opts.panic_routing)
    return false;
  bool late = false;
  for (const auto& w : workers) {
    if (w.role == worker_role::prefill)
      continue;
    if (w.healthy)
      return false;
    late |= w.late;
  }
  return late;
}

std::span<const std::string_view> router_policy_names() {
  static constexpr std::array<std::string_view, 4> names{"kv", "round-robin", "random",
                                                          "least-loaded"};
  return names;
}

caf::expected<std::unique_ptr<router_policy>> make_router_policy(std::string_view name,
                                                                 router_options opts) {
  if (!std::isfinite(opts.overlap_weight) || opts.overlap_weight < 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", opts.overlap_weight);
    return make_router_error(router_errc::invalid_options,
                             std::string{"overlap_weight must be finite and >= 0, got "} + buf);
  }
  for (double credit : {opts.host_tier_credit, opts.disk_tier_credit, opts.remote_tier_credit})
    if (!(credit >= 0 && credit <= 1)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", credit);
      return make_router_error(router_errc::invalid_options,
                               std::string{"host_tier_credit, disk_tier_credit and remote_tier_credit must be in [0, 1], got "} + buf);
    }
  if (!std::isfinite(opts.sticky_break_factor) || (opts.sticky_break_factor != 0 && opts.sticky_break_factor < 1)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", opts.sticky_break_factor);
    return make_router_error(router_errc::invalid_options,
                             std::string{"sticky_break_factor must be 0 (never) or finite and >= 1, got "} + buf);
  }
  for (double u : {opts.units.per_input_token, opts.units.per_output_token, opts.units.per_request,
                   opts.units.per_context_token})
    if (!std::isfinite(u) || u < 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", u);
      return make_router_error(router_errc::invalid_options,
                               std::string{"model units a, b, c, d must be finite and >= 0, got "} + buf);
    }
  if (opts.max_local_prefill_tokens < 0)
    return make_router_error(router_errc::invalid_options,
                             "max_local_prefill_tokens must be >= 0, got "
                               + str(opts.max_local_prefill_tokens));
  std::unique_ptr<router_policy> p;
  if (name == "kv")
    p = std::make_unique<kv_policy>(std::move(opts));
  else if (name == "round-robin")
    p = std::make_unique<round_robin_policy>(std::move(opts));
  else if (name == "random")
    p = std::make_unique<random_policy>(std::move(opts));
  else if (name == "least-loaded")
    p = std::make_unique<least_loaded_policy>(std::move(opts));
  if (p)
    return p;
  std::string valid;
  for (auto n : router_policy_names())
    valid += (valid.empty() ? "" : ", ") + std::string{n};
  return make_router_error(router_errc::unknown_policy,
                           "unknown router policy '" + std::string{name} + "'; valid: " + valid);
}

} // namespace tessera::actors
