#include "actors/worker/worker_metrics.hpp"

namespace tessera::actors {

worker_metrics::worker_metrics(cluster::metrics_registry& r, const std::string& worker)
  : kv_used(r.gauge("tessera_kv_blocks_used", "KV blocks held by requests, per worker.",
                    {{"worker", worker}})),
    aborted(r.counter("tessera_requests_aborted_total",
                      "Requests stopped before they finished (cancelled), per worker.",
                      {{"worker", worker}})),
    transfer_bytes(r.counter("tessera_kv_transfer_bytes_total",
                             "KV bytes this worker put into other workers' pools.",
                             {{"worker", worker}})),
    transfer_seconds(r.counter("tessera_kv_transfer_seconds_total",
                               "Seconds from the start of a KV transfer to its completion.",
                               {{"worker", worker}})),
    store_fetched(r.counter("tessera_kvstore_fetched_blocks_total",
                            "Prompt blocks a worker took from its node's kv store instead of computing them.",
                            {{"worker", worker}})),
    peer_fetched(r.counter("tessera_kvstore_peer_fetched_blocks_total",
                           "Prompt blocks a worker took from another node's kv store instead of computing them.",
                           {{"worker", worker}})),
    fetch_refused(r.counter("tessera_kvstore_fetch_refused_blocks_total",
                            "Fetched blocks a worker refused (wrong hash, layout or checksum) and computed instead.",
                            {{"worker", worker}})),
    store_offered(r.counter("tessera_kvstore_offered_blocks_total",
                            "Blocks a worker gave its node's kv store (prompts it prefilled, sequences that finished).",
                            {{"worker", worker}})),
    offer_dropped(r.counter("tessera_kvstore_offer_dropped_blocks_total",
                            "Blocks a worker did not offer its node's kv store because its offers in flight "
                            "were at the bound (worker_config::offer_max_bytes).",
                            {{"worker", worker}})),
    steps(r.counter("tessera_engine_steps_total", "Forward steps a worker's engine ran.",
                    {{"worker", worker}})),
    busy_seconds(r.counter("tessera_engine_busy_seconds_total",
                           "Wall seconds a worker's engine spent in forward steps (its busy share "
                           "over an interval: the increase / the interval; the sim engine's steps "
                           "last their modelled time x time_scale).",
                           {{"worker", worker}})),
    step_delay_seconds(r.counter("tessera_engine_step_delay_seconds_total",
                                 "Wall seconds a worker's engine steps waited to start after they were due "
                                 "(the host's share of a step loop; see bench trace's host-bound guard).",
                                 {{"worker", worker}})),
    sim_wall_seconds(r.counter("tessera_sim_step_wall_seconds_total",
                               "Wall seconds a sim engine's model asked its steps to last (modelled "
                               "seconds x time_scale); 0 for other engines.",
                               {{"worker", worker}})),
    preemptions(r.counter("tessera_engine_preemptions_total",
                          "Times a worker's engine preempted a running request to make room in its KV pool "
                          "(the request waits again and its KV is computed again when it resumes).",
                          {{"worker", worker}})),
    tokens_computed(r.counter("tessera_engine_tokens_computed_total",
                              "Tokens whose KV a worker's engine computed: prompts (less what the prefix "
                              "cache held), recomputes after preemption, and decoded tokens.",
                              {{"worker", worker}})),
    fetch_seconds(r.histogram("tessera_kvstore_fetch_seconds",
                              "Time from a prompt's prefix fetch start to its entry into the engine.",
                              cluster::latency_buckets_seconds(), {{"worker", worker}})),
    registry(r), worker_name(worker) {}

void worker_metrics::fetch_ended(const char* outcome) {
  registry
    .counter("tessera_kvstore_fetch_total",
             "Prompt prefix fetches from kv stores by outcome: hit, partial, miss, rejected (a store at its "
             "bound of fetches in flight), late (a store timed out), skipped (estimated slower than "
             "computing), failed.",
             {{"worker", worker_name}, {"outcome", outcome}})
    .inc();
}

} // namespace tessera::actors
