// `tessera chaos`: the fault harness. Starts the cluster of a config, runs
// a seeded load whose answers it knows, applies a scenario's timed faults
// and reports what was wrong, failed or lost (chaos/).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "actors/node/engine_choice.hpp"
#include "chaos/chaos_run.hpp"
#include "chaos/timeline_svg.hpp"
#include "cli/commands.hpp"
#include "cli/demo_model.hpp"
#include "cluster/cluster_config.hpp"
#include "common/error.hpp"

namespace tessera::cli {

namespace {

struct chaos_args {
  std::string config;
  std::string scenario;
  std::string json;
  std::string svg;
  std::string logs;
  std::string reference_model;
  std::optional<uint64_t> seed;
  double time_scale = 1.0;
  std::optional<double> grace_s;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "tessera chaos: %s\n", what.c_str());
  return 2;
}

std::string self_path() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : self.string();
}

/// Makes the key file `file` names if it is missing (32 random bytes as
/// hex), created with mode 600 and O_EXCL, so it is never readable by
/// others, not even for a moment, and a concurrent maker does not
/// overwrite it; `what` names it in messages. "" or why not.
std::string ensure_key_file(const std::string& file, const std::string& what) {
  if (file.empty() || std::filesystem::exists(file))
    return {};
  std::ifstream random{"/dev/urandom", std::ios::binary};
  unsigned char bytes[32];
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    return "cannot read /dev/urandom for " + what;
  std::string text;
  for (unsigned char b : bytes) {
    static const char* hex = "0123456789abcdef";
    text += hex[b >> 4];
    text += hex[b & 15];
  }
  text += '\n';
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return errno == EEXIST ? std::string{} : "cannot create " + what + " " + file + ": " + std::strerror(errno);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written)
    return "cannot write " + what + " " + file;
  std::fprintf(stderr, "tessera chaos: made %s %s (mode 600)\n", what.c_str(), file.c_str());
  return {};
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path};
  out << text;
  return static_cast<bool>(out);
}

int run_chaos_command(const chaos_args& a) {
  auto cfg = cluster::load_cluster_config(a.config);
  if (!cfg)
    return fail(error_message(cfg.error()));
  if (auto err = ensure_key_file(cfg->cluster_secret_file, "the cluster secret"); !err.empty())
    return fail(err);
  if (auto err = ensure_key_file(cfg->admin_key_file, "the admin key"); !err.empty())
    return fail(err);
  auto sc = chaos::load_scenario(a.scenario);
  if (!sc)
    return fail(error_message(sc.error()));
  chaos::chaos_options o;
  o.run = chaos::scale_scenario(std::move(*sc), a.time_scale);
  if (a.seed)
    o.run.seed = *a.seed;
  if (a.grace_s)
    o.run.grace_s = *a.grace_s;
  if (cfg->model.empty()) {
    auto d = ensure_demo_model();
    if (!d)
      return fail(error_text(d.error()));
    o.model_dir = *d;
  } else {
    o.model_dir = cfg->model;
    if (!std::filesystem::exists(o.model_dir / "config.json"))
      return fail(a.config + ": model " + cfg->model + " has no config.json (write a test model with `tessera model " +
                  "init --shape nano --out " + cfg->model + "`)");
  }
  o.reference_model_dir = a.reference_model;
  o.program = self_path();
  o.config_file = a.config;
  o.backend = actors::detail::backend_choice_of(*cfg);
  o.config = std::move(*cfg);
  if (o.run.uses_faults()) {
    // Fault plans go to POST /admin/faults, which takes the admin key.
    if (o.config.admin_key_file.empty())
      return fail(a.config + ": scenario " + a.scenario + " sets fault plans, which the nodes take only with "
                  "the admin key: add admin_key_file = \"admin.key\" (tessera chaos makes the file)");
    o.node_args.push_back("--fault-injection");
  }
  o.log_dir = !a.logs.empty() ? std::filesystem::path{a.logs}
                              : std::filesystem::temp_directory_path() /
                                  ("tessera-chaos-" + o.run.name + "-" + std::to_string(getpid()));
  o.command = "tessera chaos --config " + a.config + " --scenario " + a.scenario + " --seed " +
              std::to_string(o.run.seed);
  if (a.time_scale != 1.0)
    o.command += " --time-scale " + std::to_string(a.time_scale);
  o.say = [](const std::string& line) { std::fprintf(stderr, "tessera chaos: %s\n", line.c_str()); };
  auto report = chaos::run_chaos(o);
  if (!report)
    return fail(error_message(report.error()));
  std::printf("%s", chaos::render_table(*report).c_str());
  std::fflush(stdout);
  if (!a.json.empty() && !write_file(a.json, chaos::report_json(*report)))
    return fail("cannot write " + a.json);
  if (!a.svg.empty() && !write_file(a.svg, chaos::render_timeline_svg(*report)))
    return fail("cannot write " + a.svg);
  return chaos::passed(*report) ? 0 : 1;
}

} // namespace

command add_chaos_command(CLI::App& app) {
  auto* sub = app.add_subcommand("chaos", "Start a cluster, run a seeded load with known answers, apply a "
                                          "scenario's timed faults, and report wrong, failed and lost requests");
  auto a = std::make_shared<chaos_args>();
  sub->add_option("--config", a->config, "The cluster's TOML config (every node of it is started)")->required();
  sub->add_option("--scenario", a->scenario, "The scenario's TOML (configs/chaos/*.toml)")->required();
  sub->add_option("--json", a->json, "Write the report (every request, event and health change) here");
  sub->add_option("--svg", a->svg, "Write the timeline (requests by outcome, events, health) here");
  sub->add_option("--seed", a->seed, "The load's seed (default: the scenario's)");
  sub->add_option("--time-scale", a->time_scale,
                  "Multiply the scenario's duration and event times by this (0.25: a short version)")
    ->capture_default_str()
    ->check(CLI::Range(0.01, 100.0));
  sub->add_option("--grace", a->grace_s, "Seconds answers may still come after the load (default: the scenario's)")
    ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--logs", a->logs, "Folder for the nodes' logs (default: a new one under the temp folder)");
  sub->add_option("--reference-model", a->reference_model,
                  "Compute the right answers with this model folder instead of the config's (to check that the "
                  "harness catches wrong answers: every answer is then wrong)");
  sub->footer("Exit code: 0 when no request was wrong or lost, 1 when some were, 2 when the run could not be "
              "made (bad config or scenario, a node that did not start).");
  return {sub, [a] { return run_chaos_command(*a); }};
}

} // namespace tessera::cli
