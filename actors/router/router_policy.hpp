#pragma once
/// @file
/// The router's decision as a plain class: given the request, every
/// worker's load and the prefix index, pick the decode worker and the
/// prefill worker. No actors, clocks or threads; the router actor owns one
/// instance and feeds it (DESIGN.md: "Policies are plain classes,
/// unit-tested without actors").
///
/// Every policy makes the same three steps; only the choices in steps 1 and
/// 3 differ between policies (choose_decode, choose_prefill):
///
///   1. decode worker D: the session's sticky decode worker if it can take
///      the request and its load is at most sticky_break_factor times the
///      least-loaded eligible worker's plus the request's, else the policy's choice among the eligible workers of
///      role decode or both (eligible: healthy and under max_requests).
///   2. conditional disaggregation: D prefills the request itself when
///      prompt_tokens - (D's cached blocks x block_tokens) <=
///      max_local_prefill_tokens, or when no other worker may prefill for
///      it; otherwise a remote prefill worker P does (Dynamo's rule).
///   3. P: the session's sticky prefill worker if eligible, else the
///      policy's choice among eligible workers of role prefill (and both,
///      with remote_prefill_on_both), never D.
///
/// The session table then maps the session to (D, P). A sticky worker that
/// is unhealthy, full or gone is replaced and the mapping updated.
///
/// Panic routing (router_options::panic_routing): when no worker of role
/// decode or both is healthy but some are only late (worker_load::late),
/// every late worker counts as healthy for the three steps above, and the
/// decision says so (route_decision::panic). One healthy decode worker
/// ends it: then late workers get nothing, as before.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "actors/router/prefix_index.hpp"
#include "actors/router/route_types.hpp"
#include "actors/router/session_table.hpp"

namespace tessera::actors {

/// A routing policy with its state (round-robin cursors, random numbers,
/// the session table). Not thread-safe: the router actor owns one and calls
/// it from its handlers only. Move-only through unique_ptr.
class router_policy {
public:
  virtual ~router_policy();
  router_policy(const router_policy&) = delete;
  router_policy& operator=(const router_policy&) = delete;

  /// Picks the workers for `req` among `workers` (any order; ids unique),
  /// reading cached prefixes from `index`, and records the session's
  /// binding. Errors: invalid_request (req inconsistent), no_healthy_worker
  /// (no eligible worker of role decode or both; the message counts the
  /// workers left out and why).
  [[nodiscard]] caf::expected<route_decision>
  route(const route_request& req, std::span<const worker_load> workers, const prefix_index& index);

  /// The name make_router_policy knows it by ("kv", ...).
  [[nodiscard]] virtual std::string_view name() const = 0;

  /// The options in force.
  [[nodiscard]] const router_options& options() const { return opts_; }

  /// Sessions remembered.
  [[nodiscard]] size_t sessions() const { return sessions_.size(); }

  /// Sessions forgotten because the table was full.
  [[nodiscard]] uint64_t session_evictions() const { return sessions_.evictions(); }

  /// Sticky bindings given up because the sticky worker's load exceeded
  /// router_options::sticky_break_factor times the least-loaded one's.
  [[nodiscard]] uint64_t sticky_breaks() const { return sticky_breaks_; }

  /// Requests routed in panic (route_decision::panic).
  [[nodiscard]] uint64_t panic_routes() const { return panic_routes_; }

  /// Forgets a session's binding (the conversation ended).
  void forget_session(std::string_view session_id);

protected:
  /// An eligible worker and the leading blocks of the request it holds.
  struct candidate {
    const worker_load* load = nullptr;
    int32_t cached_blocks = 0;
  };

  /// What the hooks choose from; both lists are sorted by worker id.
  struct route_context {
    const route_request& request;
    /// Eligible workers of role decode or both; never empty.
    std::span<const candidate> decode;
    /// Eligible workers that may prefill for others.
    std::span<const candidate> prefill;
  };

  /// A hook's answer: an index into the list it was given, and a few words
  /// for the decision's reason (costs, load).
  struct choice {
    size_t index = 0;
    std::string why;
  };

  explicit router_policy(router_options opts);

  /// The decode worker for a request with no usable sticky binding.
  virtual choice choose_decode(const route_context& ctx) = 0;

  /// The remote prefill worker among `remote` (ctx.prefill without the
  /// decode worker; never empty).
  virtual choice choose_prefill(const route_context& ctx, std::span<const candidate> remote) = 0;

  /// Step 2: whether decode candidate `d` prefills the request itself.
  [[nodiscard]] bool prefills_locally(const route_context& ctx, const candidate& d) const;

  /// The next 64 random bits (options().random_source, or splitmix64
  /// seeded with options().seed).
  uint64_t next_random();

  /// An index in [0, n), n >= 1, from next_random() (modulo; the bias is
  /// below n / 2^64).
  size_t random_index(size_t n);

  /// The index of the lowest `cost` (one per candidate); ties go to fewer
  /// active requests, remaining ties to random_index among them (so equal
  /// workers share load, deterministically for a given seed).
  size_t pick_lowest(std::span<const candidate> c, std::span<const double> cost);

private:
  router_options opts_;
  uint64_t rng_state_;
  session_table sessions_;
  uint64_t sticky_breaks_ = 0;
  uint64_t panic_routes_ = 0;
};

/// Whether `workers` call for panic routing under `opts`: panic_routing is
/// on, no worker of role decode or both is healthy, and at least one of
/// them is late (worker_load::late). router_policy::route decides with it;
/// the router actor calls it to log each panic episode once.
[[nodiscard]] bool panic_applies(std::span<const worker_load> workers, const router_options& opts);

/// The policy names make_router_policy knows: "kv", "round-robin",
/// "random", "least-loaded".
[[nodiscard]] std::span<const std::string_view> router_policy_names();

/// A policy by name (see router_policy_names()). Errors: unknown_policy
/// naming the valid choices; invalid_options (overlap_weight negative or
/// not finite, max_local_prefill_tokens negative, sticky_break_factor in
/// (0, 1) or not finite, units negative or not finite).
[[nodiscard]] caf::expected<std::unique_ptr<router_policy>>
make_router_policy(std::string_view name, router_options opts = {});

} // namespace tessera::actors
