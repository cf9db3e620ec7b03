#include "bench/kv_pool_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <span>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/kv_int8.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

struct pool_run {
  engine::dtype kv;
  std::unique_ptr<engine::backend> be;
  std::vector<double> logprobs;
  bool finite = true;
  double bytes_per_token = 0;
  int32_t capacity_blocks = 0;
  int64_t capacity_seqs = 0;
  // tok/s per round, per decode shape (batches..., then the long one).
  std::vector<std::vector<double>> rounds;
};

int32_t blocks_for(int32_t tokens, int32_t bt) { return (tokens + bt - 1) / bt; }

// Teacher-forced log p(tokens[i + 1] | tokens[..i]) for every i, in chunks
// (the kernels are batch-invariant: chunking changes nothing).
void teacher_logprobs(pool_run& r, const std::vector<int32_t>& tokens) {
  auto& be = *r.be;
  const int32_t bt = be.layout().block_tokens;
  const int32_t n = static_cast<int32_t>(tokens.size()) - 1;
  std::vector<engine::kv_block_id> table(blocks_for(n, bt));
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<engine::kv_block_id>(i);
  const int32_t vocab = be.logits_vocab();
  constexpr int32_t chunk = 256;
  std::vector<float> logits(static_cast<size_t>(chunk) * vocab);
  for (int32_t start = 0; start < n; start += chunk) {
    const int32_t len = std::min(chunk, n - start);
    engine::forward_seq f{std::span{tokens}.subspan(start, len), start, table, len};
    be.forward(std::span{&f, 1}, logits.data());
    for (int32_t row = 0; row < len; ++row) {
      const float* l = logits.data() + static_cast<size_t>(row) * vocab;
      double m = -1e300, sum = 0;
      for (int32_t i = 0; i < vocab; ++i) {
        r.finite = r.finite && std::isfinite(l[i]);
        m = std::max(m, static_cast<double>(l[i]));
      }
      for (int32_t i = 0; i < vocab; ++i)
        sum += std::exp(static_cast<double>(l[i]) - m);
      r.logprobs.push_back(static_cast<double>(l[tokens[start + row + 1]]) - m - std::log(sum));
    }
  }
}

// One block of random K/V in `l`'s dtype (int8: quantized per token as the
// pool does), written into blocks [0, n).
void fill_random(engine::backend& be, int32_t n, uint64_t seed) {
  const auto& l = be.layout();
  std::vector<std::byte> block(l.block_bytes());
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> nd{0.0f, 1.0f};
  std::vector<float> x(static_cast<size_t>(l.head_dim));
  for (int32_t layer = 0; layer < l.num_layers; ++layer)
    for (int is_v = 0; is_v < 2; ++is_v)
      for (int32_t h = 0; h < l.num_kv_heads; ++h) {
        std::byte* slab = block.data() + l.slab_offset(layer, is_v != 0, h);
        for (int32_t t = 0; t < l.block_tokens; ++t) {
          for (auto& v : x)
            v = nd(rng);
          // K slabs are [head_dim][block_tokens], V slabs [block_tokens][head_dim].
          const size_t first = is_v ? static_cast<size_t>(t) * l.head_dim : static_cast<size_t>(t);
          const size_t stride = is_v ? 1 : static_cast<size_t>(l.block_tokens);
          if (l.kv_dtype == engine::dtype::i8) {
            const uint16_t s = engine::kv_int8_quantize(x.data(), l.head_dim,
                                                        reinterpret_cast<int8_t*>(slab) + first, stride);
            std::memcpy(slab + l.slab_values_bytes() + 2 * static_cast<size_t>(t), &s, 2);
          } else {
            for (int32_t d = 0; d < l.head_dim; ++d)
              engine::store_from_f32(slab, l.kv_dtype, first + d * stride, x[d]);
          }
        }
      }
  for (int32_t b = 0; b < n; ++b)
    be.write_block(b, block);
}

// Decode tok/s of `batch` sequences at `context` tokens: `steps` timed steps
// after one untimed.
double decode_rate(engine::backend& be, int32_t batch, int32_t context, int32_t steps, uint64_t seed) {
  const int32_t bt = be.layout().block_tokens;
  const int32_t per_seq = blocks_for(context + steps + 1, bt);
  std::vector<std::vector<engine::kv_block_id>> tables(batch);
  for (int32_t s = 0; s < batch; ++s)
    for (int32_t b = 0; b < per_seq; ++b)
      tables[s].push_back(s * per_seq + b);
  std::mt19937_64 rng{seed};
  std::uniform_int_distribution<int32_t> tok{8, be.config().vocab_size - 1};
  std::vector<int32_t> tokens(batch);
  std::vector<float> logits(static_cast<size_t>(batch) * be.logits_vocab());
  std::vector<engine::forward_seq> seqs(batch);
  auto step = [&](int32_t pos) {
    for (int32_t s = 0; s < batch; ++s) {
      tokens[s] = tok(rng);
      seqs[s] = engine::forward_seq{std::span{tokens}.subspan(s, 1), pos, tables[s], 1};
    }
    be.forward(seqs, logits.data());
  };
  step(context);
  const auto t0 = clock_type::now();
  for (int32_t i = 1; i <= steps; ++i)
    step(context + i);
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  return static_cast<double>(batch) * steps / s;
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

} // namespace

int run_kv_pool_bench(const kv_pool_bench_options& o) {
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "bench kv-int8 --pool: %s\n", what.c_str());
    return 1;
  };
  if (o.logprob_tokens < 2 || o.decode_context < 1 || o.long_context < 1 || o.long_batch < 1 ||
      o.steps < 1 || o.rounds < 1 || o.pool_mib < 1 || o.capacity_seq_tokens < 1 ||
      std::any_of(o.batches.begin(), o.batches.end(), [](int32_t b) { return b < 1; }))
    return fail("every count must be positive");
  auto loaded = engine::load_model_files(o.model, engine::backend_kind::cpu);
  if (!loaded)
    return fail(error_text(loaded.error()));
  const int32_t bt = 16;
  std::vector<std::pair<int32_t, int32_t>> shapes; // (batch, context)
  for (int32_t b : o.batches)
    shapes.emplace_back(b, o.decode_context);
  shapes.emplace_back(o.long_batch, o.long_context);
  int32_t need = blocks_for(o.logprob_tokens, bt);
  for (auto [b, c] : shapes)
    need = std::max(need, b * blocks_for(c + o.steps + 1, bt));

  std::vector<pool_run> runs;
  std::string desc;
  for (auto kv : {engine::dtype::bf16, engine::dtype::i8}) {
    pool_run r;
    r.kv = kv;
    engine::backend_options bo;
    bo.threads = o.threads;
    bo.kv_dtype = kv;
    bo.block_tokens = bt;
    bo.kv_cache_bytes = static_cast<size_t>(o.pool_mib) << 20;
    auto cap = engine::make_backend(*loaded, bo);
    if (!cap)
      return fail(error_text(cap.error()));
    r.capacity_blocks = (*cap)->num_blocks();
    r.capacity_seqs = r.capacity_blocks / blocks_for(o.capacity_seq_tokens, bt);
    r.bytes_per_token = static_cast<double>((*cap)->layout().block_bytes()) / bt;
    cap->reset();
    bo.kv_cache_bytes = static_cast<size_t>(need) * engine::kv_layout{bt, loaded->config.num_hidden_layers,
                                                                      loaded->config.num_key_value_heads,
                                                                      loaded->config.head_dim, kv}
                                                      .block_bytes();
    auto be = engine::make_backend(*loaded, bo);
    if (!be)
      return fail(error_text(be.error()));
    desc = (*be)->description();
    r.be = std::move(*be);
    r.rounds.assign(shapes.size(), {});
    runs.push_back(std::move(r));
  }

  std::mt19937_64 rng{o.seed};
  std::uniform_int_distribution<int32_t> tok{8, loaded->config.vocab_size - 1};
  std::vector<int32_t> text(static_cast<size_t>(o.logprob_tokens) + 1);
  for (auto& t : text)
    t = tok(rng);
  for (auto& r : runs) {
    std::fprintf(stderr, "bench kv-int8 --pool: %s pool, teacher-forced logprobs of %d tokens\n",
                 std::string{engine::kv_dtype_name(r.kv)}.c_str(), o.logprob_tokens);
    teacher_logprobs(r, text);
  }
  for (auto& r : runs)
    fill_random(*r.be, r.be->num_blocks(), o.seed + 1);
  for (int32_t round = 0; round < o.rounds; ++round)
    for (size_t i = 0; i < shapes.size(); ++i)
      for (size_t k = 0; k < runs.size(); ++k) {
        auto& r = runs[round % 2 ? runs.size() - 1 - k : k]; // alternate who goes first
        const double rate = decode_rate(*r.be, shapes[i].first, shapes[i].second, o.steps, o.seed + 2 + round);
        std::fprintf(stderr, "bench kv-int8 --pool: round %d, %s pool, %d x %d tokens: %.1f tok/s\n", round + 1,
                     std::string{engine::kv_dtype_name(r.kv)}.c_str(), shapes[i].first, shapes[i].second, rate);
        r.rounds[i].push_back(rate);
      }

  const auto& ref = runs[0].logprobs;
  const auto& q = runs[1].logprobs;
  double mean = 0, max = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(q[i] - ref[i]);
    mean += e / static_cast<double>(ref.size());
    max = std::max(max, e);
  }
  std::printf("\n%-9s %11s %12s %14s", "kv pool", "bytes/token", "pool blocks",
              ("seqs of " + std::to_string(o.capacity_seq_tokens)).c_str());
  for (auto [b, c] : shapes)
    std::printf(" %18s", (std::to_string(b) + " x " + std::to_string(c) + " tok/s").c_str());
  std::printf("\n");
  for (const auto& r : runs) {
    std::printf("%-9s %11.0f %12d %14lld", std::string{engine::kv_dtype_name(r.kv)}.c_str(), r.bytes_per_token,
                r.capacity_blocks, static_cast<long long>(r.capacity_seqs));
    for (const auto& v : r.rounds)
      std::printf(" %18.1f", median(v));
    std::printf("\n");
  }
  std::printf("%-9s %11.3f %12.3f %14.3f", "int8/bf16", runs[1].bytes_per_token / runs[0].bytes_per_token,
              static_cast<double>(runs[1].capacity_blocks) / runs[0].capacity_blocks,
              static_cast<double>(runs[1].capacity_seqs) / static_cast<double>(std::max<int64_t>(1, runs[0].capacity_seqs)));
  for (size_t i = 0; i < shapes.size(); ++i)
    std::printf(" %18.3f", median(runs[1].rounds[i]) / median(runs[0].rounds[i]));
  std::printf("\nlogprob |int8 - bf16| over %zu teacher-forced tokens: mean %.5f, max %.5f\n", ref.size(), mean, max);
  std::printf("(%s, %s; pool of %lld MiB; decode: median of %d rounds of %d steps, random KV as context)\n",
              o.model.c_str(), desc.c_str(), static_cast<long long>(o.pool_mib), o.rounds, o.steps);

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["backend"] = desc;
    j["logprob_tokens"] = o.logprob_tokens;
    j["logprob_abs_error_mean"] = mean;
    j["logprob_abs_error_max"] = max;
    j["pool_mib"] = o.pool_mib;
    j["capacity_seq_tokens"] = o.capacity_seq_tokens;
    auto& arr = j["pools"] = nlohmann::json::array();
    for (const auto& r : runs) {
      nlohmann::json p{{"kv_dtype", engine::kv_dtype_name(r.kv)},
                       {"bytes_per_token", r.bytes_per_token},
                       {"capacity_blocks", r.capacity_blocks},
                       {"capacity_seqs", r.capacity_seqs}};
      auto& d = p["decode"] = nlohmann::json::array();
      for (size_t i = 0; i < shapes.size(); ++i)
        d.push_back({{"batch", shapes[i].first},
                     {"context", shapes[i].second},
                     {"tok_s_median", median(r.rounds[i])},
                     {"tok_s_rounds", r.rounds[i]}});
      arr.push_back(std::move(p));
    }
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f)
      return fail("cannot write " + o.json_path);
  }
  return runs[0].finite && runs[1].finite ? 0 : 1;
}

} // namespace tessera::bench
