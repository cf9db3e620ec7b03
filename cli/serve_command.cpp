// `tessera serve`: the whole cluster in one process behind the
// OpenAI-compatible HTTP API.
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/node/actor_system_tuning.hpp"
#include "actors/node/serve_node.hpp"
#include "cli/commands.hpp"
#include "cli/demo_model.hpp"
#include "cli/engine_options.hpp"
#include "cli/preflight_checks.hpp"
#include "common/error.hpp"
#include "engine/kv_int8.hpp"
#include "engine/sim/sim_gpu.hpp"
#include "engine/speculative.hpp"

namespace tessera::cli {

namespace {

struct serve_args {
  actors::serve_options opts;
  std::string model;
  size_t kv_cache_mb = 0;
  size_t kv_store_host_mb = 1024;
  std::string kv_store_disk_dir;
  std::string speculative = "none";
  size_t kv_store_disk_mb = 16384;
  bool kv_store_int8 = false;
  std::string kv_dtype = "bf16";
  uint64_t kv_store_offer_mb = 64;
  int scheduler_threads = 0;
  double drain_timeout_s = 10.0;
  int64_t kv_admission_wait_ms = actors::kv_admission_options{}.max_wait.count();
  int64_t late_grace_ms = 3000;
};

int run_serve(serve_args& a) {
  // SIGINT / SIGTERM end the server and SIGHUP reloads the API key file,
  // through sigwait below; block them before any thread starts so every
  // thread inherits the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  if (!a.opts.sim_worker_gpus.empty() && a.opts.engine.kind != engine::backend_kind::sim) {
    std::fputs("tessera serve: --sim-worker-gpus needs --engine sim\n", stderr);
    return 2;
  }
  // Preflight: every problem that would stop the server, before the model
  // loads, all at once (exit 2).
  serve_preflight_input check;
  check.model = a.model;
  check.kind = a.opts.engine.kind;
  check.host = a.opts.host;
  check.port = a.opts.port;
  check.kv_store_host_mb = a.kv_store_host_mb;
  check.kv_store_disk_dir = a.kv_store_disk_dir;
  check.kv_store_disk_mb = a.kv_store_disk_mb;
  const auto report = serve_preflight(check);
  if (auto text = report.problems_text("tessera serve"); !text.empty())
    std::fputs(text.c_str(), stderr);
  if (report.failures() > 0)
    return 2;

  const bool demo = a.model.empty();
  if (demo) {
    auto dir = ensure_demo_model();
    if (!dir) {
      std::fprintf(stderr, "tessera serve: %s\n", error_text(dir.error()).c_str());
      return 1;
    }
    a.opts.model_dir = *dir;
    if (a.opts.model_name.empty())
      a.opts.model_name = "tessera-demo";
  } else {
    a.opts.model_dir = a.model;
  }
  a.opts.kv_cache_bytes = a.kv_cache_mb << 20;
  a.opts.router.kv_admission.max_wait = std::chrono::milliseconds{a.kv_admission_wait_ms};
  a.opts.late_grace = std::chrono::milliseconds{a.late_grace_ms};
  a.opts.kv_dtype = *engine::parse_kv_dtype(a.kv_dtype); // checked by the option
  a.opts.kv_store_host_bytes = a.kv_store_host_mb << 20;
  a.opts.kv_store_disk_dir = a.kv_store_disk_dir;
  a.opts.kv_store_disk_bytes = a.kv_store_disk_mb << 20;
  a.opts.kv_store_int8 = a.kv_store_int8;
  a.opts.kv_offer_max_bytes = a.kv_store_offer_mb << 20;
  if (auto spec = engine::parse_speculative(a.speculative)) {
    a.opts.speculative = *spec;
    if (spec->method == engine::speculative_params::method_kind::draft && a.opts.draft_model_dir.empty()) {
      std::fprintf(stderr, "tessera serve: --speculative %s needs a draft model (--draft-model DIR)\n",
                   a.speculative.c_str());
      return 2;
    }
  } else {
    std::fprintf(stderr, "tessera serve: %s\n", error_text(spec.error()).c_str());
    return 2;
  }
  a.opts.progress = [](const std::string& line) { std::fprintf(stderr, "tessera serve: %s\n", line.c_str()); };

  caf::actor_system_config cfg;
  actors::tune_actor_system(cfg, a.scheduler_threads);
  caf::actor_system sys{cfg};
  auto node = actors::serve_node::start(sys, a.opts);
  if (!node) {
    std::fprintf(stderr, "tessera serve: %s\n", error_text(node.error()).c_str());
    return 1;
  }
  const auto url = (*node)->url();
  std::printf("tessera serve: model '%s'%s\n", (*node)->model_name().c_str(),
              demo ? " (built-in demo model: RANDOM WEIGHTS, the text is gibberish)" : "");
  std::printf("tessera serve: %s\n", (*node)->description().c_str());
  std::printf("tessera serve: listening on %s (Ctrl-C stops)\n", url.c_str());
  std::printf("  curl %s/v1/completions -H 'Content-Type: application/json' \\\n"
              "    -d '{\"model\": \"%s\", \"prompt\": \"Once upon a time\", \"max_tokens\": 32}'\n",
              url.c_str(), (*node)->model_name().c_str());
  std::fflush(stdout);
  int sig = 0;
  while (sigwait(&stop, &sig) == 0 && sig == SIGHUP) {
    // A bad file keeps the keys in use; streams run on either way.
    if (auto err = (*node)->reload_api_keys())
      spdlog::error("tessera serve: SIGHUP: {} (the API keys in use stay)", error_text(err));
  }
  // Graceful stop: no new requests, the ones in flight may finish for up
  // to --drain-timeout, then the actors, the store's spill queue and
  // RocksDB are closed in order.
  std::printf("tessera serve: stopping (draining requests in flight for up to %.1f s)\n",
              a.drain_timeout_s);
  std::fflush(stdout);
  (*node)->drain(std::chrono::milliseconds{static_cast<int64_t>(a.drain_timeout_s * 1000)});
  node->reset();
  std::printf("tessera serve: stopped\n");
  std::fflush(stdout);
  return 0;
}

} // namespace

command add_serve_command(CLI::App& app) {
  auto* sub = app.add_subcommand("serve", "Serve a model behind the OpenAI-compatible HTTP API "
                                          "(the whole cluster in one process)");
  auto a = std::make_shared<serve_args>();
  auto& o = a->opts;
  sub->add_option("--model", a->model, "Hugging Face model folder (default: the built-in demo model)");
  sub->add_option("--served-model-name", o.model_name, "Name clients use as \"model\" "
                                                       "(default: the folder's name)");
  sub->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", o.port, "Port to listen on (0: any free port)")->capture_default_str();
  sub->add_option("--mode", o.mode, "disagg (prefill and decode workers) or agg")
    ->capture_default_str()->check(CLI::IsMember({"disagg", "agg"}));
  sub->add_option("--prefill", o.prefill_workers, "Prefill workers (disagg)")->capture_default_str()
    ->check(CLI::Range(1, 64));
  sub->add_option("--decode", o.decode_workers, "Decode workers (agg: workers)")->capture_default_str()
    ->check(CLI::Range(1, 64));
  sub->add_option("--router-policy", o.router.policy, "kv, round-robin, random or least-loaded")
    ->capture_default_str()->check(CLI::IsMember({"kv", "round-robin", "random", "least-loaded"}));
  sub->add_option("--max-local-prefill", o.router.options.max_local_prefill_tokens,
                  "Uncached prompt tokens a decode worker prefills itself (conditional disaggregation)")
    ->capture_default_str()
    ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--router-load", o.router.options.load,
                  "The router's load term: units (outstanding model units, tessera bench units) or "
                  "blocks (KV blocks, the older measure)")
    ->capture_default_str()
    ->transform(CLI::CheckedTransformer(std::map<std::string, actors::load_measure>{
      {"units", actors::load_measure::units}, {"blocks", actors::load_measure::blocks}}));
  sub->add_option("--router-sticky-break", o.router.options.sticky_break_factor,
                  "A session leaves its sticky worker when that worker's load exceeds this factor "
                  "times the least-loaded worker's with the request (0: never)")
    ->capture_default_str()
    ->check(CLI::Range(1.0, 1e6) | CLI::IsMember({0.0}));
  sub->add_option("--kv-admission", o.router.kv_admission.enabled,
                  "Hold a request at the router while no decode worker's KV pool has room for it "
                  "(its prompt and next 256 output tokens beside what is committed there), instead of "
                  "over-committing a pool that then preempts")
    ->capture_default_str();
  sub->add_option("--kv-admission-wait-ms", a->kv_admission_wait_ms,
                  "Most time a request waits for KV room; then it is routed anyway")
    ->capture_default_str()
    ->check(CLI::Range(0, 20000));
  sub->add_option("--panic-routing", o.router.options.panic_routing,
                  "While no decode worker is healthy but some are only late (a saturated host), route "
                  "among those instead of answering 503")
    ->capture_default_str();
  sub->add_option("--router-index-max-entries", o.router.index.max_entries,
                  "Most (block, worker or kv store) entries the router's prefix index keeps; past it the "
                  "oldest are forgotten and their blocks no longer credited (0: unbounded, about 96 bytes "
                  "an entry)")
    ->capture_default_str()
    ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 32));
  sub->add_option("--late-grace-ms", a->late_grace_ms,
                  "A worker that is only late keeps its streams while its last heartbeat is younger than "
                  "this")
    ->capture_default_str()
    ->check(CLI::Range(0, 600000));
  sub->add_option("--slo-ttft-ms", o.router.autoscale.slo_ttft_ms,
                  "TTFT SLO (p90, ms) of the autoscaling signal (tessera_autoscale_recommended_workers; "
                  "0: none)")
    ->capture_default_str()->check(CLI::Range(0.0, 1e7));
  sub->add_option("--slo-itl-ms", o.router.autoscale.slo_itl_ms,
                  "Inter-token latency SLO (p90, ms) of the autoscaling signal (0: none)")
    ->capture_default_str()->check(CLI::Range(0.0, 1e7));
  sub->add_option("--autoscale-worker-units", o.router.autoscale.worker_units_per_second,
                  "Model units one worker serves per second when always busy (0: fitted units are ms, "
                  "so 1000, or 1000 / --sim-time-scale on the sim)")
    ->capture_default_str()->check(CLI::Range(0.0, 1e12));
  sub->add_option("--chat-template", o.chat_template,
                  "Chat template: llama3, chatml, mistral, llama2, or a file");
  sub->add_option("--threads", o.threads_per_worker, "Compute threads per worker (0: cores shared out)")
    ->capture_default_str()
    ->check(CLI::Range(0, 1024));
  sub->add_option("--kv-cache-mb", a->kv_cache_mb,
                  "KV pool per worker, MiB; with --engine sim the modelled GPU's KV capacity "
                  "(0: the backend's default: cpu 256 MiB, sim what the GPU's memory leaves "
                  "after the weights)")
    ->capture_default_str()
    ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--kv-dtype", a->kv_dtype,
                  "KV pool element type: bf16, or int8 (per-token f16 scales in each block, about "
                  "half the bytes per token; blocks move to peers and the kv store as they are)")
    ->capture_default_str()
    ->check(CLI::IsMember({"bf16", "int8", "f32", "f16"}));
  sub->add_option("--kv-store-host-mb", a->kv_store_host_mb,
                  "Kv store host-memory tier for cross-turn KV reuse, MiB (0: no kv store)")
    ->capture_default_str()->check(CLI::Range(0, 1 << 30));
  sub->add_option("--kv-store-disk-dir", a->kv_store_disk_dir,
                  "Kv store disk tier (RocksDB) directory; blocks evicted from host memory spill there");
  sub->add_option("--kv-store-disk-mb", a->kv_store_disk_mb, "Kv store disk tier capacity, MiB")
    ->capture_default_str()->check(CLI::Range(1, 1 << 30));
  sub->add_flag("--kv-store-int8", a->kv_store_int8,
                "Keep kv store blocks as int8 with per-head scales in both tiers (about 2x the "
                "blocks per byte for bf16 KV; workers still get their KV dtype back)");
  sub->add_option("--kv-store-offer-mb", a->kv_store_offer_mb,
                  "Most MiB of finished sequences' KV blocks each worker has on their way to the kv "
                  "store; more is dropped and counted in tessera_kvstore_offer_dropped_blocks_total "
                  "(0: offer nothing)")
    ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  // The wire carries prompts of at most 1M tokens (wire_limits::max_tokens).
  sub->add_option("--max-model-len", o.max_model_len, "Longest prompt + output (0: the model's; at most 1048576)")
    ->capture_default_str()
    ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--speculative", a->speculative,
                  "Speculative decoding for requests that do not ask (their \"speculative\" field): "
                  "ngram:K (prompt lookup, K draft tokens per step, 1..16), draft:K (a draft model, "
                  "--draft-model) or none; greedy output is the same as without it, sampled output has "
                  "the same distribution")
    ->capture_default_str();
  sub->add_option("--draft-model", o.draft_model_dir,
                  "Draft model folder for speculative method draft (--speculative draft:K or a request's "
                  "\"speculative\": {\"method\": \"draft\"}): a smaller model with the same tokenizer");
  sub->add_option("--http-threads", o.http_threads, "HTTP I/O threads")->capture_default_str()
    ->check(CLI::Range(1, 64));
  sub->add_option("--admin-key-file", o.admin_key_file,
                  "A file holding the admin key (chmod 600, at least 16 bytes): POST /admin/drain "
                  "{\"node\": ...} and every /admin/* endpoint then need Authorization: Bearer <key>");
  sub->add_option("--api-keys", o.api_keys_file,
                  "The API key file (TOML [[key]] tables: key or key_sha256, tenant, units_per_minute, "
                  "max_concurrent, priority, share_cache_with): every /v1/* request then needs "
                  "Authorization: Bearer <key>; SIGHUP reloads it");
  sub->add_flag("--protect-metrics", o.protect_metrics, "With --api-keys: GET /metrics needs a key too");
  sub->add_flag("--fault-injection", o.fault_injection,
               "Chaos drills: POST /admin/fault {\"worker\": \"decode-0\", \"fault\": \"crash\"} "
               "crashes that worker (the supervisor restarts it); needs --admin-key-file");
  sub->add_option("--actor-threads", a->scheduler_threads, "Actor scheduler threads (0: 2)")
    ->capture_default_str()
    ->check(CLI::Range(0, 256));
  sub->add_option("--drain-timeout", a->drain_timeout_s,
                  "On SIGTERM/SIGINT: seconds the requests in flight may still finish (new ones "
                  "get 503); those left then end with an error")
    ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  add_engine_options(sub, o.engine);
  sub->add_option("--sim-worker-gpus", o.sim_worker_gpus,
                  "sim: the GPU each worker models, in turn within its role (h100,a100: the 1st, 3rd, "
                  "... prefill and decode workers an H100, the others an A100); each prices its work in "
                  "its device's fitted units (default: --sim-gpu for all)")
    ->delimiter(',')
    ->check(CLI::IsMember(engine::sim::gpu_names()))
    ->group("Engine");
  return {sub, [a] { return run_serve(*a); }};
}

} // namespace tessera::cli
