#include "engine/sim/sim_gpu.hpp"

namespace tessera::engine::sim {

namespace {

constexpr double tb = 1e12;
constexpr double gb = 1e9;

} // namespace

const std::vector<gpu_spec>& gpu_presets() {
  // Datasheet figures, dense bf16 (the datasheets quote bf16 "with
  // sparsity" at twice these):
  // - A100 80GB SXM: NVIDIA A100 Tensor Core GPU datasheet (2021):
  //   HBM2e 2,039 GB/s, BF16 tensor core 312 TFLOPS, 80 GB.
  // - H100 SXM5: NVIDIA H100 Tensor Core GPU datasheet (2023): HBM3
  //   3.35 TB/s, BF16 tensor core 1,979 TFLOPS with sparsity (989.5 dense),
  //   80 GB.
  // - H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (2024): HBM3e
  //   4.8 TB/s, BF16 tensor core 1,979 TFLOPS with sparsity (989.5 dense),
  //   141 GB.
  // Host links, from the same datasheets: A100 PCIe Gen4 64 GB/s, H100 and
  // H200 PCIe Gen5 128 GB/s, both directions together (half each way).
  static const std::vector<gpu_spec> presets = {
    {"a100", "NVIDIA A100 SXM4 80GB", 2.039 * tb, 312 * tb, 80 * gb, 32 * gb},
    {"h100", "NVIDIA H100 SXM5 80GB", 3.35 * tb, 989.5 * tb, 80 * gb, 64 * gb},
    {"h200", "NVIDIA H200 SXM 141GB", 4.8 * tb, 989.5 * tb, 141 * gb, 64 * gb},
  };
  return presets;
}

std::optional<gpu_spec> find_gpu(std::string_view name) {
  for (const auto& g : gpu_presets())
    if (g.name == name)
      return g;
  return std::nullopt;
}

std::vector<std::string> gpu_names() {
  std::vector<std::string> out;
  for (const auto& g : gpu_presets())
    out.push_back(g.name);
  return out;
}

gpu_calibration default_calibration(std::string_view gpu) {
  // The calibration table. No entry has been measured yet: each is the
  // assumed 0.7 of HBM bandwidth for decode (vLLM and TensorRT-LLM decode
  // kernels are reported at 60-80%) and 0.6 of dense bf16 peak for prefill
  // GEMMs (large-M cuBLAS GEMMs reach 60-75%), with no fixed step cost,
  // and 0.8 of the host link for KV block loads (pinned-memory copies reach
  // 80-90% of PCIe).
  // Replace an entry with measured values (and say so in `source`) after
  // running the CUDA engine on that GPU.
  struct entry {
    std::string_view gpu;
    gpu_calibration cal;
  };
  static const entry table[] = {
    {"a100", {0.7, 0.6, 0.0, 0.8, "assumed (not yet measured on an A100)"}},
    {"h100", {0.7, 0.6, 0.0, 0.8, "assumed (not yet measured on an H100)"}},
    {"h200", {0.7, 0.6, 0.0, 0.8, "assumed (not yet measured on an H200)"}},
  };
  for (const auto& e : table)
    if (e.gpu == gpu)
      return e.cal;
  return {};
}

} // namespace tessera::engine::sim
