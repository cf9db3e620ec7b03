#include "bench/grammar_decode_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;
using so = engine::structured_output_params;

struct mode {
  const char* name;
  so params;
};

std::vector<mode> modes() {
  return {
    {"none", {}},
    {"json_object", {so::kind_type::json_object, ""}},
    {"person",
     {so::kind_type::json_schema,
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer"},"email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z]+\\.com$"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":4}},"required":["name","age","email"],"additionalProperties":false})"}},
    {"tool_call",
     {so::kind_type::json_schema,
      R"({"type":"object","properties":{"name":{"enum":["get_weather","search","calculate"]},"arguments":{"type":"object","properties":{"query":{"type":"string"},"units":{"enum":["metric","imperial"]},"limit":{"type":"integer"}},"required":["query"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false})"}},
  };
}

struct run_result {
  double us_per_token = 0;
  uint64_t tokens = 0;
  uint64_t documents = 0;
};

// A steady batch of `batch` decoding requests for `steps` timed steps: a
// request that finishes is replaced at once, and the step after a
// replacement (which prefills it) is not timed, so every timed step decodes
// exactly `batch` sequences in both modes.
caf::expected<run_result> run_mode(engine::engine& eng, const mode& m, int32_t batch,
                                   const grammar_decode_options& o, uint64_t& next_id,
                                   std::mt19937_64& rng, int32_t vocab) {
  auto make = [&] {
    engine::request r;
    r.id = next_id++;
    for (int i = 0; i < 16; ++i)
      r.prompt.push_back(static_cast<int32_t>(8 + rng() % static_cast<uint64_t>(vocab - 8)));
    r.params.temperature = 1.0f;
    r.params.seed = r.id;
    r.params.max_tokens = o.max_tokens;
    r.params.structured_output = m.params;
    return r;
  };
  std::set<uint64_t> live;
  auto add = [&]() -> caf::error {
    auto r = make();
    live.insert(r.id);
    return eng.add_request(std::move(r));
  };
  for (int32_t i = 0; i < batch; ++i)
    if (auto err = add())
      return err;
  run_result res;
  double secs = 0;
  bool admitted = true;
  for (int counted = 0; counted < o.steps;) {
    const auto t0 = clock_type::now();
    auto outs = eng.step();
    const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    uint64_t toks = 0;
    int finished = 0;
    for (const auto& out : outs) {
      if (out.error)
        return out.error;
      toks += out.tokens.size();
      if (out.finish != engine::finish_reason::none) {
        ++finished;
        live.erase(out.id);
        res.documents += out.finish == engine::finish_reason::stop;
      }
    }
    if (!admitted) {
      secs += dt;
      res.tokens += toks;
      ++counted;
    }
    admitted = finished > 0;
    for (int i = 0; i < finished; ++i)
      if (auto err = add())
        return err;
  }
  for (auto id : live)
    (void) eng.abort(id);
  res.us_per_token = res.tokens > 0 ? secs * 1e6 / static_cast<double>(res.tokens) : 0;
  return res;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

} // namespace

int run_grammar_decode_bench(const grammar_decode_options& o) {
  auto files = engine::load_model_files(o.model_dir, engine::backend_kind::cpu);
  if (!files) {
    std::fprintf(stderr, "grammar_bench: %s\n", error_text(files.error()).c_str());
    return 1;
  }
  engine::backend_options bo;
  bo.threads = o.threads;
  auto be = engine::make_backend(*files, bo);
  if (!be) {
    std::fprintf(stderr, "grammar_bench: %s\n", error_text(be.error()).c_str());
    return 1;
  }
  engine::engine_config ec;
  ec.scheduling.max_num_seqs = 256;
  ec.scheduling.max_batched_tokens = 2048;
  engine::engine eng(std::move(*be), ec, files->tokenizer);
  const int32_t vocab = files->tokenizer->vocab_size();
  std::printf("grammar_bench decode: %s, vocab %d, max_tokens %d, %d timed steps x %d rounds\n",
              eng.get_backend().description().c_str(), vocab, o.max_tokens, o.steps, o.rounds);
  // runs[batch][mode] = us per token of each round.
  std::map<int32_t, std::map<std::string, std::vector<double>>> runs;
  std::map<int32_t, std::map<std::string, uint64_t>> docs;
  uint64_t next_id = 1;
  std::mt19937_64 rng{42};
  for (int round = 0; round < o.rounds; ++round)
    for (int32_t batch : o.batches)
      for (const auto& m : modes()) {
        auto r = run_mode(eng, m, batch, o, next_id, rng, std::min(vocab, files->config.vocab_size));
        if (!r) {
          std::fprintf(stderr, "grammar_bench: %s\n", error_text(r.error()).c_str());
          return 1;
        }
        runs[batch][m.name].push_back(r->us_per_token);
        docs[batch][m.name] += r->documents;
      }
  std::printf("%6s %-12s %14s %10s %10s\n", "batch", "schema", "us/token", "overhead", "docs");
  nlohmann::json out = nlohmann::json::array();
  for (int32_t batch : o.batches) {
    const double base = median(runs[batch]["none"]);
    for (const auto& m : modes()) {
      const double us = median(runs[batch][m.name]);
      const double overhead = base > 0 ? (us / base - 1) * 100 : 0;
      std::printf("%6d %-12s %14.1f %9.1f%% %10llu\n", batch, m.name, us, overhead,
                  static_cast<unsigned long long>(docs[batch][m.name]));
      out.push_back({{"batch", batch}, {"schema", m.name}, {"us_per_token", us},
                     {"overhead_percent", overhead}, {"rounds", runs[batch][m.name]},
                     {"documents_ended", docs[batch][m.name]}});
    }
  }
  if (!o.json_path.empty())
    std::ofstream(o.json_path) << out.dump(2) << "\n";
  return 0;
}

} // namespace tessera::bench
