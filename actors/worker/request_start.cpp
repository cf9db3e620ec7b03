#include "actors/worker/request_start.hpp"

#include <algorithm>
#include <random>

namespace tessera::actors {

request_start plan_start(const transport::wire::request_handoff& h, const engine::model_units& u) {
  request_start s;
  s.request = h.request;
  s.prefill_only = !h.decode_at.empty() && s.request.params.max_tokens > 1;
  // A migrated stream's output so far is computed with its prompt.
  s.context = static_cast<int64_t>(h.request.prompt.size() + h.resume_output.size());
  if (s.prefill_only) {
    auto& r = s.request;
    r.keep_kv = true;
    r.continues_elsewhere = true; // the decode worker emits what could start a stop string
    r.params.max_tokens = 1;
    r.params.min_tokens = std::min(r.params.min_tokens, 1);
    s.output_left = 1;
  } else {
    s.output_left = std::max<int64_t>(0, int64_t{h.request.params.max_tokens}
                                           - static_cast<int64_t>(h.resume_output.size()));
  }
  s.units = u.cost(s.context, s.output_left);
  return s;
}

caf::error start_request(engine::engine& eng, engine::request r, const std::vector<int32_t>& output) {
  if (output.empty())
    return eng.add_request(std::move(r));
  engine::kv_export resume;
  resume.model_fingerprint = eng.get_backend().model_fingerprint();
  resume.layout = eng.get_backend().layout();
  resume.tokens = r.prompt;
  resume.tokens.insert(resume.tokens.end(), output.begin(), output.end());
  resume.prompt_len = static_cast<int32_t>(r.prompt.size());
  resume.num_computed = 0;
  resume.seed = r.params.seed ? *r.params.seed : std::random_device{}();
  return eng.import_request(std::move(r), resume);
}

} // namespace tessera::actors
