// `tessera bench ...`: load generators and micro-benchmarks.
#include "bench/engine_bench.hpp"
#include "cli/commands.hpp"

namespace tessera::cli {

command add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: engine");
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
  return {bench, [o] { return bench::run_engine_bench(*o); }};
}

} // namespace tessera::cli
