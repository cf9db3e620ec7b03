#include "chaos/chaos_run.hpp"

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include <caf/sec.hpp>
#include <nlohmann/json.hpp>

#include "bench/http_client.hpp"
#include "chaos/disk_faults.hpp"
#include "chaos/health_probe.hpp"
#include "cluster/cluster_secret.hpp"
#include "chaos/load_plan.hpp"
#include "chaos/node_processes.hpp"
#include "chaos/reference_engine.hpp"
#include "chaos/stream_answer.hpp"
#include "common/error.hpp"

namespace tessera::chaos {

namespace {

using clock_type = std::chrono::steady_clock;

caf::error run_error(const std::string& text) {
  return caf::make_error(caf::sec::runtime_error, text);
}

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The endpoint a node takes POST /admin/faults on: its metrics endpoint,
/// else (a frontend node) its HTTP API; port 0 if it has neither.
bench::http_endpoint admin_endpoint(const cluster::node_spec& n) {
  if (n.metrics_port != 0)
    return {n.metrics_host, n.metrics_port, ""};
  if (n.has("frontend"))
    return {n.http_host, n.http_port, ""};
  return {n.http_host, 0, ""};
}

/// Replaces node `n`'s fault plan (with the cluster's admin key, which
/// the endpoint asks for); "" when it worked, else why not.
std::string post_fault_plan(const cluster::node_spec& n, const std::string& plan,
                            const cluster::cluster_config& cfg) {
  auto key = cluster::load_cluster_secret(cfg.admin_key_file);
  if (!key)
    return "POST /admin/faults: " + error_message(key.error());
  const auto ep = admin_endpoint(n);
  const std::string body = nlohmann::json{{"plan", plan}}.dump();
  auto reply = bench::http_fetch(ep, "POST", "/admin/faults", body, std::chrono::milliseconds{3000}, "Bearer " + *key);
  if (!reply)
    return "POST /admin/faults: " + error_message(reply.error());
  if (reply->status != 200)
    return "POST /admin/faults: HTTP " + std::to_string(reply->status) + ": " + reply->body.substr(0, 300);
  return {};
}

/// Where node `id` keeps its kv store's disk tier (the node's working
/// directory is the harness's).
std::filesystem::path disk_dir_of(const cluster::cluster_config& cfg, const std::string& id) {
  return std::filesystem::absolute(cfg.kvstore_disk_dir) / id;
}

/// Applies one event; "" when it worked, else why not.
std::string apply_event(const scenario_event& e, node_processes& nodes, const cluster::cluster_config& cfg,
                        disk_faults* disks) {
  caf::error err;
  switch (e.action) {
    case event_action::kill:
      err = nodes.signal(e.node, SIGKILL);
      break;
    case event_action::term:
      err = nodes.signal(e.node, SIGTERM);
      break;
    case event_action::stop:
      err = nodes.signal(e.node, SIGSTOP);
      break;
    case event_action::cont:
      err = nodes.signal(e.node, SIGCONT);
      break;
    case event_action::restart:
      err = nodes.restart(e.node);
      break;
    case event_action::faults:
      return post_fault_plan(*cfg.node(e.node), e.plan, cfg);
    case event_action::disk_full:
      return disks ? disks->fill(disk_dir_of(cfg, e.node)) : "no tmpfs mounted for the node's disk";
    case event_action::disk_heal:
      return disks ? disks->heal(disk_dir_of(cfg, e.node)) : "no tmpfs mounted for the node's disk";
  }
  return err ? error_message(err) : std::string{};
}

/// Applies the scenario's events at their times on a thread of its own.
class event_runner {
public:
  event_runner(const scenario& s, node_processes& nodes, const cluster::cluster_config& cfg, disk_faults* disks,
               clock_type::time_point t0, const std::function<void(const std::string&)>& say)
    : events_(s.events), nodes_(nodes), cfg_(cfg), disks_(disks), t0_(t0), say_(say), thread_([this] { run(); }) {}
  event_runner(const event_runner&) = delete;
  event_runner& operator=(const event_runner&) = delete;
  ~event_runner() { (void) finish(); }

  /// Stops (events not yet due are not applied) and returns the applied ones.
  std::vector<event_record> finish() {
    {
      std::lock_guard guard{mutex_};
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable())
      thread_.join();
    return done_;
  }

private:
  void run() {
    for (const auto& e : events_) {
      std::unique_lock lock{mutex_};
      const auto due = t0_ + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(e.at_s));
      if (cv_.wait_until(lock, due, [this] { return stop_; }))
        return;
      lock.unlock();
      event_record r;
      r.event = e;
      r.applied_s = since(t0_);
      r.error = apply_event(e, nodes_, cfg_, disks_);
      if (say_) {
        char t[32];
        std::snprintf(t, sizeof t, "%.2f", r.applied_s);
        say_(std::string{"t="} + t + " s: " + std::string{to_string(e.action)} + " " + e.node +
             (e.plan.empty() ? "" : " \"" + e.plan + "\"") + (r.error.empty() ? "" : " FAILED: " + r.error));
      }
      done_.push_back(std::move(r));
    }
  }

  const std::vector<scenario_event>& events_;
  node_processes& nodes_;
  const cluster::cluster_config& cfg_;
  disk_faults* disks_;
  clock_type::time_point t0_;
  const std::function<void(const std::string&)>& say_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<event_record> done_;
  std::thread thread_;
};

/// The load's client side: sends each planned request at its time and
/// keeps what came back.
class load_observer final : public bench::http_open_loop_observer {
public:
  load_observer(const std::vector<planned_request>& reqs, std::string model, clock_type::time_point t0,
                const std::function<void(const std::string&)>& say)
    : reqs_(reqs), model_(std::move(model)), t0_(t0), say_(say), answers_(reqs.size()), observed_(reqs.size()),
      send_s_(reqs.size(), -1) {}

  std::optional<bench::http_post> make_request(size_t index) override {
    send_s_[index] = since(t0_);
    return bench::http_post{"/v1/completions", completion_body(reqs_[index], model_)};
  }
  void on_response(size_t index, int status) override { answers_[index].on_status(status); }
  void on_body(size_t index, std::string_view bytes) override { answers_[index].on_body(bytes); }
  void on_complete(size_t index, const std::string& error) override {
    auto& o = observed_[index];
    o.ended = true;
    o.end_s = since(t0_);
    o.error = answers_[index].error(error);
    o.text = answers_[index].text();
    ++ended_;
  }
  void on_tick() override {
    if (!say_)
      return;
    char line[96];
    size_t sent = 0;
    for (double s : send_s_)
      sent += s >= 0 ? 1 : 0;
    std::snprintf(line, sizeof line, "t=%.0f s: %zu sent, %zu answered", since(t0_), sent, ended_);
    say_(line);
  }

  [[nodiscard]] const observed_answer& observed(size_t i) const { return observed_[i]; }
  [[nodiscard]] double send_s(size_t i) const { return send_s_[i]; }

private:
  const std::vector<planned_request>& reqs_;
  std::string model_;
  clock_type::time_point t0_;
  const std::function<void(const std::string&)>& say_;
  std::vector<stream_answer> answers_;
  std::vector<observed_answer> observed_;
  std::vector<double> send_s_;
  size_t ended_ = 0;
};

/// Waits until the frontend's health says ready (200) with at least
/// `workers` workers; a frontend that is ready with fewer at the deadline
/// is taken as it is.
caf::error await_ready(const bench::http_endpoint& ep, const std::string& path, int workers,
                       std::chrono::seconds limit, const std::function<void(const std::string&)>& say) {
  const auto deadline = clock_type::now() + limit;
  health_sample last;
  while (clock_type::now() < deadline) {
    last = poll_health(ep, path);
    if (last.http_status == 200 && last.workers >= workers)
      return {};
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  }
  if (last.http_status == 200) {
    if (say)
      say("the frontend is ready with " + std::to_string(last.workers) + " of " + std::to_string(workers) +
          " workers; starting anyway");
    return {};
  }
  return run_error("the frontend did not become ready within " + std::to_string(limit.count()) + " s (GET " + path +
                   ": " + (last.http_status == 0 ? "no answer" : "HTTP " + std::to_string(last.http_status)) + ")");
}

} // namespace

std::vector<std::string> check_run(const chaos_options& o) {
  std::vector<std::string> ids;
  for (const auto& n : o.config.nodes)
    ids.push_back(n.id);
  auto problems = check_scenario_nodes(o.run, ids);
  for (const auto& e : o.run.events) {
    const auto* n = o.config.node(e.node);
    if (n != nullptr && e.action == event_action::faults && admin_endpoint(*n).port == 0)
      problems.push_back("node " + e.node + " has no metrics endpoint (metrics = \"host:port\" in its [[node]]) " +
                         "to take POST /admin/faults");
  }
  for (const auto& id : o.run.disk_fault_nodes()) {
    const auto* n = o.config.node(id);
    if (n == nullptr)
      continue; // named above
    if (o.config.kvstore_disk_dir.empty() || o.config.kvstore_host_mb == 0 || !n->has_workers())
      problems.push_back("node " + id + " has no kv store disk tier for disk-full/disk-heal (it needs workers, "
                         "kvstore_host_mb > 0 and kvstore_disk_dir in the cluster config)");
  }
  bool front = false;
  for (const auto& n : o.config.nodes)
    front = front || n.has("frontend");
  if (!front)
    problems.push_back("the cluster has no frontend node");
  return problems;
}

caf::expected<chaos_report> run_chaos(const chaos_options& o) {
  auto say = [&](const std::string& line) {
    if (o.say)
      o.say(line);
  };
  if (auto problems = check_run(o); !problems.empty()) {
    std::string text;
    for (const auto& p : problems)
      text += (text.empty() ? "" : "\n") + p;
    return caf::make_error(caf::sec::invalid_argument, text);
  }
  reference_options ro;
  ro.model_dir = o.reference_model_dir.empty() ? o.model_dir : o.reference_model_dir;
  ro.choice = o.backend;
  ro.max_model_len = o.config.max_model_len;
  auto ref = reference_engine::open(ro);
  if (!ref)
    return ref.error();
  const auto reqs = plan_load(o.run, ref->vocab());
  char what[160];
  std::snprintf(what, sizeof what, "%zu requests over %.1f s, %zu events", reqs.size(), o.run.duration_s,
                o.run.events.size());
  say("scenario " + o.run.name + ": " + what);
  // The right answers are computed while the nodes start.
  auto texts = std::async(std::launch::async, [&] { return ref->texts(reqs); });

  std::vector<std::string> ids;
  for (const auto& n : o.config.nodes)
    ids.push_back(n.id);
  std::filesystem::create_directories(o.log_dir);
  // Before the nodes start (and gone after they stopped): the tmpfs of
  // each node whose disk fails in this scenario.
  std::unique_ptr<disk_faults> disks;
  if (const auto disk_nodes = o.run.disk_fault_nodes(); !disk_nodes.empty()) {
    std::vector<std::filesystem::path> dirs;
    for (const auto& id : disk_nodes)
      dirs.push_back(disk_dir_of(o.config, id));
    auto d = disk_faults::mount(dirs, uint64_t{32} << 20);
    if (!d) {
      texts.wait();
      return d.error();
    }
    disks = std::move(*d);
    say("mounted a 32 MiB tmpfs on the kv store disk of " + std::to_string(dirs.size()) + " node(s)");
  }
  node_processes nodes{{o.program, o.config_file, o.node_args, o.log_dir}, ids};
  say("starting " + std::to_string(ids.size()) + " nodes (logs in " + o.log_dir.string() + ")");
  if (auto err = nodes.start_all(o.start_timeout)) {
    texts.wait();
    return err;
  }
  const auto* front_node = o.config.frontend_node();
  if (front_node == nullptr)
    return caf::make_error(caf::sec::invalid_argument, "the cluster config has no node with the role frontend");
  const auto& front = *front_node;
  const bench::http_endpoint ep{front.http_host, front.http_port, ""};
  const auto path = pick_health_path(ep);
  int workers = 0;
  for (const auto& n : o.config.nodes)
    if (n.has_workers())
      workers += n.workers;
  if (auto err = await_ready(ep, path, workers, o.start_timeout, o.say)) {
    texts.wait();
    return err;
  }
  auto refs = texts.get();
  if (!refs)
    return refs.error();
  say("cluster ready (GET " + path + "); " + std::to_string(refs->size()) + " reference answers computed; load starts");

  chaos_report report;
  report.scenario = o.run.name;
  report.description = o.run.description;
  report.command = o.command;
  report.seed = o.run.seed;
  report.duration_s = o.run.duration_s;
  report.grace_s = o.run.grace_s;
  report.log_dir = o.log_dir.string();
  report.health_path = path;

  std::vector<std::chrono::nanoseconds> send_at;
  for (const auto& r : reqs)
    send_at.emplace_back(static_cast<int64_t>(r.send_s * 1e9));
  const auto t0 = clock_type::now();
  health_probe probe{ep, path, t0};
  std::vector<event_record> applied;
  {
    event_runner events{o.run, nodes, o.config, disks.get(), t0, o.say};
    load_observer obs{reqs, o.config.served_model_name.empty() ? o.model_dir.filename().string()
                                                               : o.config.served_model_name,
                      t0, o.say};
    bench::open_loop_options lo;
    lo.io_timeout = std::chrono::milliseconds{std::max<int64_t>(1000, static_cast<int64_t>(o.run.grace_s * 1e3))};
    auto stats = bench::run_open_loop(ep, lo, send_at, obs);
    if (!stats)
      return stats.error();
    // Events still due, and two seconds to see the last one's effect on
    // health, within the run's end.
    double until = 0;
    for (const auto& e : o.run.events)
      until = std::max(until, e.at_s + 2);
    until = std::min(until, o.run.duration_s + o.run.grace_s);
    while (since(t0) < until)
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
    applied = events.finish();
    const double deadline = o.run.duration_s + o.run.grace_s;
    for (size_t i = 0; i < reqs.size(); ++i) {
      request_record q;
      q.index = i;
      q.due_s = reqs[i].send_s;
      q.send_s = obs.send_s(i) >= 0 ? obs.send_s(i) : reqs[i].send_s;
      const auto& a = obs.observed(i);
      q.end_s = a.ended ? a.end_s : -1;
      q.temperature = reqs[i].temperature;
      q.prompt_tokens = static_cast<int32_t>(reqs[i].prompt.size());
      q.text_bytes = a.error.empty() ? a.text.size() : 0;
      auto v = classify(a, (*refs)[i], deadline);
      q.outcome = v.outcome;
      q.detail = std::move(v.detail);
      report.requests.push_back(std::move(q));
    }
  }
  report.health = probe.stop();
  report.events = std::move(applied);
  // Each node's counters as the run left them (what its kv store offered,
  // stored and served), beside its log: <log_dir>/<id>.metrics.
  for (const auto& n : o.config.nodes)
    if (n.metrics_port != 0 && !o.log_dir.empty())
      if (auto m = bench::http_fetch({n.metrics_host, n.metrics_port, ""}, "GET", "/metrics", "",
                                     std::chrono::milliseconds{2000});
          m && m->status == 200)
        std::ofstream(o.log_dir / (n.id + ".metrics")) << m->body;
  for (const auto& line : nodes.stop_all())
    say(line);
  finish_report(report);
  return report;
}

} // namespace tessera::chaos
