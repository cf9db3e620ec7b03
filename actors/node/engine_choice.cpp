#include "actors/node/engine_choice.hpp"

namespace tessera::actors::detail {

engine::backend_choice backend_choice_of(const cluster::cluster_config& cfg) {
  engine::backend_choice c;
  c.kind = engine::parse_backend_kind(cfg.engine).value_or(engine::backend_kind::cpu);
  const auto& m = cfg.sim;
  auto& s = c.sim;
  s.gpu = m.gpu;
  s.time_scale = m.time_scale;
  s.payload_scale = m.payload_scale;
  s.tensor_parallel = m.tensor_parallel;
  s.memory_efficiency = m.memory_efficiency;
  s.compute_efficiency = m.compute_efficiency;
  if (m.step_overhead_us)
    s.step_overhead_s = *m.step_overhead_us * 1e-6;
  s.gpu_memory_utilization = m.gpu_memory_utilization;
  s.eos_probability = m.eos_probability;
  return c;
}

} // namespace tessera::actors::detail
