#pragma once
/// @file
/// Per-tenant rate limits in model units (engine/model_units.hpp) and
/// concurrency limits, as the API key file sets them (cluster/api_keys.hpp).
/// Plain logic: no actors, no HTTP, the clock passed in. Not thread-safe:
/// one owner (the frontend actor) calls it.
///
/// Each tenant with `units_per_minute` has a token bucket of that capacity,
/// full at first and refilled continuously at units_per_minute / 60 per
/// second. A request is charged a * input + c when it is admitted, and its
/// output is held at admission too: what its max_tokens could cost (b + d *
/// context per output token; context: the prompt and the output before
/// that token), at most what the bucket holds beyond the admission. The
/// output tokens are charged against that hold as they arrive; what is
/// left of it goes back to the bucket at release, and output beyond it
/// (none while max_tokens is kept) takes the balance down, below zero if
/// need be. Holding the output at admission is what makes the bucket a
/// rate: charged only as tokens arrive, a tenant whose requests queue
/// behind each other would be admitted far beyond its rate before the
/// first of them produced a token. `max_concurrent` bounds the tenant's
/// requests in flight (admitted and not yet released).
///
///   admit --> admitted ---- charge_output ... ---> release (refund)
///         \-> refused (units: retry after the refill time;
///                      concurrency: retry after 1 s;
///                      never_fits: the admission alone is over the
///                      bucket's capacity, no retry can help)
///
/// Tenants come and go with the key file: the table learns a tenant's
/// limits at its admissions (they follow a reloaded file), and forget_absent
/// drops those the reloaded file no longer names. A dropped tenant with
/// requests in flight stays until its last release (so its count never
/// goes wrong), and is taken back, count intact, if the file names it again.

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "actors/frontend/api_error.hpp"
#include "engine/model_units.hpp"

namespace tessera::actors::frontend {

/// One tenant's limits (from cluster::tenant_policy).
struct tenant_limit {
  /// Model units per minute (the bucket's capacity and refill per minute);
  /// nullopt: unlimited. Must be > 0 when set.
  std::optional<double> units_per_minute;
  /// Requests in flight at once; nullopt: unlimited. Must be >= 1 when set.
  std::optional<int32_t> max_concurrent;
};

/// Which limit refused a request.
enum class tenant_limit_kind : uint8_t {
  /// Admitted: none.
  none,
  /// The units bucket holds less than the admission's cost.
  units,
  /// The tenant has max_concurrent requests in flight.
  concurrency,
  /// The admission's cost alone is over the bucket's capacity: never
  /// admitted, whatever the wait.
  never_fits,
};

/// What admit decided.
struct tenant_admission {
  bool admitted = false;
  tenant_limit_kind limit = tenant_limit_kind::none;
  /// Refused: seconds until a retry can succeed (units: until the bucket
  /// holds the cost, assuming nothing else is charged meanwhile;
  /// concurrency: 1). 0 when admitted or never_fits.
  double retry_after_s = 0;
  /// The tenant's balance after the decision, in units (for messages).
  double balance = 0;
  /// Admitted: the output units held for the request (what it asked to
  /// hold, capped at the bucket's capacity less the admission; 0 without
  /// a bucket). Refused: what the hold would have been.
  double held = 0;
};

/// The table of tenants' buckets and in-flight counts.
class tenant_limits {
public:
  using clock = std::chrono::steady_clock;

  /// `units` prices the output tokens charge_output charges (b, d).
  explicit tenant_limits(engine::model_units units = {}) : units_(units) {}

  /// The unit prices (a, b, c, d).
  [[nodiscard]] const engine::model_units& units() const { return units_; }

  /// Admits a request of tenant `tenant` (limits `limit`, which replace
  /// what the table had) costing `admission_units` (a * input + c) at
  /// `now`, holding `output_units` more for its output (at most the
  /// capacity less the admission): takes both from its bucket and counts
  /// it in flight, or refuses it, taking nothing. A refusal for units
  /// says when the bucket holds the admission and the hold.
  [[nodiscard]] tenant_admission admit(const std::string& tenant, const tenant_limit& limit,
                                       double admission_units, clock::time_point now,
                                       double output_units = 0);

  /// Charges `tokens` output tokens of an admitted request of `tenant`,
  /// the first of them after `context` tokens (prompt and output so far):
  /// model_units::decode(context, tokens), b + d * context each. They are
  /// taken from `*held` (the request's hold left, tenant_admission::held
  /// at admission) first and from the balance beyond it; `held` null: all
  /// from the balance. A tenant the table does not have is ignored.
  void charge_output(const std::string& tenant, int64_t tokens, int64_t context, clock::time_point now,
                     double* held = nullptr);

  /// Ends an admitted request of `tenant` (however it ended), giving back
  /// `unused_hold` units (what is left of its hold; the balance stays at
  /// most the capacity). A tenant the table does not have, or one with
  /// none in flight, is ignored.
  void release(const std::string& tenant, double unused_hold, clock::time_point now);
  /// release(tenant, 0, now): a request that held nothing.
  void release(const std::string& tenant) { release(tenant, 0, clock::now()); }

  /// After a key file reload: forgets every tenant not in `names` (one
  /// with requests in flight at its last release).
  void forget_absent(const std::set<std::string>& names);

  /// The balance of `tenant`'s bucket at `now`, in units; nullopt when the
  /// table has no bucket for it (unknown, or no units_per_minute).
  [[nodiscard]] std::optional<double> balance(const std::string& tenant, clock::time_point now);

  /// `tenant`'s requests in flight (0 when unknown).
  [[nodiscard]] int32_t in_flight(const std::string& tenant) const;

  /// Tenants the table holds.
  [[nodiscard]] size_t size() const { return tenants_.size(); }

private:
  struct entry {
    tenant_limit limit;
    double balance = 0;
    clock::time_point refilled;
    int32_t in_flight = 0;
    /// The key file no longer names it: erased at the last release.
    bool dropped = false;
  };
  void refill(entry& e, clock::time_point now) const;

  engine::model_units units_;
  std::unordered_map<std::string, entry> tenants_;
};

/// The API error for a refusal `a` of a request of `tenant` (limits
/// `limit`) costing `admission_units` at admission:
///  - units or concurrency: 429, type "rate_limit_error", code
///    "rate_limit_exceeded", naming the limit, the cost and when to retry
///    (send it with a Retry-After header of retry_after_header_s);
///  - never_fits: 400, type "invalid_request_error", code
///    "request_exceeds_rate_limit", param "prompt": the prompt alone costs
///    more than the tenant's bucket holds, so no wait can admit it (a 429
///    would make clients, the OpenAI SDKs among them, retry it in vain).
[[nodiscard]] api_error tenant_refusal_error(const std::string& tenant, const tenant_limit& limit,
                                             const tenant_admission& a, double admission_units);

/// The Retry-After header's whole seconds for a refusal: retry_after_s
/// rounded up, at least 1.
[[nodiscard]] int64_t retry_after_header_s(const tenant_admission& a);

/// Largest |priority| a request gets (the body's `priority` field is
/// range-checked against it; a tenant's priority is clamped to it), so that
/// no request reaches the router's health canaries (canary_priority).
inline constexpr int32_t max_request_priority = 1'000'000;

/// The engine priority (higher first) of a request whose body asked for
/// `requested` (nullopt: no `priority` field): with a tenant
/// (`tenant_priority`, from the key file) the request's own value capped by
/// the tenant's, or the tenant's when it asked for none; without keys
/// (nullopt) what it asked for, or 0. Clamped to +-max_request_priority.
[[nodiscard]] int32_t request_priority(std::optional<int32_t> requested, std::optional<int32_t> tenant_priority);

} // namespace tessera::actors::frontend
