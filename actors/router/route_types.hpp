#pragma once
/// @file
/// What a router policy decides from, and what it decides: each worker's
/// load, the request, the decision, and the policies' options.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/block_hash.hpp"
#include "engine/model_units.hpp"

namespace tessera::actors {

/// What a worker can do.
enum class worker_role : uint8_t {
  /// Prefills prompts for other workers (disaggregated serving).
  prefill,
  /// Decodes; prefills its own requests when the uncached part of the
  /// prompt is short (conditional disaggregation).
  decode,
  /// Both: decodes and prefills its own requests (aggregated serving: every
  /// worker is `both`). It prefills for other workers only when
  /// router_options::remote_prefill_on_both is set.
  both,
};

/// Returns "prefill", "decode" or "both".
const char* to_string(worker_role r);

/// A worker's state as the router sees it. The router actor keeps these up
/// to date: from heartbeats, and optimistically after each decision (add
/// the routed request's blocks and tokens to the chosen workers at once, as
/// Dynamo's router does, or a burst of requests all sees the same idle
/// worker). Negative counts (an estimate decremented twice) count as 0.
struct worker_load {
  /// The worker's id: the worker_id its KV events carry.
  uint64_t id = 0;
  worker_role role = worker_role::both;
  /// False while membership or heartbeats say the worker is down.
  bool healthy = true;
  /// Unhealthy only by lateness (health_fault::late: its node connected,
  /// no canary failed with an error, a heartbeat or canary answer late)
  /// and not drained: panic routing may use it
  /// (router_options::panic_routing). Meaningless while healthy.
  bool late = false;
  /// KV blocks held by the worker's running requests (decode load), in
  /// blocks of the requests' block_tokens.
  int64_t active_decode_blocks = 0;
  /// Prompt tokens queued for prefill or being prefilled on the worker.
  int64_t queued_prefill_tokens = 0;
  /// Requests the worker is running (prefill or decode).
  int32_t active_requests = 0;
  /// Model units (router_options::units) of the work the worker still has:
  /// queued and running requests' a * prompt tokens left + b * output
  /// tokens left + c. From its heartbeats, plus what the router routed to
  /// it since, less what finished.
  double outstanding_units = 0;
  /// The worker's own model units (fitted for its device, from its join):
  /// what a request costs there. None: the router's (router_options::units),
  /// as for a worker whose join predates them.
  std::optional<engine::model_units> units;
  /// Most requests it runs at once; a worker at the limit takes no new
  /// request. 0: no limit.
  int32_t max_requests = 0;
  /// The router's KV admission (kv_admission.hpp) found no room in its
  /// pool for the request being routed: it takes no new request now.
  bool kv_full = false;
  /// The kv store of the worker's node (its id in the prefix index), from
  /// which it fetches a cached prefix its own pool lacks; 0: none.
  uint64_t store_id = 0;
};

/// A request to route.
struct route_request {
  /// Chained hashes of the prompt's full blocks (engine::kv_hash_blocks,
  /// with the tenant's cache salt), in order. At most
  /// prompt_tokens / block_tokens of them; may be empty.
  std::vector<engine::kv_block_hash> block_hashes;
  /// Prompt length in tokens, >= 1.
  int32_t prompt_tokens = 0;
  /// Tokens per KV block, >= 1 (the engines' block size).
  int32_t block_tokens = 16;
  /// Most tokens it may generate (its units: a * prompt + b * max_tokens
  /// + c); >= 0.
  int32_t max_tokens = 0;
  /// Conversation id for stickiness; empty: none. Any length (the session
  /// table keeps a 64-bit hash of it).
  std::string session_id;
};

/// Where a request goes.
struct route_decision {
  /// The worker that computes the prompt's KV; equals decode_worker when
  /// the decode worker prefills locally.
  uint64_t prefill_worker = 0;
  /// The worker that generates the tokens.
  uint64_t decode_worker = 0;
  /// True when prefill_worker != decode_worker (the KV moves from one to
  /// the other).
  bool disaggregated = false;
  /// Leading blocks of the prompt the prefill worker holds (per the prefix
  /// index), so it computes prompt_tokens - cached_blocks * block_tokens.
  int32_t cached_blocks = 0;
  /// True when the decode worker came from the session table.
  bool sticky = false;
  /// True when no worker that can decode was healthy and the workers
  /// were chosen among the healthy and the late ones (panic routing).
  bool panic = false;
  /// A kv store on another node than the prefill worker's that holds more
  /// leading blocks of the prompt than the prefill worker's pool and its
  /// node's store (the one holding most): the prefill worker fetches them
  /// from there over the transport. 0: none.
  uint64_t fetch_store = 0;
  /// Leading blocks of the prompt fetch_store holds (per the index).
  int32_t fetch_store_blocks = 0;
  /// One line for logs and metrics: the policy, the choice and why
  /// (costs, cache hits, the disaggregation test).
  std::string reason;
};

/// What a policy's load term counts.
enum class load_measure : uint8_t {
  /// Outstanding model units (worker_load::outstanding_units): a long
  /// prompt or a long generation weighs what it costs.
  units,
  /// KV blocks: active_decode_blocks + queued_prefill_tokens / block_tokens
  /// (the load term before model units; kept to compare against).
  blocks,
};

/// "units" or "blocks".
const char* to_string(load_measure m);

/// Options of every router policy.
struct router_options {
  /// kv policy: weight of the prefill term against the decode term in the
  /// cost `overlap_weight * prefill_blocks + active_decode_blocks`. Higher
  /// favours cache hits (TTFT), lower favours even decode load (ITL); 0
  /// ignores the cache. Finite, >= 0. Default: 1.0 (Dynamo's
  /// --kv-overlap-score-weight default; ai-dynamo/dynamo
  /// docs/architecture/kv_cache_routing.md).
  double overlap_weight = 1.0;
  /// Conditional disaggregation: when the prompt tokens the chosen decode
  /// worker does not hold cached are at most this many, it prefills the
  /// request itself (no KV transfer); above, a prefill worker does. >= 0.
  /// Default: 1000 (Dynamo's --max-local-prefill-length default,
  /// ai-dynamo/dynamo examples/llm/utils/vllm.py; its rule `prefill_length -
  /// prefix_hit_length > max_local_prefill_length` sends a prompt to a
  /// remote prefill worker, lib/llm/src/disagg_router.rs. Dynamo's tuning
  /// guide, docs/guides/disagg_perf_tuning.md, sets it to the prompt length
  /// at which one prefill saturates the GPU: about 1000 tokens for a 70B
  /// model on B200).
  int32_t max_local_prefill_tokens = 1000;
  /// Whether `both` workers may prefill for other workers. Off, remote
  /// prefill goes to `prefill` workers only, and a cluster of `both`
  /// workers serves aggregated (each prefills its own requests). Default:
  /// false.
  bool remote_prefill_on_both = false;
  /// Credit for a prompt block the worker's node store holds (and the
  /// worker's own pool does not), as a fraction of a block held in the
  /// pool: fetching it costs a copy (host memory) or a read (disk) instead
  /// of a prefill. In [0, 1]. Defaults: 0.9 host, 0.6 disk (estimates, to
  /// be calibrated against measured fetch and prefill times).
  double host_tier_credit = 0.9;
  double disk_tier_credit = 0.6;
  /// Credit for a prompt block that only another node's store holds (any
  /// tier): it crosses the network before it is used. In [0, 1]. Default:
  /// 0.5 (an estimate, like the tier credits).
  double remote_tier_credit = 0.5;
  /// Whether a prefill worker is told of another node's store holding more
  /// of the prompt than it can use locally (route_decision::fetch_store),
  /// and credited for it. Off, each node's store serves only its own
  /// workers. Default: true.
  bool remote_fetch = true;
  /// Sessions remembered for stickiness; the least recently routed one is
  /// forgotten beyond it. 0 turns stickiness off. About 100 bytes each.
  /// Default: 65536.
  size_t max_sessions = 65536;
  /// The load term of least-loaded and kv, and of the sticky break.
  /// Default: units (on the conversation trace a tie with blocks where
  /// every worker is the same device, and TTFT p90 1.2-2.6x lower on a
  /// fleet of mixed devices: bench/README.md, "Model units").
  load_measure load = load_measure::units;
  /// The model's units (engine/model_units.hpp) for the engine the workers
  /// run. Default: a = b = 1, c = 0 (unfitted: tokens).
  engine::model_units units;
  /// A session's sticky decode worker is given up for the policy's choice
  /// when its load exceeds this factor times the least-loaded eligible
  /// worker's load with the request added to it (load in the measure
  /// above; so an idle cluster keeps sessions where they are). 0: never.
  /// Finite, 0 or >= 1. Default: 2.
  double sticky_break_factor = 2.0;
  /// Panic routing (Envoy's panic threshold set to zero healthy, but
  /// narrower: Envoy then balances over every host): when no
  /// worker of role decode or both is healthy, route among the healthy
  /// workers and those whose only fault is lateness (worker_load::late)
  /// instead of refusing the request with no_healthy_worker. A worker
  /// whose node is down, whose canary failed with an error, or that an
  /// operator drained is never used. On a host too busy to run the
  /// workers' threads in time every worker turns late at once although
  /// all of them are alive; a request served late beats a 503 that the
  /// client retries into the same overload. The cost: a worker that is
  /// late because its process is stopped (SIGSTOP) or hung gets requests
  /// while it is the only kind left, and they wait for it (the frontend
  /// moves or fails them as it does for any stalled stream). /health and
  /// /ready still report the workers unhealthy. Default: true.
  bool panic_routing = true;
  /// Seed of the policy's random numbers (the random policy, tie breaks).
  /// Default: 0.
  uint64_t seed = 0;
  /// Source of random 64-bit values, replacing the splitmix64 generator
  /// seeded with `seed` (for tests). Default: empty.
  std::function<uint64_t()> random_source;
};

} // namespace tessera::actors
