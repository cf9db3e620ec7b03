// `tessera generate`: offline generation with one engine, no cluster.
#include <chrono>
#include <limits>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/demo_model.hpp"
#include "cli/engine_options.hpp"
#include "common/error.hpp"
#include "engine/draft_model.hpp"
#include "engine/engine.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/kv_int8.hpp"
#include "engine/speculative.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::cli {

namespace {

struct generate_args {
  std::string model;
  std::string prompt = "Once upon a time";
  int32_t max_tokens = 64;
  float temperature = 0.8f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  std::optional<uint64_t> seed;
  int threads = 0;
  bool json = false;
  bool ignore_eos = false;
  std::string speculative = "none";
  std::string draft_model;
  std::string kv_dtype = "bf16";
  engine::backend_choice engine;
};

int fail(const caf::error& err) {
  std::fprintf(stderr, "tessera: %s\n", error_text(err).c_str());
  return 1;
}

int run_generate(const generate_args& a) {
  auto spec = engine::parse_speculative(a.speculative);
  if (!spec)
    return fail(spec.error());
  std::filesystem::path dir = a.model;
  const bool demo = a.model.empty();
  if (demo) {
    auto d = ensure_demo_model();
    if (!d)
      return fail(d.error());
    dir = *d;
  }
  auto files = engine::load_model_files(dir, a.engine.kind);
  if (!files)
    return fail(files.error());
  std::shared_ptr<const engine::tokenizer> tokenizer = files->tokenizer;
  engine::backend_options bopts;
  bopts.choice = a.engine;
  bopts.threads = a.threads;
  // cpu: enough KV for this one request, not the serving default; sim: what
  // the modelled GPU leaves for KV (its host pool is touched only where used).
  bopts.kv_cache_bytes = a.engine.kind == engine::backend_kind::cpu ? size_t{64} << 20 : 0;
  bopts.kv_dtype = *engine::parse_kv_dtype(a.kv_dtype); // checked by the option
  auto be = engine::make_backend(*files, bopts);
  if (!be)
    return fail(be.error());
  if (!a.json)
    std::fprintf(stderr, "tessera: %s%s, %.1fM parameters, %s\n", dir.c_str(),
                 demo ? " (built-in demo model: RANDOM WEIGHTS, the text is gibberish)" : "",
                 static_cast<double>(files->config.parameter_count()) / 1e6,
                 (*be)->description().c_str());
  engine::engine_config ec;
  ec.speculative = *spec;
  engine::engine eng{std::move(*be), ec, tokenizer};
  if (!a.draft_model.empty()) {
    // The same backend kind and KV settings as the target's.
    auto dfiles = engine::load_model_files(a.draft_model, a.engine.kind);
    if (!dfiles)
      return fail(dfiles.error());
    if (auto err = engine::check_draft_tokenizer(*tokenizer, *dfiles->tokenizer))
      return fail(err);
    auto dbe = engine::make_backend(*dfiles, bopts);
    if (!dbe)
      return fail(dbe.error());
    if (auto err = eng.attach_draft_model(std::move(*dbe)))
      return fail(err);
    if (!a.json)
      std::fprintf(stderr, "tessera: draft model %s, %.1fM parameters\n", a.draft_model.c_str(),
                   static_cast<double>(dfiles->config.parameter_count()) / 1e6);
  }

  engine::request r;
  r.id = 1;
  r.prompt = tokenizer->encode(a.prompt, tokenizer->settings().add_bos);
  r.params.max_tokens = a.max_tokens;
  r.params.temperature = a.temperature;
  r.params.top_p = a.top_p;
  r.params.top_k = a.top_k;
  r.params.seed = a.seed;
  r.params.ignore_eos = a.ignore_eos;
  r.params.logprobs = 0;
  if (auto err = eng.add_request(r))
    return fail(err);

  const auto t0 = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> t_first;
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::string text;
  engine::finish_reason why = engine::finish_reason::none;
  while (eng.has_unfinished()) {
    for (const auto& o : eng.step()) {
      if (!t_first)
        t_first = std::chrono::steady_clock::now();
      ids.insert(ids.end(), o.tokens.begin(), o.tokens.end());
      for (const auto& lp : o.logprobs)
        logprobs.push_back(lp.logprob);
      text += o.text;
      if (!a.json && !o.text.empty()) {
        std::fwrite(o.text.data(), 1, o.text.size(), stdout);
        std::fflush(stdout);
      }
      if (o.finish != engine::finish_reason::none)
        why = o.finish;
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (a.json) {
    nlohmann::json j;
    j["prompt_token_ids"] = r.prompt;
    j["token_ids"] = ids;
    j["logprobs"] = logprobs;
    j["text"] = text;
    j["finish_reason"] = std::string{engine::to_string(why)};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    std::fflush(stdout);
    const double ttft = std::chrono::duration<double>(*t_first - t0).count();
    const double total = std::chrono::duration<double>(t1 - t0).count();
    std::fprintf(stderr, "tessera: %zu prompt tokens, %zu generated (%s); first token %.0f ms, %.1f tokens/s after\n",
                 r.prompt.size(), ids.size(), std::string{engine::to_string(why)}.c_str(),
                 ttft * 1e3, ids.size() > 1 ? static_cast<double>(ids.size() - 1) / (total - ttft) : 0.0);
    if (const auto st = eng.stats(); st.draft_tokens > 0)
      std::fprintf(stderr, "tessera: speculative %s: %llu of %llu draft tokens accepted (%.1f%%)\n",
                   a.speculative.c_str(), static_cast<unsigned long long>(st.accepted_draft_tokens),
                   static_cast<unsigned long long>(st.draft_tokens),
                   100.0 * static_cast<double>(st.accepted_draft_tokens) / static_cast<double>(st.draft_tokens));
  }
  return 0;
}

} // namespace

command add_generate_command(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "Generate text with one engine (no cluster)");
  auto a = std::make_shared<generate_args>();
  sub->add_option("--model", a->model, "Hugging Face model folder (default: the built-in demo model)");
  sub->add_option("--prompt", a->prompt, "Prompt text")->capture_default_str();
  sub->add_option("--max-tokens", a->max_tokens, "Tokens to generate")->capture_default_str()
    ->check(CLI::Range(1, 1 << 20));
  // The same ranges as the HTTP API's (actors/frontend/openai_request.cpp).
  sub->add_option("--temperature", a->temperature, "0 for greedy; at most 2, as the API")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 2.0));
  sub->add_option("--top-p", a->top_p, "Nucleus sampling, in (0, 1]")
    ->capture_default_str()
    ->check(CLI::Validator(
      [](const std::string& v) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(v, x) || !(x > 0.0 && x <= 1.0))
          return "must be in (0, 1], got " + v;
        return {};
      },
      "in (0, 1]"));
  sub->add_option("--top-k", a->top_k, "Top-k sampling (0 or -1: off)")
    ->capture_default_str()
    ->check(CLI::Range(-1, std::numeric_limits<int32_t>::max()));
  sub->add_option("--seed", a->seed, "Sampling seed");
  sub->add_option("--threads", a->threads, "CPU threads (0: all cores)")->capture_default_str()
    ->check(CLI::Range(0, 1024));
  sub->add_flag("--ignore-eos", a->ignore_eos, "Keep generating through end-of-sequence");
  sub->add_option("--kv-dtype", a->kv_dtype,
                  "KV pool element type: bf16, or int8 (per-token scales, about half the bytes)")
    ->capture_default_str()
    ->check(CLI::IsMember({"bf16", "int8", "f32", "f16"}));
  sub->add_option("--speculative", a->speculative,
                  "Speculative decoding: ngram:K (prompt lookup, K draft tokens per step, 1..16), "
                  "draft:K (a draft model, --draft-model) or none; greedy output is the same as without "
                  "it, sampled output has the same distribution")
    ->capture_default_str();
  sub->add_option("--draft-model", a->draft_model,
                  "Draft model folder for --speculative draft:K: a smaller model with the same tokenizer");
  add_engine_options(sub, a->engine);
  sub->add_flag("--json", a->json,
                "Print one JSON object (prompt_token_ids, token_ids, logprobs, text) instead of streaming");
  return {sub, [a] { return run_generate(*a); }};
}

} // namespace tessera::cli
