#include "cli/engine_options.hpp"

#include "engine/sim/sim_gpu.hpp"

namespace tessera::cli {

void add_engine_options(CLI::App* sub, engine::backend_choice& choice) {
  const std::string group = "Engine";
  sub->add_option_function<std::string>(
       "--engine",
       [&choice](const std::string& v) { choice.kind = *engine::parse_backend_kind(v); },
       "Backend: cpu (real math) or sim (no math: a GPU's roofline timing, real KV "
       "accounting; needs only config.json and a tokenizer)")
    ->check(CLI::IsMember({"cpu", "sim"}))
    ->default_str("cpu")
    ->group(group);
  auto& s = choice.sim;
  sub->add_option("--sim-gpu", s.gpu, "sim: the GPU modelled")
    ->check(CLI::IsMember(engine::sim::gpu_names()))
    ->capture_default_str()
    ->group(group);
  sub->add_option("--sim-time-scale", s.time_scale,
                  "sim: wall seconds per modelled second (0.1: ten times faster than the "
                  "GPU; 0: no waiting)")
    ->check(CLI::Range(0.0, 1e6))
    ->capture_default_str()
    ->group(group);
  sub->add_option("--sim-payload-scale", s.payload_scale,
                  "sim: KV blocks in host memory are the real size divided by this "
                  "(must divide layers x kv_heads x head_dim)")
    ->check(CLI::Range(1, 1 << 20))
    ->capture_default_str()
    ->group(group);
  sub->add_option("--sim-tp", s.tensor_parallel,
                  "sim: GPUs sharing the model (tensor parallel; communication not modelled)")
    ->check(CLI::Range(1, 1024))
    ->capture_default_str()
    ->group(group);
  sub->add_option_function<double>(
       "--sim-memory-efficiency", [&s](const double& v) { s.memory_efficiency = v; },
       "sim: fraction of HBM bandwidth reached (default: the calibration table's, 0.7)")
    ->check(CLI::Range(0.001, 1.0))
    ->group(group);
  sub->add_option_function<double>(
       "--sim-compute-efficiency", [&s](const double& v) { s.compute_efficiency = v; },
       "sim: fraction of dense bf16 peak reached (default: the calibration table's, 0.6)")
    ->check(CLI::Range(0.001, 1.0))
    ->group(group);
  sub->add_option_function<double>(
       "--sim-step-overhead-us", [&s](const double& v) { s.step_overhead_s = v * 1e-6; },
       "sim: fixed time added to every step, microseconds (default: the calibration table's, 0)")
    ->check(CLI::Range(0.0, 1e7))
    ->group(group);
  sub->add_option("--sim-eos-probability", s.eos_probability,
                  "sim: chance that a step emits EOS (0: requests end at max_tokens)")
    ->check(CLI::Range(0.0, 1.0))
    ->capture_default_str()
    ->group(group);
}

} // namespace tessera::cli
