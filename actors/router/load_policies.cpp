#include "actors/router/load_policies.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace tessera::actors {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The first candidate after `last` by id, wrapping; the first one if none
// was chosen yet. Candidates are sorted by id.
template <class Candidates>
size_t next_after(const Candidates& c, std::optional<uint64_t> last) {
  if (!last)
    return 0;
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].load->id > *last)
      return i;
  return 0;
}

} // namespace

double load_blocks(const worker_load& w, int32_t block_tokens) {
  const auto decode = static_cast<double>(std::max<int64_t>(0, w.active_decode_blocks));
  const auto queued = static_cast<double>(std::max<int64_t>(0, w.queued_prefill_tokens));
  return decode + queued / static_cast<double>(std::max(1, block_tokens));
}

double load_in(load_measure m, const worker_load& w, int32_t block_tokens) {
  if (m == load_measure::blocks)
    return load_blocks(w, block_tokens);
  return std::isfinite(w.outstanding_units) ? std::max(0.0, w.outstanding_units) : 0.0;
}

const engine::model_units& units_of(const worker_load& w, const engine::model_units& fallback) {
  return w.units ? *w.units : fallback;
}

double request_load(load_measure m, const engine::model_units& units, const route_request& req) {
  const int64_t max_tokens = std::max<int32_t>(0, req.max_tokens);
  if (m == load_measure::units)
    return units.cost(req.prompt_tokens, max_tokens);
  const int64_t bt = std::max(1, req.block_tokens);
  return static_cast<double>((int64_t{req.prompt_tokens} + max_tokens + bt - 1) / bt);
}

router_policy::choice round_robin_policy::choose_decode(const route_context& ctx) {
  const size_t i = next_after(ctx.decode, last_decode_);
  last_decode_ = ctx.decode[i].load->id;
  return {i, {}};
}

router_policy::choice round_robin_policy::choose_prefill(const route_context&,
                                                         std::span<const candidate> remote) {
  const size_t i = next_after(remote, last_prefill_);
  last_prefill_ = remote[i].load->id;
  return {i, {}};
}

router_policy::choice random_policy::choose_decode(const route_context& ctx) {
  return {random_index(ctx.decode.size()), {}};
}

router_policy::choice random_policy::choose_prefill(const route_context&,
                                                    std::span<const candidate> remote) {
  return {random_index(remote.size()), {}};
}

router_policy::choice least_loaded_policy::choose_decode(const route_context& ctx) {
  return choose_prefill(ctx, ctx.decode);
}

router_policy::choice least_loaded_policy::choose_prefill(const route_context& ctx,
                                                          std::span<const candidate> remote) {
  std::vector<double> load(remote.size());
  const auto m = options().load;
  for (size_t i = 0; i < remote.size(); ++i)
    load[i] = load_in(m, *remote[i].load, ctx.request.block_tokens);
  const size_t chosen = pick_lowest(remote, load);
  return {chosen, "load " + number(load[chosen]) + " " + to_string(m)};
}

} // namespace tessera::actors
