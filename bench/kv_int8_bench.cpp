#include "bench/kv_int8_bench.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <span>

#include <nlohmann/json.hpp>

#include "bench/bench_request.hpp"
#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "engine/factory/backend_factory.hpp"
#include "kvstore/block_quant.hpp"
#include "kvstore/tiered_block_store.hpp"

namespace tessera::bench {

namespace {

using engine::kv_block_id;

// log-softmax of `row`, in double.
std::vector<double> log_softmax(std::span<const float> row) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float x : row)
    mx = std::max(mx, double{x});
  double sum = 0;
  for (float x : row)
    sum += std::exp(double{x} - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(row.size());
  for (size_t i = 0; i < row.size(); ++i)
    out[i] = double{row[i]} - lse;
  return out;
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

struct row_stats {
  double max_abs_dlogit = 0;
  double kl_sum = 0;
  double max_kl = 0;
  int32_t agree = 0;
  int32_t rows = 0;
  double max_abs_dlogprob = 0;
  double logit_std_sum = 0;
  bool finite = true;

  void add(std::span<const float> e, std::span<const float> q) {
    for (size_t i = 0; i < e.size(); ++i) {
      if (!std::isfinite(e[i]) || !std::isfinite(q[i]))
        finite = false;
      max_abs_dlogit = std::max(max_abs_dlogit, std::fabs(double{e[i]} - double{q[i]}));
    }
    double mean = 0, var = 0;
    for (float x : e)
      mean += x;
    mean /= static_cast<double>(e.size());
    for (float x : e)
      var += (x - mean) * (x - mean);
    logit_std_sum += std::sqrt(var / static_cast<double>(e.size()));
    const auto le = log_softmax(e), lq = log_softmax(q);
    double kl = 0;
    for (size_t i = 0; i < e.size(); ++i)
      if (std::isfinite(le[i]))
        kl += std::exp(le[i]) * (le[i] - lq[i]);
    kl = std::max(kl, 0.0); // rounding can take an exact match a hair below 0
    kl_sum += kl;
    max_kl = std::max(max_kl, kl);
    const int32_t g = argmax(e);
    agree += g == argmax(q) ? 1 : 0;
    max_abs_dlogprob = std::max(max_abs_dlogprob, std::fabs(le[static_cast<size_t>(g)] - lq[static_cast<size_t>(g)]));
    ++rows;
  }
};

} // namespace

caf::expected<kv_int8_measurement> measure_kv_int8(engine::backend& be, const kv_int8_run_options& o) {
  auto bad = [](const std::string& what) {
    return engine::make_engine_error(engine::engine_errc::bad_request, "bench kv-int8: " + what);
  };
  const auto& layout = be.layout();
  const int32_t bt = layout.block_tokens;
  if (o.prompt_tokens < bt || o.turn_tokens < 1 || o.generate_tokens < 1)
    return bad("need a prompt of at least one block (" + std::to_string(bt) +
               " tokens), a turn and a generated token");
  const int32_t total = o.prompt_tokens + o.turn_tokens + o.generate_tokens;
  const int32_t nb = (total + bt - 1) / bt;
  if (3 * nb > be.num_blocks())
    return bad("the KV pool has " + std::to_string(be.num_blocks()) + " blocks, the run needs " +
               std::to_string(3 * nb));
  std::vector<kv_block_id> table_e(static_cast<size_t>(nb)), table_q(table_e.size()), table_f(table_e.size());
  for (int32_t i = 0; i < nb; ++i) {
    table_e[static_cast<size_t>(i)] = i;
    table_q[static_cast<size_t>(i)] = nb + i;
    table_f[static_cast<size_t>(i)] = 2 * nb + i;
  }
  const int32_t vocab = be.config().vocab_size;
  const auto prompt = random_tokens(o.prompt_tokens, vocab, o.seed);
  const auto turn = random_tokens(o.turn_tokens, vocab, o.seed + 1);
  const size_t V = static_cast<size_t>(be.logits_vocab());
  std::vector<float> logits(3 * V);

  // Turn 1 on E.
  engine::forward_seq first{prompt, 0, table_e, false};
  be.forward({&first, 1}, logits.data());

  // E's full blocks through the store, into Q and F.
  kvstore::tiered_store_options so;
  so.host_capacity_bytes = size_t{4} << 30;
  so.tier_codec = o.codec;
  auto store = kvstore::tiered_block_store::open(so);
  if (!store)
    return std::move(store.error());
  kv_int8_measurement m;
  m.layout = layout;
  const int32_t full = o.prompt_tokens / bt;
  const uint64_t ns = 0x6b76'696e'7438ull; // any namespace: the store is this run's alone
  std::vector<std::byte> bytes(layout.block_bytes());
  double rel_sum = 0;
  for (int32_t i = 0; i < full; ++i) {
    be.read_block(table_e[static_cast<size_t>(i)], bytes);
    auto block = kvstore::make_block(layout, bt, bytes);
    const kvstore::block_key key{ns, engine::kv_block_hash{0, static_cast<uint64_t>(i + 1)}};
    if (auto err = (*store)->put(key, block))
      return err;
    auto hit = (*store)->get(key);
    if (!hit || !(hit->block.meta.layout == layout) || hit->block.payload_bytes() != bytes.size())
      return bad("the store lost block " + std::to_string(i));
    be.write_block(table_q[static_cast<size_t>(i)], *hit->block.payload);
    be.write_block(table_f[static_cast<size_t>(i)], *hit->block.payload);
    // The KV error as read back (what int8 put there, bf16 rounding included).
    double err2 = 0, x2 = 0;
    const size_t n = bytes.size() / engine::dtype_size(layout.kv_dtype);
    for (size_t j = 0; j < n; ++j) {
      const double x = engine::load_as_f32(bytes.data(), layout.kv_dtype, j);
      const double y = engine::load_as_f32(hit->block.payload->data(), layout.kv_dtype, j);
      err2 += (x - y) * (x - y);
      x2 += x * x;
    }
    const double rel = x2 > 0 ? std::sqrt(err2 / x2) : 0.0;
    rel_sum += rel;
    m.kv_rms_relative_error_max = std::max(m.kv_rms_relative_error_max, rel);
  }
  const auto st = (*store)->stats();
  m.blocks = static_cast<size_t>(full);
  m.exact_bytes = m.blocks * layout.block_bytes();
  m.stored_bytes = st.host.used_bytes - st.host.blocks * kvstore::host_tier::entry_overhead_bytes;
  m.saved_fraction = m.exact_bytes ? 1.0 - static_cast<double>(m.stored_bytes) / static_cast<double>(m.exact_bytes) : 0.0;
  m.kv_rms_relative_error_mean = full ? rel_sum / full : 0.0;

  // Turn 2: Q and F first recompute the prompt's tokens past its last full
  // block, as an engine continuing from fetched blocks would.
  std::vector<int32_t> resumed(prompt.begin() + full * bt, prompt.end());
  resumed.insert(resumed.end(), turn.begin(), turn.end());
  const int32_t resume_pos = full * bt;
  std::array<engine::forward_seq, 3> seqs{
      engine::forward_seq{turn, o.prompt_tokens, table_e, true},
      engine::forward_seq{resumed, resume_pos, table_q, true},
      engine::forward_seq{resumed, resume_pos, table_f, true}};
  be.forward(seqs, logits.data());
  auto row = [&](size_t r) { return std::span<const float>{logits.data() + r * V, V}; };
  row_stats rs;
  rs.add(row(0), row(1));
  std::vector<int32_t> greedy_e, greedy_f;
  int32_t pos = o.prompt_tokens + o.turn_tokens;
  bool departed = false;
  for (int32_t step = 0; step < o.generate_tokens; ++step, ++pos) {
    greedy_e.push_back(argmax(row(0)));
    greedy_f.push_back(argmax(row(2)));
    if (!departed && greedy_f.back() == greedy_e.back())
      ++m.free_run_prefix;
    else
      departed = true;
    m.free_run_equal += greedy_f.back() == greedy_e.back() ? 1 : 0;
    if (step + 1 == o.generate_tokens)
      break; // the last token's logits are not needed
    const std::span<const int32_t> te{&greedy_e.back(), 1}, tf{&greedy_f.back(), 1};
    seqs = {engine::forward_seq{te, pos, table_e, true}, engine::forward_seq{te, pos, table_q, true},
            engine::forward_seq{tf, pos, table_f, true}};
    be.forward(seqs, logits.data());
    rs.add(row(0), row(1));
  }
  m.rows = rs.rows;
  m.max_abs_dlogit = rs.max_abs_dlogit;
  m.mean_kl = rs.rows ? rs.kl_sum / rs.rows : 0.0;
  m.max_kl = rs.max_kl;
  m.top1_agreement = rs.rows ? static_cast<double>(rs.agree) / rs.rows : 0.0;
  m.max_abs_dlogprob_greedy = rs.max_abs_dlogprob;
  m.mean_logit_std = rs.rows ? rs.logit_std_sum / rs.rows : 0.0;
  m.all_finite = rs.finite;
  return m;
}

int run_kv_int8_bench(const kv_int8_bench_options& o) {
  auto loaded = engine::load_model_files(o.model, engine::backend_kind::cpu);
  if (!loaded) {
    std::fprintf(stderr, "bench kv-int8: %s\n", error_text(loaded.error()).c_str());
    return 1;
  }
  struct result {
    std::string dtype;
    std::string codec;
    kv_int8_measurement m;
    double seconds = 0;
  };
  std::vector<result> results;
  std::string backend_desc;
  for (const auto& name : o.kv_dtypes) {
    auto t = engine::parse_dtype(name);
    if (!t) {
      std::fprintf(stderr, "bench kv-int8: unknown KV dtype '%s' (f32, f16, bf16)\n", name.c_str());
      return 2;
    }
    engine::backend_options bopts;
    bopts.threads = o.threads;
    bopts.kv_dtype = *t;
    const int32_t total = o.run.prompt_tokens + o.run.turn_tokens + o.run.generate_tokens;
    const engine::kv_layout l{bopts.block_tokens, loaded->config.num_hidden_layers,
                              loaded->config.num_key_value_heads, loaded->config.head_dim, *t};
    bopts.kv_cache_bytes = (3 * static_cast<size_t>((total + l.block_tokens - 1) / l.block_tokens) + 1) *
                           l.block_bytes();
    auto be = engine::make_backend(*loaded, bopts);
    if (!be) {
      std::fprintf(stderr, "bench kv-int8: %s\n", error_text(be.error()).c_str());
      return 1;
    }
    backend_desc = (*be)->description();
    std::vector<kvstore::block_codec> codecs{kvstore::block_codec::int8};
    if (o.control)
      codecs.push_back(kvstore::block_codec::exact);
    for (auto c : codecs) {
      auto run = o.run;
      run.codec = c;
      std::fprintf(stderr, "bench kv-int8: %s KV, %s blocks: %d prompt + %d turn tokens, %d generated\n",
                   name.c_str(), kvstore::to_string(c), run.prompt_tokens, run.turn_tokens,
                   run.generate_tokens);
      const auto t0 = std::chrono::steady_clock::now();
      auto m = measure_kv_int8(**be, run);
      if (!m) {
        std::fprintf(stderr, "bench kv-int8: %s\n", error_text(m.error()).c_str());
        return 1;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      results.push_back({name, kvstore::to_string(c), *m, s});
    }
  }

  std::printf("\n%-9s %-6s %6s %10s %10s %6s %9s %10s %11s %10s %10s %7s %11s %9s\n", "kv dtype", "codec",
              "blocks", "exact KiB", "stored KiB", "saved", "kv rms", "logit std", "max|dlogit|", "mean KL",
              "max KL", "top-1", "max|dlogp|", "free run");
  for (const auto& r : results) {
    const auto& m = r.m;
    std::printf("%-9s %-6s %6zu %10.1f %10.1f %5.1f%% %8.3f%% %10.3f %11.4f %10.2e %10.2e %6.1f%% %11.4f %5d/%-3d%s\n",
                r.dtype.c_str(), r.codec.c_str(), m.blocks, static_cast<double>(m.exact_bytes) / 1024,
                static_cast<double>(m.stored_bytes) / 1024, 100 * m.saved_fraction,
                100 * m.kv_rms_relative_error_mean, m.mean_logit_std, m.max_abs_dlogit, m.mean_kl, m.max_kl,
                100 * m.top1_agreement, m.max_abs_dlogprob_greedy, m.free_run_prefix,
                o.run.generate_tokens, m.all_finite ? "" : "  (non-finite logits)");
  }
  std::printf("(%s, %s; %d logits rows per run: the turn's last token and %d teacher-forced greedy "
              "steps; kv rms: RMS error of the KV read back / RMS of the KV; KL in nats, "
              "exact || stored; logit std: spread of the exact logits, the scale of |dlogit|; free run: greedy tokens equal to exact before the first that differs)\n",
              o.model.c_str(), backend_desc.c_str(), results.empty() ? 0 : results[0].m.rows,
              o.run.generate_tokens - 1);

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["backend"] = backend_desc;
    j["prompt_tokens"] = o.run.prompt_tokens;
    j["turn_tokens"] = o.run.turn_tokens;
    j["generate_tokens"] = o.run.generate_tokens;
    j["seed"] = o.run.seed;
    auto& runs = j["runs"] = nlohmann::json::array();
    for (const auto& r : results) {
      const auto& m = r.m;
      runs.push_back({{"kv_dtype", r.dtype},
                      {"codec", r.codec},
                      {"blocks", m.blocks},
                      {"block_tokens", m.layout.block_tokens},
                      {"exact_bytes", m.exact_bytes},
                      {"stored_bytes", m.stored_bytes},
                      {"saved_fraction", m.saved_fraction},
                      {"kv_rms_relative_error_mean", m.kv_rms_relative_error_mean},
                      {"kv_rms_relative_error_max", m.kv_rms_relative_error_max},
                      {"rows", m.rows},
                      {"max_abs_dlogit", m.max_abs_dlogit},
                      {"mean_logit_std", m.mean_logit_std},
                      {"mean_kl", m.mean_kl},
                      {"max_kl", m.max_kl},
                      {"top1_agreement", m.top1_agreement},
                      {"max_abs_dlogprob_greedy", m.max_abs_dlogprob_greedy},
                      {"free_run_prefix", m.free_run_prefix},
                      {"free_run_equal", m.free_run_equal},
                      {"all_finite", m.all_finite},
                      {"seconds", r.seconds}});
    }
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench kv-int8: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
  }
  for (const auto& r : results)
    if (!r.m.all_finite)
      return 1;
  return 0;
}

} // namespace tessera::bench
