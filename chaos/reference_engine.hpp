#pragma once
/// @file
/// The right answers of a chaos run: every planned request run to the end
/// on one engine in the harness's process, built as the nodes build
/// theirs (engine/factory, the cluster config's backend), so a served
/// answer that differs is a bug. The CPU backend on a model and the sim
/// backend are deterministic per (seed, position), so the batch the
/// harness runs them in does not change an answer.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "chaos/load_plan.hpp"
#include "engine/factory/backend_factory.hpp"

namespace tessera::chaos {

/// How to build the reference engine.
struct reference_options {
  /// The model folder the nodes serve.
  std::filesystem::path model_dir;
  /// The nodes' backend (the sim's time_scale is set to 0 here: no waiting).
  engine::backend_choice choice;
  /// The nodes' max_model_len (0: the model's).
  int32_t max_model_len = 0;
  /// CPU threads. Default: 1.
  int threads = 1;
  /// Requests run together. Default: 16.
  size_t batch = 16;
};

/// A loaded model and backend choice that computes reference texts.
/// Not thread-safe; texts() may run on any one thread.
class reference_engine {
public:
  /// Loads the model files. Errors name the folder and what is missing.
  [[nodiscard]] static caf::expected<reference_engine> open(const reference_options& opts);

  /// Token ids below this are valid prompt tokens (the smaller of the
  /// model's and the tokenizer's vocabulary).
  [[nodiscard]] int32_t vocab() const { return vocab_; }

  /// The text each of `reqs` generates (EOS ignored), in order. Errors:
  /// the backend cannot be built, or the engine refuses a request.
  [[nodiscard]] caf::expected<std::vector<std::string>> texts(const std::vector<planned_request>& reqs) const;

private:
  reference_options opts_;
  std::shared_ptr<const engine::model_files> files_;
  int32_t vocab_ = 0;
};

} // namespace tessera::chaos
