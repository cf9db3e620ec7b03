#include "actors/router/kv_policy.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

#include "actors/router/load_policies.hpp"
#include "common/assert.hpp"

namespace tessera::actors {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

double decode_blocks(const worker_load& w) {
  return static_cast<double>(std::max<int64_t>(0, w.active_decode_blocks));
}

} // namespace

double kv_prefill_cost(const worker_load& w, int32_t cached_blocks, const route_request& req,
                       double overlap_weight) {
  const int64_t uncached = std::max<int64_t>(
    0, int64_t{req.prompt_tokens} - int64_t{cached_blocks} * int64_t{req.block_tokens});
  const int64_t queued = std::max<int64_t>(0, w.queued_prefill_tokens);
  const double prefill_blocks =
    static_cast<double>(queued + uncached) / static_cast<double>(req.block_tokens);
  return overlap_weight * prefill_blocks + decode_blocks(w);
}

double kv_prefill_cost_units(const worker_load& w, int32_t cached_blocks, const route_request& req,
                             double overlap_weight, const engine::model_units& units) {
  const int64_t uncached = std::max<int64_t>(
    0, int64_t{req.prompt_tokens} - int64_t{cached_blocks} * int64_t{req.block_tokens});
  return overlap_weight * units.per_input_token * static_cast<double>(uncached)
         + load_in(load_measure::units, w, req.block_tokens);
}

double kv_policy::prefill_cost(const candidate& c, const route_request& req) const {
  if (options().load == load_measure::units)
    return kv_prefill_cost_units(*c.load, c.cached_blocks, req, options().overlap_weight,
                                 units_of(*c.load, options().units));
  return kv_prefill_cost(*c.load, c.cached_blocks, req, options().overlap_weight);
}

double kv_policy::decode_load(const worker_load& w, const route_request& req) const {
  return options().load == load_measure::units ? load_in(load_measure::units, w, req.block_tokens)
                                               : decode_blocks(w);
}

router_policy::choice kv_policy::choose_decode(const route_context& ctx) {
  // The two cheapest remote prefill workers: a decode worker that prefills
  // remotely pairs with the cheapest one that is not itself.
  constexpr size_t none = std::numeric_limits<size_t>::max();
  std::vector<double> prefill_cost(ctx.prefill.size());
  size_t best = none;
  size_t second = none;
  for (size_t i = 0; i < ctx.prefill.size(); ++i) {
    prefill_cost[i] = this->prefill_cost(ctx.prefill[i], ctx.request);
    if (best == none || prefill_cost[i] < prefill_cost[best]) {
      second = best;
      best = i;
    } else if (second == none || prefill_cost[i] < prefill_cost[second]) {
      second = i;
    }
  }

  std::vector<double> cost(ctx.decode.size());
  std::vector<double> remote_part(ctx.decode.size(), -1.0);
  for (size_t i = 0; i < ctx.decode.size(); ++i) {
    const candidate& d = ctx.decode[i];
    if (prefills_locally(ctx, d)) {
      cost[i] = this->prefill_cost(d, ctx.request);
      continue;
    }
    const size_t p = ctx.prefill[best].load->id == d.load->id ? second : best;
    TESSERA_ASSERT(p != none, "a decode worker that prefills remotely has a remote prefill worker");
    remote_part[i] = prefill_cost[p];
    cost[i] = decode_load(*d.load, ctx.request) + prefill_cost[p];
  }
  const size_t chosen = pick_lowest(ctx.decode, cost);
  std::string why = "cost " + number(cost[chosen]);
  if (remote_part[chosen] >= 0)
    why += " = decode " + number(decode_load(*ctx.decode[chosen].load, ctx.request)) + " + remote prefill "
           + number(remote_part[chosen]);
  return {chosen, std::move(why)};
}

router_policy::choice kv_policy::choose_prefill(const route_context& ctx,
                                                std::span<const candidate> remote) {
  std::vector<double> cost(remote.size());
  for (size_t i = 0; i < remote.size(); ++i)
    cost[i] = prefill_cost(remote[i], ctx.request);
  const size_t chosen = pick_lowest(remote, cost);
  return {chosen, "cost " + number(cost[chosen])};
}

} // namespace tessera::actors
