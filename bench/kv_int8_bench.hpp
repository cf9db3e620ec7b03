#pragma once
/// @file
/// `tessera bench kv-int8`: what keeping KV blocks as int8 in the kv store's
/// tiers (tiered_store_options::tier_codec) costs in model output and saves
/// in bytes. One run, per KV dtype:
///
///   prefill `prompt_tokens` on table E (exact)
///   put E's full blocks into a tiered_block_store of `codec`, get them back
///   into tables Q and F (what a worker fetching them would hold)
///   next turn: `turn_tokens` new tokens on E and Q (Q first recomputes the
///   prompt's partial last block, as an engine does), then
///   `generate_tokens` greedy steps: E and Q fed E's tokens (teacher
///   forcing: every logits row compares the same context), F fed its own
///   greedy tokens (free running: where generation first departs)
///
/// Compared per logits row (generate_tokens rows: the turn's last token's,
/// then one per greedy token fed but the last): max |Δlogit|,
/// KL(softmax(E) || softmax(Q)), whether the argmax agrees, and the change
/// in log-probability of E's greedy token.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "engine/backend.hpp"
#include "kvstore/block.hpp"

namespace tessera::bench {

/// One measurement's shape.
struct kv_int8_run_options {
  /// Tokens of the first turn, whose full blocks go through the store.
  /// Default: 512.
  int32_t prompt_tokens = 512;
  /// New tokens of the next turn. Default: 32.
  int32_t turn_tokens = 32;
  /// Greedy tokens generated after the turn. Default: 64.
  int32_t generate_tokens = 64;
  /// Seeds the random prompt and turn. Default: 0.
  uint64_t seed = 0;
  /// How the store keeps the blocks; exact is the control (every Δ is 0).
  /// Default: int8.
  kvstore::block_codec codec = kvstore::block_codec::int8;
};

/// What one measurement found.
struct kv_int8_measurement {
  /// Layout of the backend's blocks (its kv dtype).
  engine::kv_layout layout;
  /// Blocks that went through the store.
  size_t blocks = 0;
  /// Their exact payload bytes.
  size_t exact_bytes = 0;
  /// Their payload bytes as the store held them.
  size_t stored_bytes = 0;
  /// 1 - stored_bytes / exact_bytes.
  double saved_fraction = 0;
  /// Over the blocks: mean and largest RMS error of the KV as read back,
  /// relative to the RMS of the KV.
  double kv_rms_relative_error_mean = 0;
  double kv_rms_relative_error_max = 0;
  /// Logits rows compared (generate_tokens).
  int32_t rows = 0;
  /// Largest |logit_E - logit_Q| over every row and id.
  double max_abs_dlogit = 0;
  /// Mean over the rows of the standard deviation of E's logits: the scale
  /// max_abs_dlogit compares with (a random-weight model's is small).
  double mean_logit_std = 0;
  /// Mean and largest KL(softmax(E) || softmax(Q)) over the rows, nats.
  double mean_kl = 0;
  double max_kl = 0;
  /// Fraction of rows whose argmax agrees.
  double top1_agreement = 0;
  /// Largest |log p_E(g) - log p_Q(g)| of E's greedy token g over the rows.
  double max_abs_dlogprob_greedy = 0;
  /// Free running: generated tokens equal to E's before the first that
  /// differs (generate_tokens when none does), and how many equal overall.
  int32_t free_run_prefix = 0;
  int32_t free_run_equal = 0;
  /// Whether every logit of every row of E and Q was finite.
  bool all_finite = true;
};

/// Runs one measurement on `be`, whose KV pool needs 3 tables of
/// ceil((prompt + turn + generate) / block_tokens) blocks (blocks from 0 up
/// are overwritten). Errors (engine_errc::bad_request): too few blocks, a
/// non-positive token count, a prompt shorter than one block, or the
/// store refusing a block.
[[nodiscard]] caf::expected<kv_int8_measurement> measure_kv_int8(engine::backend& be,
                                                                 const kv_int8_run_options& o);

/// Options of `tessera bench kv-int8`.
struct kv_int8_bench_options {
  /// Model folder (required).
  std::string model;
  /// Where to write the JSON results ("" for none).
  std::string json_path;
  /// CPU threads; <= 0 means all cores. Default: 0.
  int threads = 0;
  /// KV dtypes measured, one backend each. Default: f32, bf16.
  std::vector<std::string> kv_dtypes = {"f32", "bf16"};
  /// Also run the exact-codec control per dtype. Default: false.
  bool control = false;
  /// The measurement's shape (its codec is ignored: int8, and exact for
  /// the control).
  kv_int8_run_options run;
};

/// Runs the benchmark, prints a table to stdout (progress to stderr) and
/// writes JSON if asked. Returns a process exit code.
int run_kv_int8_bench(const kv_int8_bench_options& opts);

} // namespace tessera::bench
