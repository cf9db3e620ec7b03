// grammar_bench: the cost of a grammar token mask per decode step, for the
// demo byte-level BPE vocabulary at the sizes of Tessera's model shapes
// (nano 512, micro 2048, tiny/small 32000) and a synthetic 128256-id one
// (Llama 3's size), on a few schemas of the kinds structured output uses.
//
//   grammar_bench [--steps N] [--json FILE] [--vocab N]...
//   grammar_bench --decode-model DIR [--threads N] [--batch N]... [--decode-steps N]
//                 [--rounds N] [--max-tokens N] [--json FILE]
//
// The second form decodes with the engine (cpu backend) on a model folder,
// unconstrained and under three grammars (grammar_decode_bench.hpp), and
// prints microseconds per generated token and the overhead of each grammar.
//
// For each (vocabulary, schema): random walks that sample uniformly from
// each step's mask (closing mode after 48 tokens, as a step budget would),
// timing token_masker::fill with the caches off (every mask a full trie
// walk), on from cold (the first documents of a schema), and warm (the
// same masker serving new documents of the schema, as for repeated
// requests), plus the closing-mode mask and accept_token. Prints a table
// and writes JSON.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/grammar_decode_bench.hpp"
#include "engine/grammar/json_schema.hpp"
#include "engine/grammar/token_mask.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer.hpp"
#include "engine/tokenizer_builder.hpp"

namespace {

using namespace tessera::engine;
using namespace tessera::engine::grammar;
using clock_type = std::chrono::steady_clock;

struct bench_schema {
  const char* name;
  const char* text; // nullptr: json_object mode
};

const std::vector<bench_schema>& schemas() {
  static const std::vector<bench_schema> s = {
      {"json_object", nullptr},
      {"person",
       R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer"},"email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z]+\\.com$"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":4}},"required":["name","age","email"],"additionalProperties":false})"},
      {"tool_call",
       R"({"type":"object","properties":{"name":{"enum":["get_weather","search","calculate"]},"arguments":{"type":"object","properties":{"query":{"type":"string"},"units":{"enum":["metric","imperial"]},"limit":{"type":"integer"}},"required":["query"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false})"},
      {"tree",
       R"({"$defs":{"t":{"type":"object","properties":{"label":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/t"}}},"required":["label","kids"],"additionalProperties":false}},"$ref":"#/$defs/t"})"},
  };
  return s;
}

struct options {
  int steps = 400;
  std::string json_path;
  std::vector<int32_t> vocabs;
};

double ns_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
}

struct measurement {
  int32_t vocab = 0;
  std::string schema;
  size_t masks = 0;
  double compile_ms = 0;
  double trie_ms = 0;
  double uncached_ns = 0;
  double cached_ns = 0;
  double warm_ns = 0;
  double closing_ns = 0;
  double accept_ns = 0;
  double hit_rate = 0;
  double allowed_avg = 0;
  size_t grammar_nodes = 0;
};

measurement run(const token_trie& trie, const bench_schema& bs, int steps, uint64_t seed) {
  measurement out;
  out.vocab = trie.vocab_size();
  out.schema = bs.name;
  auto t0 = clock_type::now();
  auto compiled = bs.text ? compile_json_schema_text(bs.text) : compile_json_object_mode();
  out.compile_ms = ns_since(t0) / 1e6;
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s: %s\n", bs.name, compiled.error.text().c_str());
    std::exit(1);
  }
  out.grammar_nodes = compiled.value->nodes().size();
  token_masker uncached(trie, 0);
  token_masker cached(trie, 256);
  std::mt19937_64 rng(seed);
  token_mask mask;
  token_mask check;
  std::vector<int32_t> allowed;
  double t_uncached = 0, t_cached = 0, t_closing = 0, t_accept = 0;
  size_t closing_masks = 0, accepts = 0;
  double allowed_sum = 0;
  grammar_matcher m(compiled.value);
  size_t walk_step = 0;
  for (int step = 0; step < steps; ++step) {
    mask_mode mode = walk_step < 48 ? mask_mode::free : mask_mode::closing;
    if (mode == mask_mode::free) {
      auto a = clock_type::now();
      uncached.fill(m, mode, check);
      t_uncached += ns_since(a);
      auto b = clock_type::now();
      cached.fill(m, mode, mask);
      t_cached += ns_since(b);
      ++out.masks;
    } else {
      auto a = clock_type::now();
      cached.fill(m, mode, mask);
      t_closing += ns_since(a);
      ++closing_masks;
    }
    allowed.clear();
    for (size_t w = 0; w < mask.bits.size(); ++w)
      for (uint64_t bits = mask.bits[w]; bits != 0; bits &= bits - 1)
        allowed.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits))));
    allowed_sum += static_cast<double>(allowed.size());
    std::erase_if(allowed, [&](int32_t id) { return trie.is_eos(id); });
    if (allowed.empty() || (mask.eos_allowed && rng() % 4 == 0)) {
      m = grammar_matcher(compiled.value); // EOS: start the next document
      walk_step = 0;
      continue;
    }
    int32_t id = allowed[rng() % allowed.size()];
    auto c = clock_type::now();
    bool ok = cached.accept_token(m, id);
    t_accept += ns_since(c);
    ++accepts;
    if (!ok) {
      std::fprintf(stderr, "a masked token was refused\n");
      std::exit(1);
    }
    ++walk_step;
  }
  // Warm: the same masker (its caches filled) serving new documents of
  // the same schema, as a server does for repeated requests.
  {
    std::mt19937_64 rng2(seed + 1);
    grammar_matcher w(compiled.value);
    double t_warm = 0;
    size_t warm_masks = 0;
    size_t ws = 0;
    for (int step = 0; step < steps; ++step) {
      mask_mode mode = ws < 48 ? mask_mode::free : mask_mode::closing;
      auto a = clock_type::now();
      cached.fill(w, mode, mask);
      if (mode == mask_mode::free) {
        t_warm += ns_since(a);
        ++warm_masks;
      }
      allowed.clear();
      for (size_t i = 0; i < mask.bits.size(); ++i)
        for (uint64_t bits = mask.bits[i]; bits != 0; bits &= bits - 1)
          allowed.push_back(static_cast<int32_t>(i * 64 + static_cast<size_t>(std::countr_zero(bits))));
      std::erase_if(allowed, [&](int32_t id) { return trie.is_eos(id); });
      if (allowed.empty() || (mask.eos_allowed && rng2() % 4 == 0)) {
        w = grammar_matcher(compiled.value);
        ws = 0;
        continue;
      }
      (void)cached.accept_token(w, allowed[rng2() % allowed.size()]);
      ++ws;
    }
    out.warm_ns = warm_masks ? t_warm / static_cast<double>(warm_masks) : 0;
  }
  out.uncached_ns = out.masks ? t_uncached / static_cast<double>(out.masks) : 0;
  out.cached_ns = out.masks ? t_cached / static_cast<double>(out.masks) : 0;
  out.closing_ns = closing_masks ? t_closing / static_cast<double>(closing_masks) : 0;
  out.accept_ns = accepts ? t_accept / static_cast<double>(accepts) : 0;
  uint64_t lookups = cached.cache_hits() + cached.cache_misses();
  out.hit_rate = lookups ? static_cast<double>(cached.cache_hits()) / static_cast<double>(lookups) : 0;
  out.allowed_avg = allowed_sum / steps;
  return out;
}

} // namespace

int main(int argc, char** argv) {
  options opt;
  tessera::bench::grammar_decode_options decode;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--steps") {
      opt.steps = std::stoi(next());
    } else if (a == "--json") {
      opt.json_path = next();
    } else if (a == "--vocab") {
      opt.vocabs.push_back(std::stoi(next()));
    } else if (a == "--decode-model") {
      decode.model_dir = next();
    } else if (a == "--threads") {
      decode.threads = std::stoi(next());
    } else if (a == "--decode-steps") {
      decode.steps = std::stoi(next());
    } else if (a == "--rounds") {
      decode.rounds = std::stoi(next());
    } else if (a == "--max-tokens") {
      decode.max_tokens = std::stoi(next());
    } else if (a == "--batch") {
      if (decode.batches == tessera::bench::grammar_decode_options{}.batches)
        decode.batches.clear();
      decode.batches.push_back(std::stoi(next()));
    } else {
      std::fprintf(stderr,
                   "usage: grammar_bench [--steps N] [--json FILE] [--vocab N]...\n"
                   "       grammar_bench --decode-model DIR [--threads N] [--batch N]... "
                   "[--decode-steps N] [--rounds N] [--max-tokens N] [--json FILE]\n");
      return 2;
    }
  }
  if (!decode.model_dir.empty()) {
    decode.json_path = opt.json_path;
    return tessera::bench::run_grammar_decode_bench(decode);
  }
  if (opt.vocabs.empty())
    opt.vocabs = {512, 2048, 32000, 128256};
  std::vector<measurement> results;
  std::printf("%7s %-12s %6s %8s %12s %10s %8s %11s %10s %6s %8s\n", "vocab", "schema", "masks",
              "trie_ms", "uncached_us", "cached_us", "warm_us", "closing_us", "accept_ns", "hit%",
              "allowed");
  for (int32_t vocab : opt.vocabs) {
    auto dir = std::filesystem::temp_directory_path() /
               ("tessera-grammar-bench-" + std::to_string(vocab));
    std::filesystem::create_directories(dir);
    if (auto err = write_demo_tokenizer(dir, vocab)) {
      std::fprintf(stderr, "cannot write the demo tokenizer\n");
      return 1;
    }
    auto tok = load_tokenizer(dir, model_config{});
    std::filesystem::remove_all(dir);
    if (!tok) {
      std::fprintf(stderr, "cannot load the demo tokenizer\n");
      return 1;
    }
    grammar_vocabulary v;
    for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) {
      v.token_bytes.push_back((*tok)->token_bytes(id));
      v.special.push_back((*tok)->is_special(id));
    }
    v.eos_ids = {demo_special_ids::end_of_text, demo_special_ids::eot};
    auto t0 = clock_type::now();
    token_trie trie(v);
    double trie_ms = ns_since(t0) / 1e6;
    for (const auto& s : schemas()) {
      measurement m = run(trie, s, opt.steps, 42);
      std::printf("%7d %-12s %6zu %8.1f %12.1f %10.1f %8.1f %11.1f %10.0f %6.1f %8.0f\n", vocab,
                  m.schema.c_str(), m.masks, trie_ms, m.uncached_ns / 1e3, m.cached_ns / 1e3,
                  m.warm_ns / 1e3, m.closing_ns / 1e3, m.accept_ns, 100 * m.hit_rate,
                  m.allowed_avg);
      std::fflush(stdout);
      m.trie_ms = trie_ms;
      results.push_back(m);
    }
  }
  if (!opt.json_path.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& m : results)
      j.push_back({{"vocab", m.vocab},
                   {"schema", m.schema},
                   {"grammar_nodes", m.grammar_nodes},
                   {"compile_ms", m.compile_ms},
                   {"trie_build_ms", m.trie_ms},
                   {"masks", m.masks},
                   {"mask_uncached_ns", m.uncached_ns},
                   {"mask_cached_ns", m.cached_ns},
                   {"mask_warm_ns", m.warm_ns},
                   {"mask_closing_ns", m.closing_ns},
                   {"accept_token_ns", m.accept_ns},
                   {"cache_hit_rate", m.hit_rate},
                   {"allowed_tokens_avg", m.allowed_avg}});
    std::ofstream(opt.json_path) << j.dump(2) << "\n";
    std::printf("wrote %s\n", opt.json_path.c_str());
  }
  return 0;
}
