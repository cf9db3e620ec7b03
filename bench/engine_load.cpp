#include "bench/engine_load.hpp"

#include <chrono>
#include <cstdio>
#include <unordered_map>

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "engine/factory/backend_factory.hpp"
#include "engine/tokenizer.hpp"

namespace tessera::bench {

namespace {
using clock_type = std::chrono::steady_clock;
} // namespace

caf::expected<std::unique_ptr<engine_load>> engine_load::open(const engine_load_options& opts) {
  auto files = engine::load_model_files(opts.model, opts.engine.kind);
  if (!files)
    return files.error();
  engine::backend_options bo;
  bo.choice = opts.engine;
  bo.threads = opts.threads;
  bo.kv_cache_bytes = opts.kv_cache_bytes;
  auto be = engine::make_backend(*files, bo);
  if (!be)
    return be.error();
  std::unique_ptr<engine_load> out{new engine_load};
  out->description_ = (*be)->description();
  // The default engine_config, as serve_node gives its workers: the same
  // batching limits and prefix caching (the prompts never share a block).
  out->engine_ = std::make_unique<engine::engine>(std::move(*be), engine::engine_config{},
                                                  files->tokenizer);
  return out;
}

engine_load::~engine_load() = default;

std::vector<request_sample> engine_load::run(const load_level& level, const progress_fn& progress) {
  auto& eng = *engine_;
  std::vector<request_sample> samples;
  std::unordered_map<uint64_t, size_t> by_id; // engine id -> index into samples
  const auto t0 = clock_type::now();
  auto since = [t0](clock_type::time_point t) { return std::chrono::duration<double>(t - t0).count(); };
  const auto deadline = t0 + std::chrono::duration_cast<clock_type::duration>(
                               std::chrono::duration<double>(level.duration_s));
  int in_flight = 0;
  size_t refused = 0;
  auto more = [&] {
    return level.duration_s > 0 ? clock_type::now() < deadline
                                : static_cast<int>(samples.size()) < level.requests;
  };
  auto fill = [&] {
    while (in_flight < level.concurrency && more()) {
      engine::request r;
      r.id = next_id_++;
      r.prompt = load_prompt(level.seed, level.first_index + samples.size(), level.prompt_tokens);
      r.params.temperature = 0;
      r.params.max_tokens = level.output_tokens;
      r.params.ignore_eos = true;
      request_sample s;
      s.start_s = since(clock_type::now());
      if (auto err = eng.add_request(std::move(r))) {
        s.end_s = s.start_s;
        s.error = error_text(err);
        samples.push_back(std::move(s));
        if (++refused >= 8 && refused == samples.size())
          return; // every request refused: give up rather than spin
        continue;
      }
      by_id[next_id_ - 1] = samples.size();
      samples.push_back(std::move(s));
      ++in_flight;
    }
  };
  fill();
  auto last_progress = clock_type::now();
  size_t done = 0;
  int64_t tokens = 0;
  while (eng.has_unfinished()) {
    auto outputs = eng.step();
    const auto now = clock_type::now();
    const double t = since(now);
    for (const auto& o : outputs) {
      auto it = by_id.find(o.id);
      if (it == by_id.end())
        continue;
      auto& s = samples[it->second];
      if (!o.tokens.empty()) {
        s.add_text_chunk(t);
        s.output_tokens += static_cast<int64_t>(o.tokens.size());
        tokens += static_cast<int64_t>(o.tokens.size());
      }
      if (o.finish != engine::finish_reason::none) {
        s.end_s = t;
        if (o.finish == engine::finish_reason::abort)
          s.error = "aborted by the engine";
        else if (s.output_tokens != level.output_tokens)
          s.error = "generated " + std::to_string(s.output_tokens) + " tokens, expected " +
                    std::to_string(level.output_tokens);
        by_id.erase(it);
        --in_flight;
        ++done;
      }
    }
    fill();
    if (progress && now - last_progress >= std::chrono::seconds{2}) {
      last_progress = now;
      char line[160];
      std::snprintf(line, sizeof line, "engine alone, concurrency %d: %zu requests done, %.0f output tok/s",
                    level.concurrency, done, static_cast<double>(tokens) / t);
      progress(line);
    }
  }
  return samples;
}

} // namespace tessera::bench
