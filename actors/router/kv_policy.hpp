#pragma once
/// @file
/// The "kv" policy: NVIDIA Dynamo's KV-router cost, which trades the
/// prefill a worker saves thanks to its cached prefix against the decode
/// load it already carries (ai-dynamo/dynamo
/// docs/architecture/kv_cache_routing.md, "Cost Calculation"):
///
///   prefill_blocks(w) = (queued_prefill_tokens(w)
///                        + prompt_tokens - cached_blocks(w) * block_tokens)
///                       / block_tokens
///   cost(w)           = overlap_weight * prefill_blocks(w)
///                       + active_decode_blocks(w)
///
/// Lower is better. Dynamo counts the worker's prompt tokens already in
/// flight in the prefill term too (its router tracks them per worker); so
/// does this, from worker_load::queued_prefill_tokens. Dynamo's worked
/// example, weight 1: a worker with 8 blocks to prefill and 10 decoding
/// costs 18, one with 5 and 5 costs 10 and is chosen.
///
/// Decode worker: each eligible decode worker D is scored by the plan it
/// implies. If D would prefill locally (step 2 of router_policy), the plan
/// costs cost(D), exactly Dynamo's aggregated router; otherwise it costs
/// active_decode_blocks(D) + cost(P*), with P* the cheapest remote prefill
/// worker other than D. Among decode workers that would all prefill
/// remotely this is "decode by load" (Dynamo's disaggregated decode router
/// runs with overlap weight 0), and a decode worker that holds the
/// conversation and can finish it locally competes fairly with them.
/// Remote prefill worker: the lowest cost(P). Ties: fewer active requests,
/// then the seeded random numbers.
///
/// With router_options::load units (the default) the same cost is counted
/// in model units (route_types.hpp): a worker's outstanding units stand for
/// both its queued prefill and its decode load, and the request's own
/// prefill costs a per uncached prompt token:
///
///   cost(w) = overlap_weight * a * uncached(w) + outstanding_units(w)
///
/// and a decode worker prefilling remotely costs outstanding_units(D) +
/// cost(P*). `a` is the worker's own (worker_load::units: a slower device
/// prices the same prompt higher, as its outstanding units already are).
/// With load blocks the formulas above hold as written.
///
/// Later: per-tier weights (a block in g3 disk is worth less than one in
/// the g1 pool; prefix_index reports the split in worker_overlap).

#include <string_view>

#include "actors/router/router_policy.hpp"

namespace tessera::actors {

/// cost(w) above, for a worker holding `cached_blocks` leading blocks of
/// `req`. Negative loads count as 0.
[[nodiscard]] double kv_prefill_cost(const worker_load& w, int32_t cached_blocks,
                                     const route_request& req, double overlap_weight);

/// cost(w) in model units (see the file comment). Negative or non-finite
/// outstanding units count as 0.
[[nodiscard]] double kv_prefill_cost_units(const worker_load& w, int32_t cached_blocks,
                                           const route_request& req, double overlap_weight,
                                           const engine::model_units& units);

/// The "kv" policy (see the file comment).
class kv_policy final : public router_policy {
public:
  explicit kv_policy(router_options opts) : router_policy(std::move(opts)) {}
  [[nodiscard]] std::string_view name() const override { return "kv"; }

protected:
  choice choose_decode(const route_context& ctx) override;
  choice choose_prefill(const route_context& ctx, std::span<const candidate> remote) override;

private:
  /// cost(c) in the options' load measure.
  [[nodiscard]] double prefill_cost(const candidate& c, const route_request& req) const;
  /// A decode worker's own load in the options' load measure.
  [[nodiscard]] double decode_load(const worker_load& w, const route_request& req) const;
};

} // namespace tessera::actors
