#pragma once
/// @file
/// The GPUs the sim backend models, and how well an engine uses them.
///
/// A preset holds a GPU's public datasheet figures (HBM bandwidth, dense
/// bf16 tensor throughput, memory). A calibration holds the fraction of
/// those figures a real engine reaches: one efficiency for memory-bound
/// steps (decode), one for compute-bound steps (prefill), and a fixed cost
/// per step. The defaults below are assumptions, not measurements; a run of
/// the CUDA engine on the GPU (tessera bench engine, memory-bound decode and
/// compute-bound prefill) fills them in: efficiency = modelled time at
/// efficiency 1 / measured time.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::engine::sim {

/// One GPU's datasheet figures.
struct gpu_spec {
  /// Preset name: "a100", "h100", "h200".
  std::string name;
  /// What it models, e.g. "NVIDIA H100 SXM5 80GB".
  std::string description;
  /// HBM bandwidth, bytes per second.
  double memory_bandwidth_bytes_s = 0;
  /// Dense (no sparsity) bf16 tensor-core throughput, FLOP per second.
  double peak_bf16_flops = 0;
  /// HBM capacity, bytes.
  double memory_bytes = 0;
  /// Host link (PCIe) bandwidth host -> GPU, one direction, bytes per
  /// second: what a KV block loaded from host memory (a kv store tier, a
  /// copied hand-off) crosses.
  double host_link_bytes_s = 0;
};

/// How much of a GPU's datasheet figures an engine reaches.
struct gpu_calibration {
  /// Fraction of memory_bandwidth_bytes_s a memory-bound step reaches.
  double memory_efficiency = 0.7;
  /// Fraction of peak_bf16_flops a compute-bound step reaches.
  double compute_efficiency = 0.6;
  /// Fixed time added to every step (kernel launches, host work), seconds.
  double step_overhead_s = 0;
  /// Fraction of host_link_bytes_s a KV block load reaches.
  double host_link_efficiency = 0.8;
  /// Where the numbers come from, e.g. "assumed" or "measured: <date>, <run>".
  std::string source = "assumed";
};

/// The presets: a100, h100, h200 (see sim_gpu.cpp for the sources).
[[nodiscard]] const std::vector<gpu_spec>& gpu_presets();

/// The preset `name` (case-sensitive), or nullopt.
[[nodiscard]] std::optional<gpu_spec> find_gpu(std::string_view name);

/// Preset names, in order, for help texts and config validation.
[[nodiscard]] std::vector<std::string> gpu_names();

/// The calibration table's entry for `gpu` (a preset name); the defaults of
/// gpu_calibration for a GPU not in the table.
[[nodiscard]] gpu_calibration default_calibration(std::string_view gpu);

} // namespace tessera::engine::sim
