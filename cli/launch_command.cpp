// `tessera launch RACK.toml ssh|slurm start|stop|status`: a cluster on a
// rack's hosts (launch/).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "launch/launcher.hpp"
#include "launch/rack.hpp"
#include "launch/slurm_launcher.hpp"
#include "launch/ssh_launcher.hpp"

namespace tessera::cli {

namespace {

struct launch_args {
  std::string rack;
  std::string launcher;
  std::string action;
  bool dry_run = false;
  std::string binary;
  std::string state_dir;
  double timeout_s = 120;
  double stop_grace_s = 20;
};

int fail(const std::string& what, int code = 1) {
  std::fprintf(stderr, "tessera launch: %s\n", what.c_str());
  return code;
}

int run_launch(const launch_args& a) {
  auto rack = launch::load_rack(a.rack);
  if (!rack)
    return fail("the rack has problems:\n" + error_message(rack.error()), 2);
  auto plan = launch::make_plan(*rack);
  if (!plan)
    return fail(error_message(plan.error()), 2);
  if (a.launcher == "ssh" && plan->hosts_from_allocation)
    return fail(a.rack + ": ssh needs [[host]] tables (the hosts come from an allocation only with slurm)", 2);
  if (!a.binary.empty() && !launch::is_safe_path(a.binary))
    return fail("--binary " + a.binary + ": use a path of letters, digits and -_./+", 2);
  launch::launch_options o;
  o.binary = a.binary;
  o.dry_run = a.dry_run;
  o.ready_timeout = std::chrono::seconds{static_cast<int64_t>(a.timeout_s)};
  o.stop_grace = std::chrono::seconds{static_cast<int64_t>(a.stop_grace_s)};
  // A dry run writes only into a temporary folder, removed afterwards.
  std::filesystem::path temp;
  o.job_dir = a.state_dir.empty() ? std::filesystem::path{"/tmp/tessera-launch-" + rack->name}
                                  : std::filesystem::path{a.state_dir};
  if (a.dry_run) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-launch-dry-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      return fail("cannot make a temporary folder");
    temp = tmpl;
    o.local_dir = temp;
  } else {
    o.local_dir = o.job_dir;
  }
  if (a.dry_run || a.action == "start")
    std::cout << launch::plan_text(*plan, a.launcher);
  if (a.dry_run)
    std::cout << "# " << a.launcher << " " << a.action << " (dry run: nothing is run; files go to "
              << temp.string() << ")\n";
  caf::error err;
  if (a.launcher == "ssh")
    err = a.action == "start" ? launch::ssh_start(*plan, o, std::cout)
          : a.action == "stop" ? launch::ssh_stop(*plan, o, std::cout)
                               : launch::ssh_status(*plan, o, std::cout);
  else
    err = a.action == "start" ? launch::slurm_start(*plan, o, std::cout)
          : a.action == "stop" ? launch::slurm_stop(*plan, o, std::cout)
                               : launch::slurm_status(*plan, o, std::cout);
  std::cout.flush();
  if (!temp.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp, ec);
  }
  if (err)
    return fail(error_message(err), a.action == "status" ? 3 : 1);
  return 0;
}

} // namespace

command add_launch_command(CLI::App& app) {
  auto* sub = app.add_subcommand("launch", "Start, stop or show a cluster on a rack's hosts over ssh or Slurm "
                                           "(a rack TOML: launch/rack.hpp, configs/racks/)");
  auto a = std::make_shared<launch_args>();
  sub->add_option("rack", a->rack, "The rack's TOML")->required();
  sub->add_option("launcher", a->launcher, "ssh or slurm")->required()->check(CLI::IsMember({"ssh", "slurm"}));
  sub->add_option("action", a->action, "start, stop or status")
    ->required()
    ->check(CLI::IsMember({"start", "stop", "status"}));
  sub->add_flag("--dry-run", a->dry_run,
                "Print the plan and every command; run nothing (needs no binary and no cluster)");
  sub->add_option("--binary", a->binary, "tessera on the hosts (overrides the rack's binary)");
  sub->add_option("--state-dir", a->state_dir,
                  "This machine's folder for the launch (the cluster config, the Slurm job id); default "
                  "/tmp/tessera-launch-<rack name>");
  sub->add_option("--timeout", a->timeout_s, "start: seconds to wait for the frontend's /ready")
    ->capture_default_str()
    ->check(CLI::Range(1.0, 86400.0));
  sub->add_option("--stop-grace", a->stop_grace_s, "stop: seconds between SIGTERM and SIGKILL (ssh)")
    ->capture_default_str()
    ->check(CLI::Range(0.0, 3600.0));
  return {sub, [a] { return run_launch(*a); }};
}

} // namespace tessera::cli
