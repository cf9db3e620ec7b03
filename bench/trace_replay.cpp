#include "bench/trace_replay.hpp"

#include <algorithm>
#include <unordered_map>

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include "bench/completion_stream.hpp"

namespace tessera::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// Turns the open-loop client's events into trace_samples.
class replay_observer final : public http_open_loop_observer {
public:
  replay_observer(const std::vector<trace_request>& requests, const trace_replay_options& opts,
                  const std::function<void(const trace_progress&)>& progress)
      : requests_(requests), opts_(opts), progress_(progress), t0_(clock_type::now()), last_progress_(t0_),
        samples_(requests.size()) {
    const double first_ms = requests.empty() ? 0.0 : static_cast<double>(requests.front().timestamp_ms);
    for (size_t i = 0; i < requests.size(); ++i) {
      auto& s = samples_[i];
      const auto& r = requests[i];
      s.trace_s = static_cast<double>(r.timestamp_ms) / 1e3;
      s.due_s = (static_cast<double>(r.timestamp_ms) - first_ms) / 1e3 / opts.speedup;
      s.prompt_tokens = r.input_length;
      s.max_tokens = opts.max_output > 0 ? std::min(r.output_length, opts.max_output) : r.output_length;
      s.timing.error = "not sent: the replay stopped after its first requests all failed";
    }
  }

  std::optional<http_post> make_request(size_t index) override {
    if (opts_.give_up_after > 0 && done_ >= opts_.give_up_after && ok_ == 0)
      return std::nullopt;
    auto& s = samples_[index];
    s.sent = true;
    s.timing.error.clear();
    ++sent_;
    auto prompt = trace_prompt(requests_[index], opts_.block_tokens, opts_.seed, opts_.tokens);
    auto body = trace_request_body(opts_.model, prompt, s.max_tokens);
    // Measured from here, after the body is built: the time to build it is
    // the client's, and it shows as send lag instead.
    s.timing.start_s = now_s();
    max_lag_s_ = std::max(max_lag_s_, s.timing.start_s - s.due_s);
    active_[index] = {};
    return http_post{"/v1/completions", std::move(body)};
  }

  void on_response(size_t index, int status) override { active_[index].on_response(status); }

  void on_body(size_t index, std::string_view bytes) override {
    active_[index].on_body(bytes, now_s(), samples_[index].timing);
  }

  void on_complete(size_t index, const std::string& error) override {
    auto node = active_.extract(index);
    const auto& a = node.mapped();
    auto& s = samples_[index];
    s.usage_prompt_tokens = a.usage().prompt_tokens;
    s.cached_tokens = a.usage().cached_tokens;
    a.finish(error, now_s(), s.max_tokens, s.timing);
    const auto& t = s.timing;
    ++done_;
    if (t.error.empty()) {
      ++ok_;
      prompt_sum_ += s.prompt_tokens;
      cached_sum_ += std::max<int64_t>(s.cached_tokens, 0);
    } else {
      ++errors_;
    }
  }

  void on_tick() override {
    const auto now = clock_type::now();
    if (now - last_progress_ < opts_.progress_interval || !progress_)
      return;
    last_progress_ = now;
    trace_progress p;
    p.elapsed_s = now_s();
    p.sent = sent_;
    p.done = done_;
    p.errors = errors_;
    p.hit_rate = prompt_sum_ > 0 ? static_cast<double>(cached_sum_) / static_cast<double>(prompt_sum_) : 0.0;
    p.max_lag_s = max_lag_s_;
    progress_(p);
  }

  std::vector<trace_sample> take_samples() { return std::move(samples_); }

private:
  double now_s() const { return std::chrono::duration<double>(clock_type::now() - t0_).count(); }

  const std::vector<trace_request>& requests_;
  const trace_replay_options& opts_;
  const std::function<void(const trace_progress&)>& progress_;
  clock_type::time_point t0_;
  clock_type::time_point last_progress_;
  std::vector<trace_sample> samples_;
  std::unordered_map<size_t, completion_stream> active_;
  size_t sent_ = 0;
  size_t done_ = 0;
  size_t ok_ = 0;
  size_t errors_ = 0;
  int64_t prompt_sum_ = 0;
  int64_t cached_sum_ = 0;
  double max_lag_s_ = 0;
};

} // namespace

std::string trace_request_body(const std::string& model, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  // Written by hand: a long prompt is most of the body, and this is on the
  // replay's only thread, at the request's send time.
  std::string body = "{\"model\":" + nlohmann::json(model).dump() + ",\"prompt\":[";
  body.reserve(body.size() + prompt.size() * 7 + 160);
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (i > 0)
      body += ',';
    body += std::to_string(prompt[i]);
  }
  body += "],\"max_tokens\":" + std::to_string(max_tokens) +
          ",\"temperature\":0,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
  return body;
}

caf::expected<trace_replay_result> replay_trace(const http_endpoint& ep, const std::vector<trace_request>& requests,
                                                const trace_replay_options& opts,
                                                const std::function<void(const trace_progress&)>& progress) {
  if (!(opts.speedup > 0))
    return caf::make_error(caf::sec::invalid_argument, "the speed-up must be above 0");
  replay_observer obs{requests, opts, progress};
  std::vector<std::chrono::nanoseconds> send_at;
  send_at.reserve(requests.size());
  const int64_t first_ms = requests.empty() ? 0 : requests.front().timestamp_ms;
  for (const auto& r : requests)
    send_at.push_back(std::chrono::nanoseconds{
      static_cast<int64_t>(static_cast<double>(r.timestamp_ms - first_ms) * 1e6 / opts.speedup)});
  open_loop_options lo;
  lo.io_timeout = opts.io_timeout;
  lo.tick = std::min(opts.progress_interval, std::chrono::milliseconds{1000});
  auto stats = run_open_loop(ep, lo, send_at, obs);
  if (!stats)
    return stats.error();
  trace_replay_result out;
  out.samples = obs.take_samples();
  out.connections_opened = stats->connections_opened;
  out.peak_in_flight = stats->peak_in_flight;
  return out;
}

} // namespace tessera::bench
