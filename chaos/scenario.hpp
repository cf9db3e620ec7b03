#pragma once
/// @file
/// A chaos scenario (configs/chaos/*.toml): how long the load runs, what the
/// load is, and the timed events applied to the cluster's nodes while it
/// runs. Read strictly: an unknown key is an error with the nearest known
/// key suggested, and every problem of a file is reported at once.
///
///   name = "kill-decode"        # default: the file's stem
///   description = "..."         # one line for the report
///   duration_s = 20             # seconds of load (requests sent in [0, duration_s))
///   grace_s = 15                # after the load, how long answers may still come
///   seed = 1                    # the load's seed (tessera chaos --seed overrides)
///   [load]
///   rate = 4                    # requests per second (Poisson arrivals)
///   prompt_tokens = [8, 64]     # random token ids, length uniform in [lo, hi]
///   max_tokens = 48             # every request generates exactly this many
///   seeded_fraction = 0.5       # share sampled at `temperature` with a seed;
///   temperature = 0.8           # the rest greedy (temperature 0)
///   shared_prefixes = 0         # > 0: each prompt starts with one of this many
///   prefix_tokens = 0           # random prefixes of this many tokens
///   [[event]]
///   at_s = 5                    # seconds after the load started
///   action = "kill"             # kill (SIGKILL), term (SIGTERM), stop (SIGSTOP),
///                               # cont (SIGCONT), restart, faults, disk-full
///                               # (the node's kv store disk answers ENOSPC
///                               # from now on: disk_faults.hpp), disk-heal
///   node = "decode-a"           # a node id of the cluster config
///   plan = "seed=1; drop,p=0.01" # faults only: the node's fault plan
///                               # (transport/faults/fault_plan.hpp); "" heals

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::chaos {

/// What an event does to its node.
enum class event_action : uint8_t { kill, term, stop, cont, restart, faults, disk_full, disk_heal };

/// "kill", "term", ...
[[nodiscard]] std::string_view to_string(event_action a);

/// One timed event.
struct scenario_event {
  /// Seconds after the load started. >= 0.
  double at_s = 0;
  event_action action = event_action::kill;
  /// The node's id in the cluster config.
  std::string node;
  /// faults: the fault plan's text form ("" heals and clears).
  std::string plan;
};

/// The [load] table.
struct load_spec {
  /// Requests per second, > 0. Default: 4.
  double rate = 4;
  /// Prompt length range in tokens, 1 <= lo <= hi. Default: [8, 64].
  int32_t prompt_tokens_min = 8;
  int32_t prompt_tokens_max = 64;
  /// Tokens every request generates (EOS ignored), >= 1. Default: 48.
  int32_t max_tokens = 48;
  /// Share of requests sampled at `temperature` with a seed, in [0, 1];
  /// the rest are greedy. Default: 0.5.
  double seeded_fraction = 0.5;
  /// Temperature of the seeded requests, in (0, 2]. Default: 0.8.
  double temperature = 0.8;
  /// Prompts that share prefixes (a kv store has something to serve):
  /// each prompt starts with one of `shared_prefixes` random prefixes of
  /// `prefix_tokens` tokens (made from the seed), then its own
  /// prompt_tokens. Both 0 (default) or both > 0; at most 1024 and 65536.
  int32_t shared_prefixes = 0;
  int32_t prefix_tokens = 0;
};

/// A whole scenario. Events are sorted by at_s (stable).
struct scenario {
  std::string name;
  std::string description;
  /// Seconds of load, > 0. Default: 20.
  double duration_s = 20;
  /// Seconds after the load ends that answers may still come, >= 0.
  /// Default: 15.
  double grace_s = 15;
  /// The load's seed. Default: 1.
  uint64_t seed = 1;
  load_spec load;
  std::vector<scenario_event> events;

  /// Whether any event is a `faults` event (the nodes need fault injection).
  [[nodiscard]] bool uses_faults() const;
  /// The nodes named by disk-full or disk-heal events (each once, in order).
  [[nodiscard]] std::vector<std::string> disk_fault_nodes() const;
};

/// Reads scenario TOML `text` (`name` for messages; also the default
/// scenario name) strictly. Errors (caf::sec::invalid_argument): every
/// problem, one line each, "<name>: <what is wrong>", naming the key: a
/// syntax error (with line), an unknown key (with the nearest known one),
/// a wrong type or out-of-range value, an unknown action, an event without
/// a node, a plan on an event that is not `faults`, a `faults` event
/// without a plan, an event at or after duration_s + grace_s.
[[nodiscard]] caf::expected<scenario> parse_scenario(std::string_view text, const std::string& name);

/// parse_scenario on a file's text; the default name is the file's stem.
[[nodiscard]] caf::expected<scenario> load_scenario(const std::filesystem::path& file);

/// `s` with every time (duration_s, each at_s) multiplied by `factor` > 0
/// (grace_s and the load's rate unchanged): a short version of a scenario.
[[nodiscard]] scenario scale_scenario(scenario s, double factor);

/// Problems of `s` against a cluster whose node ids are `node_ids`: an
/// event naming a node that is not there (with the nearest id). Empty
/// when none.
[[nodiscard]] std::vector<std::string> check_scenario_nodes(const scenario& s,
                                                            const std::vector<std::string>& node_ids);

} // namespace tessera::chaos
