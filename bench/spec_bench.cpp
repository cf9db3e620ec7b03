#include "bench/spec_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "bench/bench_request.hpp"
#include "bench/fixed_format.hpp"
#include "common/error.hpp"
#include "engine/draft_model.hpp"
#include "engine/engine.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// One engine run of a set of requests.
struct run_stats {
  double decode_tok_s = 0;
  uint64_t draft_tokens = 0;
  uint64_t accepted_tokens = 0;
  uint64_t steps = 0;
  std::map<uint64_t, std::vector<int32_t>> outputs;
};

caf::expected<std::unique_ptr<engine::engine>> make_engine(const engine::model_files& files,
                                                           const spec_bench_options& o) {
  engine::backend_options bo;
  bo.choice = o.engine;
  bo.threads = o.threads;
  auto be = engine::make_backend(files, bo);
  if (!be)
    return std::move(be.error());
  engine::engine_config ec;
  ec.scheduling.max_num_seqs = 256;
  ec.scheduling.max_batched_tokens = 2048;
  auto eng = std::make_unique<engine::engine>(std::move(*be), ec);
  if (!o.draft_model.empty()) {
    auto dfiles = engine::load_model_files(o.draft_model, o.engine.kind);
    if (!dfiles)
      return std::move(dfiles.error());
    if (auto err = engine::check_draft_tokenizer(*files.tokenizer, *dfiles->tokenizer))
      return err;
    auto dbe = engine::make_backend(*dfiles, bo);
    if (!dbe)
      return std::move(dbe.error());
    if (auto err = eng->attach_draft_model(std::move(*dbe)))
      return err;
  }
  return eng;
}

caf::expected<run_stats> run_requests(engine::engine& eng, const std::vector<engine::request>& reqs) {
  const auto before = eng.stats();
  for (const auto& r : reqs)
    if (auto err = eng.add_request(r))
      return err;
  run_stats s;
  size_t started = 0;
  uint64_t tokens_after_start = 0;
  clock_type::time_point t_start;
  while (eng.has_unfinished()) {
    for (const auto& out : eng.step()) {
      if (out.error)
        return out.error;
      auto& toks = s.outputs[out.id];
      const bool first = toks.empty() && !out.tokens.empty();
      toks.insert(toks.end(), out.tokens.begin(), out.tokens.end());
      if (started == reqs.size())
        tokens_after_start += out.tokens.size();
      else if (first && ++started == reqs.size())
        t_start = clock_type::now();
    }
  }
  const double secs = std::chrono::duration<double>(clock_type::now() - t_start).count();
  const auto after = eng.stats();
  s.decode_tok_s = secs > 0 ? static_cast<double>(tokens_after_start) / secs : 0;
  s.draft_tokens = after.draft_tokens - before.draft_tokens;
  s.accepted_tokens = after.accepted_draft_tokens - before.accepted_draft_tokens;
  s.steps = after.steps - before.steps;
  return s;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int32_t n, int32_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p)
    t = static_cast<int32_t>(8 + rng() % static_cast<uint64_t>(vocab - 8));
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

struct point {
  std::string workload;
  int32_t batch = 0;
  double plain_tok_s = 0;
  double spec_tok_s = 0;
  double acceptance = 0;
  double tokens_per_step = 0;
  bool identical = true;
  bool compared = true;
  std::vector<double> plain_runs, spec_runs;
};

} // namespace

int run_spec_bench(const spec_bench_options& o) {
  auto files = engine::load_model_files(o.model, o.engine.kind);
  if (!files) {
    std::fprintf(stderr, "bench spec: %s\n", error_text(files.error()).c_str());
    return 1;
  }
  // One engine for both: each request says whether it speculates, so the
  // two share the thread pool, the KV pool and the machine's state.
  auto plain = make_engine(*files, o);
  if (!plain) {
    std::fprintf(stderr, "bench spec: %s\n", error_text(plain.error()).c_str());
    return 1;
  }
  auto& eng = **plain;
  const int32_t vocab = files->config.vocab_size;
  const std::string backend_desc = eng.get_backend().description();
  const bool use_draft = !o.draft_model.empty();
  const std::string method_name = (use_draft ? "draft:" : "ngram:") + std::to_string(o.num_tokens);
  std::vector<point> points;
  uint64_t next_id = 1;
  for (const std::string workload : {"repetitive", "random"}) {
    for (int32_t batch : o.batches) {
      std::mt19937_64 rng{o.seed + static_cast<uint64_t>(batch) * 7919};
      std::vector<engine::request> reqs;
      for (int32_t i = 0; i < batch; ++i) {
        auto p = random_tokens(rng, o.prompt_tokens, vocab);
        if (workload == "repetitive") {
          // The model's own greedy continuation of P, then P again.
          auto first = run_requests(eng, {bench_request(next_id++, p, o.generate_tokens)});
          if (!first) {
            std::fprintf(stderr, "bench spec: %s\n", error_text(first.error()).c_str());
            return 1;
          }
          const auto o_tokens = first->outputs.begin()->second;
          std::vector<int32_t> prompt = p;
          prompt.insert(prompt.end(), o_tokens.begin(), o_tokens.end());
          prompt.insert(prompt.end(), p.begin(), p.end());
          p = std::move(prompt);
        }
        auto r = bench_request(0, std::move(p), o.generate_tokens);
        if (workload == "random") {
          // Sampled (seeded: the same tokens with and without speculation):
          // a random-weight model's greedy output soon repeats itself,
          // which n-grams predict; its samples do not.
          r.params.temperature = 1.0f;
          r.params.seed = o.seed + static_cast<uint64_t>(i);
        }
        reqs.push_back(std::move(r));
      }
      point pt;
      pt.workload = workload;
      pt.batch = batch;
      // A draft model's sampled drafts are verified by the rejection rule:
      // the same distribution, other draws.
      pt.compared = !(use_draft && workload == "random");
      std::vector<double> plain_rates, spec_rates;
      uint64_t drafts = 0, accepted = 0, steps = 0, generated = 0;
      for (int run = 0; run < o.runs; ++run) {
        // Fresh ids each run (the prefix cache helps both alike); the order
        // alternates, so neither always runs on a machine the other warmed.
        auto with = [&](std::optional<engine::speculative_params> sp) {
          for (auto& r : reqs) {
            r.id = next_id++;
            r.params.speculative = sp;
          }
          return run_requests(eng, reqs);
        };
        const engine::speculative_params none{};
        const engine::speculative_params ngram{use_draft ? engine::speculative_params::method_kind::draft
                                                         : engine::speculative_params::method_kind::ngram,
                                               o.num_tokens};
        std::optional<caf::expected<run_stats>> pa, pb;
        if (run % 2 == 0) {
          pa.emplace(with(none));
          pb.emplace(with(ngram));
        } else {
          pb.emplace(with(ngram));
          pa.emplace(with(none));
        }
        auto& a = *pa;
        auto& b = *pb;
        if (!a || !b) {
          std::fprintf(stderr, "bench spec: %s\n", error_text(!a ? a.error() : b.error()).c_str());
          return 1;
        }
        plain_rates.push_back(a->decode_tok_s);
        spec_rates.push_back(b->decode_tok_s);
        drafts += b->draft_tokens;
        accepted += b->accepted_tokens;
        steps += b->steps;
        // Same requests in the same order: the i-th outputs correspond.
        auto ia = a->outputs.begin();
        for (auto ib = b->outputs.begin(); ib != b->outputs.end(); ++ia, ++ib) {
          pt.identical = pt.identical && (!pt.compared || ia->second == ib->second);
          generated += ib->second.size();
        }
      }
      pt.plain_runs = plain_rates;
      pt.spec_runs = spec_rates;
      pt.plain_tok_s = median(plain_rates);
      pt.spec_tok_s = median(spec_rates);
      pt.acceptance = drafts ? static_cast<double>(accepted) / static_cast<double>(drafts) : 0;
      pt.tokens_per_step = steps ? static_cast<double>(generated) / static_cast<double>(steps * static_cast<uint64_t>(batch)) : 0;
      std::fprintf(stderr, "bench spec: %s batch %d: plain %.1f tok/s, %s %.1f tok/s (runs: %s), %llu of %llu drafts accepted\n",
                   workload.c_str(), batch, pt.plain_tok_s, method_name.c_str(), pt.spec_tok_s,
                   [&] {
                     std::string r;
                     for (size_t i = 0; i < plain_rates.size(); ++i)
                       r += (i ? " " : "") + fixed("%.0f", plain_rates[i]) + "/" + fixed("%.0f", spec_rates[i]);
                     return r;
                   }().c_str(),
                   static_cast<unsigned long long>(accepted), static_cast<unsigned long long>(drafts));
      points.push_back(pt);
    }
  }

  std::printf("\n| workload | batch | plain tok/s | %s tok/s | speed-up | acceptance | tokens/step/request | identical |\n"
              "|---|---|---|---|---|---|---|---|\n",
              method_name.c_str());
  bool all_identical = true;
  for (const auto& p : points) {
    all_identical = all_identical && p.identical;
    std::printf("| %s | %d | %s | %s | %s | %s | %s | %s |\n", p.workload.c_str(), p.batch,
                fixed("%.1f", p.plain_tok_s).c_str(), fixed("%.1f", p.spec_tok_s).c_str(),
                fixed("%.2fx", p.plain_tok_s > 0 ? p.spec_tok_s / p.plain_tok_s : 0).c_str(),
                fixed("%.1f%%", 100 * p.acceptance).c_str(), fixed("%.2f", p.tokens_per_step).c_str(),
                !p.compared ? "n/a (sampled)" : p.identical ? "yes" : "NO");
  }
  if (use_draft)
    std::printf("\n(draft model %s, %s)", o.draft_model.c_str(),
                eng.get_draft_model()->get_backend().description().c_str());
  std::printf("\n(%s, %s; repetitive: greedy, prompt P + O + P with P of %d random tokens; random: "
              "%d random prompt tokens, sampled at temperature 1 with a seed; %d generated per request, "
              "median of %d interleaved runs; decode tok/s after every request has its first token; "
              "tokens/step/request: generated tokens / (steps x batch), with speculation)\n",
              o.model.c_str(), backend_desc.c_str(), o.prompt_tokens, o.prompt_tokens, o.generate_tokens,
              o.runs);

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["backend"] = backend_desc;
    j["num_tokens"] = o.num_tokens;
    j["method"] = method_name;
    if (use_draft)
      j["draft_model"] = o.draft_model;
    j["prompt_tokens"] = o.prompt_tokens;
    j["generate_tokens"] = o.generate_tokens;
    j["runs"] = o.runs;
    j["seed"] = o.seed;
    auto& pts = j["points"] = nlohmann::json::array();
    for (const auto& p : points)
      pts.push_back({{"workload", p.workload},
                     {"batch", p.batch},
                     {"plain_tok_s", p.plain_tok_s},
                     {"spec_tok_s", p.spec_tok_s},
                     {"speedup", p.plain_tok_s > 0 ? p.spec_tok_s / p.plain_tok_s : 0},
                     {"acceptance", p.acceptance},
                     {"tokens_per_step", p.tokens_per_step},
                     {"identical", p.identical},
                     {"compared", p.compared},
                     {"plain_tok_s_runs", p.plain_runs},
                     {"spec_tok_s_runs", p.spec_runs}});
    std::ofstream f{o.json_path};
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench spec: cannot write %s\n", o.json_path.c_str());
      return 1;
    }
  }
  if (!all_identical) {
    std::fprintf(stderr, "bench spec: an output with speculation differs from the plain one\n");
    return 1;
  }
  return 0;
}

} // namespace tessera::bench
