#pragma once
/// @file
/// The cache-blind policies: round-robin, random and least-loaded. They
/// choose workers without looking at cached prefixes, but the steps every
/// policy shares (router_policy.hpp) still use the prefix index: session
/// stickiness, and the conditional-disaggregation test on the decode
/// worker's cached prefix. Ties in least-loaded go to fewer active
/// requests, then to the seeded random numbers.

#include <cstdint>
#include <optional>
#include <string_view>

#include "actors/router/router_policy.hpp"

namespace tessera::actors {

/// Each choice takes the next eligible worker after the previous one, by
/// worker id, wrapping (decode and prefill have their own cursor), so every
/// eligible worker is visited once per round even as workers come and go.
class round_robin_policy final : public router_policy {
public:
  explicit round_robin_policy(router_options opts) : router_policy(std::move(opts)) {}
  [[nodiscard]] std::string_view name() const override { return "round-robin"; }

protected:
  choice choose_decode(const route_context& ctx) override;
  choice choose_prefill(const route_context& ctx, std::span<const candidate> remote) override;

private:
  std::optional<uint64_t> last_decode_;
  std::optional<uint64_t> last_prefill_;
};

/// Each choice is uniform among the eligible workers, from the policy's
/// seeded random numbers: the same seed and inputs give the same choices.
class random_policy final : public router_policy {
public:
  explicit random_policy(router_options opts) : router_policy(std::move(opts)) {}
  [[nodiscard]] std::string_view name() const override { return "random"; }

protected:
  choice choose_decode(const route_context& ctx) override;
  choice choose_prefill(const route_context& ctx, std::span<const candidate> remote) override;
};

/// Each choice takes the worker with the least load: outstanding model
/// units (router_options::load units, the default), or in blocks,
/// active_decode_blocks + queued_prefill_tokens / block_tokens.
class least_loaded_policy final : public router_policy {
public:
  explicit least_loaded_policy(router_options opts) : router_policy(std::move(opts)) {}
  [[nodiscard]] std::string_view name() const override { return "least-loaded"; }

protected:
  choice choose_decode(const route_context& ctx) override;
  choice choose_prefill(const route_context& ctx, std::span<const candidate> remote) override;
};

/// The least-loaded policy's load of `w`, in blocks of `block_tokens`.
/// Negative counts count as 0.
[[nodiscard]] double load_blocks(const worker_load& w, int32_t block_tokens);

/// `w`'s load in `m`: outstanding_units (negative counts as 0), or
/// load_blocks.
[[nodiscard]] double load_in(load_measure m, const worker_load& w, int32_t block_tokens);

/// The units `w` prices work in: its own (worker_load::units), else
/// `fallback` (router_options::units).
[[nodiscard]] const engine::model_units& units_of(const worker_load& w, const engine::model_units& fallback);

/// What `req` adds to a worker's load in `m`: units.cost(prompt,
/// max_tokens), or its blocks ceil((prompt + max_tokens) / block_tokens).
[[nodiscard]] double request_load(load_measure m, const engine::model_units& units, const route_request& req);

} // namespace tessera::actors
