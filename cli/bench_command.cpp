// `tessera bench ...`: load generators and micro-benchmarks.
#include "bench/engine_bench.hpp"
#include "bench/transport_bench.hpp"
#include "bench/transport_peer.hpp"
#include "cli/commands.hpp"

namespace tessera::cli {

command add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: engine, transport");
  bench->require_subcommand(1);
  auto* eng = bench->add_subcommand("engine", "Prefill/decode throughput of one CPU engine, "
                                              "with the memory-bandwidth roofline");
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
  eng->add_option("--concurrency", o->concurrency, "Decode concurrencies")->capture_default_str();

  auto* tr = bench->add_subcommand("transport", "UCX transport between two processes on loopback "
                                                "(round trips, messages/s, KV block GB/s) beside "
                                                "ucx_perftest");
  auto t = std::make_shared<bench::transport_bench_options>();
  tr->add_option("--json", t->json_path, "Write results as JSON to this file");
  tr->add_option("--svg", t->svg_path, "Write a chart of block bandwidth as SVG to this file");
  tr->add_flag("--quick", t->quick, "Short smoke run (small iteration counts)");
  tr->add_flag("!--no-perftest", t->perftest, "Do not run ucx_perftest beside it");
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
  tr->add_option("--transports", t->transports, "Only these selections: tcp, shm, shm_err_peer")
    ->delimiter(',');
  // The peer process the benchmark starts (this binary again); not for users.
  auto p = std::make_shared<bench::transport_peer_options>();
  auto peer = std::make_shared<bool>(false);
  tr->add_flag("--peer", *peer)->group("");
  tr->add_option("--peer-tls", p->tls)->group("");
  tr->add_option("--peer-error-handling", p->peer_error_handling)->group("");
  tr->add_option("--peer-pool-bytes", p->pool_bytes)->group("");

  return {bench, [o, eng, t, p, peer] {
            if (eng->parsed())
              return bench::run_engine_bench(*o);
            if (*peer)
              return bench::run_transport_peer(*p);
            return bench::run_transport_bench(*t);
          }};
}

} // namespace tessera::cli
