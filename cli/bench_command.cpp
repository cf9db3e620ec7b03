// `tessera bench ...`: load generators and micro-benchmarks.
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "bench/engine_bench.hpp"
#include "bench/hash_bench.hpp"
#include "bench/kv_int8_bench.hpp"
#include "bench/kv_pool_bench.hpp"
#include "bench/serve_bench.hpp"
#include "bench/spec_bench.hpp"
#include "bench/tenant_bench.hpp"
#include "bench/trace_bench.hpp"
#include "bench/transport_bench.hpp"
#include "bench/transport_peer.hpp"
#include "bench/units_bench.hpp"
#include "cli/commands.hpp"
#include "cli/demo_model.hpp"
#include "cli/engine_options.hpp"
#include "common/error.hpp"

namespace tessera::cli {

namespace {

struct serve_bench_args {
  bench::serve_bench_options opts;
  std::string server_args;
  size_t engine_kv_cache_mb = 256;
  double timeout_s = 300;
  bool quick = false;
};

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in{s};
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

// This tessera binary, to start as a server.
std::string self_program() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : self.string();
}

void add_engine(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* eng = bench->add_subcommand("engine", "Prefill/decode throughput of one CPU engine, "
                                              "with the memory-bandwidth roofline (--engine sim: "
                                              "the modelled GPU's, without waiting)");
  auto o = std::make_shared<bench::engine_bench_options>();
  eng->add_option("--model", o->model, "Model folder")->required();
  eng->add_option("--json", o->json_path, "Write results as JSON to this file");
  eng->add_option("--svg", o->svg_path, "Write a chart of decode throughput as SVG to this file");
  eng->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  eng->add_option("--runs", o->runs, "Repetitions (median reported)")->capture_default_str()
    ->check(CLI::Range(1, 100));
  eng->add_option("--prefill-tokens", o->prefill_tokens, "Prompt length for prefill")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eng->add_option("--decode-tokens", o->decode_tokens, "Tokens generated per decode sequence")
    ->capture_default_str()->check(CLI::Range(2, 1 << 20));
  eng->add_option("--decode-prompt-tokens", o->decode_prompt_tokens,
                  "Prompt length of each decode sequence")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eng->add_option("--concurrency", o->concurrency, "Decode concurrencies")->capture_default_str()
    ->delimiter(',');
  add_engine_options(eng, o->engine);
  subs.emplace_back(eng, [o] { return bench::run_engine_bench(*o); });
}

void add_spec(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* s = bench->add_subcommand("spec", "Speculative decoding (ngram:K) against plain decoding on one "
                                          "engine: tok/s, speed-up and acceptance, repetitive and random text");
  auto o = std::make_shared<bench::spec_bench_options>();
  s->add_option("--model", o->model, "Model folder")->required();
  s->add_option("--json", o->json_path, "Write results as JSON to this file");
  s->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  s->add_option("--num-tokens", o->num_tokens, "Draft tokens per step (K)")->capture_default_str()
    ->check(CLI::Range(1, 16));
  s->add_option("--draft-model", o->draft_model,
                "Speculate with this draft model (draft:K; same tokenizer as --model) instead of ngram:K");
  s->add_option("--batches", o->batches, "Batch sizes")->capture_default_str()->delimiter(',')
    ->check(CLI::Range(1, 256));
  s->add_option("--prompt-tokens", o->prompt_tokens, "Random prefix (repetitive) or prompt (random) length")
    ->capture_default_str()->check(CLI::Range(1, 1 << 16));
  s->add_option("--generate-tokens", o->generate_tokens, "Greedy tokens per request")
    ->capture_default_str()->check(CLI::Range(2, 1 << 16));
  s->add_option("--runs", o->runs, "Interleaved repetitions (median reported)")->capture_default_str()
    ->check(CLI::Range(1, 100));
  s->add_option("--seed", o->seed, "Seeds the random prompts")->capture_default_str();
  add_engine_options(s, o->engine);
  subs.emplace_back(s, [o] { return bench::run_spec_bench(*o); });
}

void add_units(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* u = bench->add_subcommand("units", "Fit the model's units (cost = a * input + b * output + c, "
                                           "in ms of one worker) from measured engine time");
  auto o = std::make_shared<bench::units_bench_options>();
  u->add_option("--model-dir,--model", o->model, "Model folder")->required();
  u->add_option("--json", o->json_path, "Write the fit and the grid as JSON to this file");
  u->add_flag("--write", o->write, "Store the fit in the model folder's tessera_serving.json");
  u->add_option("--inputs", o->inputs, "Prompt lengths of the grid")->capture_default_str()
    ->delimiter(',')->check(CLI::Range(1, 1 << 20));
  u->add_option("--outputs", o->outputs, "Output lengths of the grid")->capture_default_str()
    ->delimiter(',')->check(CLI::Range(1, 1 << 20));
  u->add_option("--concurrency", o->concurrency, "Requests run together at each point")
    ->capture_default_str()->check(CLI::Range(1, 1024));
  u->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  add_engine_options(u, o->engine);
  subs.emplace_back(u, [o] { return bench::run_units_bench(*o); });
}

void add_kv_int8(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* k = bench->add_subcommand("kv-int8", "Logit error and bytes saved when the kv store keeps KV "
                                             "blocks as int8 (--kv-store-int8), against exact blocks");
  auto o = std::make_shared<bench::kv_int8_bench_options>();
  k->add_option("--model", o->model, "Model folder")->required();
  k->add_option("--json", o->json_path, "Write results as JSON to this file");
  k->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  k->add_option("--kv-dtypes", o->kv_dtypes, "KV dtypes of the engine, one run each")
    ->capture_default_str()->delimiter(',');
  k->add_option("--prompt-tokens", o->run.prompt_tokens, "First turn's tokens (their full blocks go through the store)")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  k->add_option("--turn-tokens", o->run.turn_tokens, "Next turn's new tokens")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  k->add_option("--generate-tokens", o->run.generate_tokens, "Greedy tokens generated after the turn")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  k->add_option("--seed", o->run.seed, "Seeds the prompt and turn")->capture_default_str();
  k->add_flag("--control", o->control, "Also run each dtype with exact blocks through the store (every difference 0)");
  // --pool: the engine's own pool as int8 (--kv-dtype int8) against bf16.
  auto pool = std::make_shared<bool>(false);
  auto p = std::make_shared<bench::kv_pool_bench_options>();
  k->add_flag("--pool", *pool, "Measure the engine's KV pool as int8 (--kv-dtype int8) against bf16 instead: "
                               "logprob error, bytes per token, sequences per pool, decode tok/s");
  k->add_option("--logprob-tokens", p->logprob_tokens, "--pool: teacher-forced tokens of the logprob comparison")
    ->capture_default_str()->check(CLI::Range(2, 1 << 20));
  k->add_option("--batches", p->batches, "--pool: sequences per decode measurement")
    ->capture_default_str()->delimiter(',')->check(CLI::Range(1, 4096));
  k->add_option("--decode-context", p->decode_context, "--pool: context of those sequences")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  k->add_option("--long-batch", p->long_batch, "--pool: sequences of the long-context measurement")
    ->capture_default_str()->check(CLI::Range(1, 4096));
  k->add_option("--long-context", p->long_context, "--pool: their context")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  k->add_option("--steps", p->steps, "--pool: timed decode steps per round")->capture_default_str()
    ->check(CLI::Range(1, 100000));
  k->add_option("--rounds", p->rounds, "--pool: rounds, alternating bf16 and int8 (the median counts)")
    ->capture_default_str()->check(CLI::Range(1, 1000));
  k->add_option("--pool-mib", p->pool_mib, "--pool: pool size of the capacity count, MiB")
    ->capture_default_str()->check(CLI::Range(1, 1 << 24));
  subs.emplace_back(k, [o, p, pool] {
    if (!*pool)
      return bench::run_kv_int8_bench(*o);
    p->model = o->model;
    p->json_path = o->json_path;
    p->threads = o->threads;
    p->seed = o->run.seed;
    return bench::run_kv_pool_bench(*p);
  });
}

void add_hash(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* h = bench->add_subcommand("hash", "Cost of the keyed KV block hash (SipHash-2-4-128) against XXH3-64, "
                                          "per block and as a share of a prefill step");
  auto o = std::make_shared<bench::hash_bench_options>();
  h->add_option("--model", o->model, "Model folder whose prefill step is timed (none: per-block costs only)");
  h->add_option("--prompt-tokens", o->prompt_tokens, "Tokens of the prefilled prompt")
    ->capture_default_str()->check(CLI::Range(16, 1 << 20));
  h->add_option("--steps", o->steps, "Prefill steps timed (median)")->capture_default_str()->check(CLI::Range(1, 1000));
  h->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  h->add_option("--json", o->json_path, "Write results as JSON to this file");
  subs.emplace_back(h, [o] { return bench::run_hash_bench(*o); });
}

int run_bench_serve(serve_bench_args& a) {
  auto& o = a.opts;
  o.server_args = split_words(a.server_args);
  o.engine_kv_cache_bytes = a.engine_kv_cache_mb << 20;
  o.io_timeout = std::chrono::milliseconds{static_cast<int64_t>(a.timeout_s * 1000)};
  if (o.spawn_server)
    o.server_program = self_program();
  if (o.engine_baseline && o.model_dir.empty()) {
    // The server's default model is the demo model; so is the baseline's.
    auto dir = ensure_demo_model();
    if (!dir) {
      std::fprintf(stderr, "bench serve: %s\n", error_text(dir.error()).c_str());
      return 1;
    }
    o.model_dir = dir->string();
    if (!o.spawn_server)
      std::fprintf(stderr, "bench serve: the engine baseline uses the demo model (%s); give "
                           "--model-dir if the server at %s serves another\n",
                   o.model_dir.c_str(), o.url.c_str());
  }
  return bench::run_serve_bench(o);
}

void add_serve(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* srv = bench->add_subcommand(
    "serve", "Closed-loop load on the HTTP API (streaming): TTFT, inter-token latency, "
             "requests/s and output tokens/s per concurrency, optionally beside the engine alone");
  auto a = std::make_shared<serve_bench_args>();
  auto& o = a->opts;
  srv->add_option("--url", o.url, "The server, http://host:port (or --spawn-server)");
  srv->add_option("--model", o.model_name, "The \"model\" of each request (default: the first "
                                           "/v1/models lists)");
  auto* conc = srv->add_option("--concurrency", o.concurrency, "Concurrent clients, one level each")
                 ->capture_default_str()->delimiter(',');
  auto* prompt = srv->add_option("--prompt-tokens", o.prompt_tokens, "Prompt tokens per request")
                   ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  auto* output = srv->add_option("--output-tokens", o.output_tokens,
                                 "Tokens generated per request (max_tokens, ignore_eos)")
                   ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  auto* requests = srv->add_option("--requests", o.requests,
                                   "Requests per level (0: 4 x concurrency, at least 8)")
                     ->capture_default_str()->check(CLI::Range(0, 1 << 24));
  srv->add_option("--duration", o.duration_s, "Seconds per level instead of a request count")
    ->check(CLI::Range(0.0, 86400.0));
  auto* warmup = srv->add_option("--warmup", o.warmup_requests, "Unmeasured requests before the first level")
                   ->capture_default_str()->check(CLI::Range(0, 1000));
  srv->add_option("--seed", o.seed, "Seeds the prompts")->capture_default_str();
  srv->add_option("--json", o.json_path, "Write results as JSON to this file");
  srv->add_option("--svg", o.svg_path, "Write a chart of output tokens/s per level as SVG to this file");
  srv->add_option("--timeout", a->timeout_s, "Seconds to wait for any step of a request")
    ->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  srv->add_flag("--spawn-server", o.spawn_server,
                "Start `tessera serve` (this binary) on a free port for the run, stop it after");
  srv->add_option("--server-args", a->server_args,
                  "Arguments of the spawned server, one string, e.g. \"--mode agg --decode 1\"");
  srv->add_option("--model-dir", o.model_dir, "Model folder: the spawned server's --model and the "
                                              "engine baseline's (default: the demo model)");
  srv->add_flag("--engine-baseline", o.engine_baseline,
                "Also run every level on the engine alone in this process (same requests)");
  srv->add_option("--engine-threads", o.engine_threads, "Threads of the baseline engine (0: all cores)")
    ->capture_default_str();
  srv->add_option("--engine-kv-cache-mb", a->engine_kv_cache_mb,
                  "KV pool of the baseline engine, MiB (match the server's --kv-cache-mb; 0: "
                  "the backend's default)")
    ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  // --engine / --sim-*: the baseline engine's backend (give the server the
  // same through --server-args).
  add_engine_options(srv, o.engine_backend);
  srv->add_option("--sdk", o.sdk_address,
                  "Also run every level over the native client SDK at this frontend node's cluster address "
                  "(host:port of a tessera node cluster; --url is its HTTP)");
  srv->add_option("--cluster-secret-file", o.sdk_secret_file, "With --sdk: the cluster secret file");
  srv->add_option("--api-key", o.api_key, "The tenant's API key, sent with every request (HTTP and, with --sdk, SDK)");
  srv->add_flag("--sdk-threads", o.sdk_threads,
                "With --sdk: one thread blocking in stream::next() per request in flight, instead of "
                "the SDK's chunk callbacks and one submitting thread");
  srv->add_option("--rounds", o.rounds, "With --sdk: runs of each level per transport, in ABBA order "
                                       "(HTTP, SDK, SDK, HTTP, ...); medians, min and max reported")
      ->capture_default_str()->check(CLI::Range(1, 100));
  srv->add_flag("--quick", a->quick, "A smoke run: concurrency 1,4, 16 prompt + 8 output tokens, "
                                     "4 requests per level, no warm-up (options given win)");
  subs.emplace_back(srv, [a, conc, prompt, output, requests, warmup] {
    if (a->quick) {
      if (conc->count() == 0)
        a->opts.concurrency = {1, 4};
      if (prompt->count() == 0)
        a->opts.prompt_tokens = 16;
      if (output->count() == 0)
        a->opts.output_tokens = 8;
      if (requests->count() == 0)
        a->opts.requests = 4;
      if (warmup->count() == 0)
        a->opts.warmup_requests = 0;
    }
    return run_bench_serve(*a);
  });
}

void add_tenants(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* t = bench->add_subcommand(
    "tenants", "Two tenants on one spawned server: B's TTFT alone and beside A flooding at "
               "4x capacity under its rate limit in model units (A's 429s, timeouts, lost requests)");
  struct args {
    bench::tenant_bench_options o;
    std::string server_args;
    double timeout_s = 120;
  };
  auto a = std::make_shared<args>();
  auto& o = a->o;
  t->add_option("--model-dir", o.model_dir, "Model folder of the spawned server (default: the demo model)");
  t->add_option("--server-args", a->server_args,
                "Arguments of the spawned server, one string, e.g. \"--engine sim --mode agg\"");
  t->add_option("--model", o.model_name, "The \"model\" of each request (default: the first /v1/models lists)");
  t->add_option("--prompt-tokens", o.prompt_tokens, "Prompt tokens per request")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  t->add_option("--output-tokens", o.output_tokens, "Tokens generated per request (max_tokens, ignore_eos)")
    ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  t->add_option("--calibrate-seconds", o.calibrate_s, "Seconds of the capacity run")
    ->capture_default_str()->check(CLI::Range(1.0, 3600.0));
  t->add_option("--calibrate-concurrency", o.calibrate_concurrency, "Closed-loop clients of the capacity run")
    ->capture_default_str()->check(CLI::Range(1, 1024));
  t->add_option("--phase-seconds", o.phase_s, "Seconds of each phase (B alone, B beside A)")
    ->capture_default_str()->check(CLI::Range(1.0, 3600.0));
  t->add_option("--flood", o.flood_factor, "A's offered load, x capacity")
    ->capture_default_str()->check(CLI::Range(0.0, 100.0));
  t->add_option("--b-share", o.b_share, "B's offered load, x capacity")
    ->capture_default_str()->check(CLI::Range(0.001, 10.0));
  t->add_option("--a-limit", o.a_limit_share, "A's units_per_minute, x the capacity in units per minute")
    ->capture_default_str()->check(CLI::Range(0.001, 100.0));
  t->add_option("--a-priority", o.a_priority, "A's priority in the key file")->capture_default_str();
  t->add_option("--b-priority", o.b_priority, "B's priority in the key file")->capture_default_str();
  t->add_option("--seed", o.seed, "Seeds the prompts, the arrivals and the keys")->capture_default_str();
  t->add_option("--json", o.json_path, "Write results as JSON to this file");
  t->add_option("--timeout", a->timeout_s, "Seconds to wait for any step of a request (then: a timeout)")
    ->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  subs.emplace_back(t, [a] {
    a->o.server_args = split_words(a->server_args);
    a->o.server_program = self_program();
    a->o.io_timeout = std::chrono::milliseconds{static_cast<int64_t>(a->timeout_s * 1000)};
    if (a->o.model_dir.empty()) {
      auto dir = ensure_demo_model();
      if (!dir) {
        std::fprintf(stderr, "bench tenants: %s\n", error_text(dir.error()).c_str());
        return 1;
      }
      a->o.model_dir = dir->string();
    }
    return bench::run_tenant_bench(a->o);
  });
}

void add_trace(CLI::App* bench, std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* tr = bench->add_subcommand(
    "trace", "Replay a Mooncake-format request trace (open loop, at its arrival times) against the HTTP "
             "API: prefix-cache hit rate against the trace's optimum, prefill tokens, TTFT, ITL, throughput");
  struct trace_args {
    bench::trace_bench_options opts;
    std::string server_args;
    std::string token_range = "8:263";
    double timeout_s = 300;
  };
  auto a = std::make_shared<trace_args>();
  auto& o = a->opts;
  tr->add_option("--trace", o.trace_path, "The trace, JSON lines: timestamp (ms), input_length, output_length, "
                                          "hash_ids");
  tr->add_option("--url", o.url, "The server, http://host:port (or --spawn-server)");
  tr->add_option("--metrics", o.metrics_urls,
                 "The cluster's other nodes' metrics endpoints, http://host:port[,...]: their "
                 "workers' series join the frontend's (host guard, busy, fetches, preemptions)")
    ->delimiter(',');
  tr->add_option("--speedup", o.speedup, "Replay this many times faster than the trace's arrival times")
    ->capture_default_str()->check(CLI::Range(1e-6, 1e9));
  tr->add_option("--minutes", o.minutes, "Only the requests of the trace's first M minutes (0: all)")
    ->check(CLI::Range(0.0, 1e9));
  tr->add_option("--json", o.json_path, "Write results (and per-window time series) as JSON to this file");
  tr->add_flag("--per-request", o.per_request_json, "Also write one record per request into the JSON");
  tr->add_flag("--allow-host-bound", o.allow_host_bound,
               "Report TTFT and ITL in the table even for a run the host-saturation guard flags host-bound");
  tr->add_option("--svg", o.svg_path, "Write charts of hit rate and TTFT over trace time as SVG to this file");
  tr->add_option("--label", o.label, "Name of this configuration in the table and JSON (default: the server "
                                     "arguments or the URL)");
  tr->add_option("--model", o.model_name, "The \"model\" of each request (default: the first /v1/models lists)");
  tr->add_option("--max-output", o.max_output, "Cap max_tokens (the trace's output_length) at N (0: no cap)")
    ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  tr->add_option("--max-input-tokens", o.max_input_tokens,
                 "Skip requests with more input tokens, e.g. the model's context (0: none skipped)")
    ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  tr->add_option("--max-requests", o.max_requests, "Only the first N requests (0: all)");
  tr->add_option("--block-tokens", o.block_tokens, "Tokens per hash id")->capture_default_str()
    ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  tr->add_option("--token-range", a->token_range, "Token ids LO:HI (inclusive) the blocks are drawn from; the "
                                                  "default, the demo tokenizer's byte tokens, suits any model with "
                                                  "at least 264 ids")
    ->capture_default_str();
  tr->add_option("--seed", o.seed, "Seeds the blocks' tokens (change it to replay against a server that "
                                   "cached an earlier replay)")->capture_default_str();
  tr->add_option("--window", o.window_s, "Seconds of trace time per window of the time series")
    ->capture_default_str()->check(CLI::Range(1e-3, 1e9));
  tr->add_option("--timeout", a->timeout_s, "Seconds to wait for any step of a request")
    ->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  tr->add_flag("--spawn-server", o.spawn_server,
               "Start `tessera serve` (this binary) on a free port for the run, stop it after");
  tr->add_option("--server-args", a->server_args,
                 "Arguments of the spawned server, one string, e.g. \"--mode agg --decode 1\"");
  tr->add_option("--model-dir", o.model_dir, "Model folder of the spawned server (default: the demo model)");
  tr->add_flag("--optimum-only", o.optimum_only,
               "Only compute the trace's unbounded-cache hit rate (of the selected requests); no server");
  tr->add_option("--compare", o.compare, "Print the results of earlier runs (their --json files) as one "
                                         "table; nothing is replayed");
  subs.emplace_back(tr, [a] {
    auto& o = a->opts;
    auto range = bench::parse_token_range(a->token_range);
    if (!range) {
      std::fprintf(stderr, "bench trace: %s\n", error_message(range.error()).c_str());
      return 2;
    }
    o.tokens = *range;
    o.server_args = split_words(a->server_args);
    o.io_timeout = std::chrono::milliseconds{static_cast<int64_t>(a->timeout_s * 1000)};
    if (o.spawn_server)
      o.server_program = self_program();
    return bench::run_trace_bench(o);
  });
}

void add_transport(CLI::App* bench,
                   std::vector<std::pair<CLI::App*, std::function<int()>>>& subs) {
  auto* tr = bench->add_subcommand("transport", "UCX transport between two processes on loopback "
                                                "(round trips, messages/s, KV block GB/s) beside "
                                                "ucx_perftest");
  auto t = std::make_shared<bench::transport_bench_options>();
  tr->add_option("--json", t->json_path, "Write results as JSON to this file");
  tr->add_option("--svg", t->svg_path, "Write a chart of block bandwidth as SVG to this file");
  tr->add_flag("--quick", t->quick, "Short smoke run (small iteration counts)");
  tr->add_flag("!--no-perftest", t->perftest, "Do not run ucx_perftest beside it");
  tr->add_option("--perftest-setup", t->perftest_setup,
                 "Which ucx_perftest references: plain (UCX_TLS alone: every interface, no "
                 "error handling), node (a node's own set-up: over tcp -e, the configured "
                 "interface, the node's segment sizes; shm: sm,self), or both, node right "
                 "after plain (default)")
    ->transform(CLI::CheckedTransformer(std::map<std::string, bench::perftest_setups>{
      {"both", bench::perftest_setups::both},
      {"plain", bench::perftest_setups::plain},
      {"node", bench::perftest_setups::node}}));
  tr->add_option("--block-bytes", t->block_bytes, "KV block size inside a batch")
    ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{16} << 20));
  tr->add_option("--window", t->window, "KV batches in flight")->capture_default_str()
    ->check(CLI::Range(1, 64));
  tr->add_option("--rounds", t->rounds, "Passes over every transport; medians reported "
                                        "(0: 3, or 1 with --quick)")
    ->capture_default_str()->check(CLI::Range(0, 100));
  tr->add_option("--wait-idle", t->wait_idle_pct, "Before each round, wait until the CPUs were "
                                                  "this % idle (0: don't wait)")
    ->capture_default_str()->check(CLI::Range(0, 100));
  tr->add_option("--progress-spin-us", t->progress_spin_us,
                 "How long each progress thread polls before it sleeps, us (-1: the "
                 "transport's default)")
    ->capture_default_str()->check(CLI::Range(-1, 1000000));
  tr->add_option("--transports", t->transports, "Only these selections: tcp, shm, shm_err_peer")
    ->delimiter(',');
  tr->add_option("--until", t->peer_acks,
                 "Time each KV batch until transfer()'s done, the transport's word that every "
                 "block landed (done), or until a message the peer sends when it sees them "
                 "(peer-ack: one more message per batch)")
    ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"done", false},
                                                                    {"peer-ack", true}}))
    ->capture_default_str();
  tr->add_flag("--scatter", t->scatter_blocks,
               "Place a batch's blocks in the peer's pool in reverse order (no two contiguous)");
  tr->add_option("--region-memory", t->allocated_regions,
                 "Where the KV regions of both processes live: allocated (by the transport; "
                 "UCX shared-memory segments, as ucx_perftest's) or registered (heap memory)")
    ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"allocated", true},
                                                                    {"registered", false}}))
    ->capture_default_str();
  tr->add_flag("--grants", t->grants,
               "Both processes with a cluster secret and memory by grant only (no rkeys; every "
               "block by rendezvous into a granted range), as tessera node runs with a secret");
  tr->add_option("--kv-path", t->kv_paths,
                 "KV batch paths to measure each selection with, one after the other: auto, "
                 "put, am_rndv (e.g. put,am_rndv)")
    ->delimiter(',')->capture_default_str();
  // The peer process the benchmark starts (this binary again); not for users.
  auto p = std::make_shared<bench::transport_peer_options>();
  auto peer = std::make_shared<bool>(false);
  tr->add_flag("--peer", *peer)->group("");
  tr->add_option("--peer-tls", p->tls)->group("");
  tr->add_option("--peer-error-handling", p->peer_error_handling)->group("");
  tr->add_option("--peer-pool-bytes", p->pool_bytes)->group("");
  tr->add_option("--peer-allocated", p->allocated)->group("");
  tr->add_option("--peer-grants", p->grants)->group("");
  tr->add_option("--peer-progress-spin-us", p->progress_spin_us)->group("");
  tr->add_option("--peer-ack-blocks", p->ack_blocks)->group("");

  subs.emplace_back(tr, [t, p, peer] {
    if (*peer)
      return bench::run_transport_peer(*p);
    return bench::run_transport_bench(*t);
  });
}

} // namespace

command add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: engine, kv-int8, serve, tenants, trace, transport");
  bench->require_subcommand(1);
  auto subs = std::make_shared<std::vector<std::pair<CLI::App*, std::function<int()>>>>();
  add_engine(bench, *subs);
  add_kv_int8(bench, *subs);
  add_hash(bench, *subs);
  add_serve(bench, *subs);
  add_spec(bench, *subs);
  add_tenants(bench, *subs);
  add_trace(bench, *subs);
  add_transport(bench, *subs);
  add_units(bench, *subs);
  return {bench, [subs] {
            for (auto& [sub, run] : *subs)
              if (sub->parsed())
                return run();
            return 1;
          }};
}

} // namespace tessera::cli
