#include "launch/slurm_launcher.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <caf/sec.hpp>

#include "cluster/nearest_name.hpp"
#include "common/error.hpp"
#include "common/text_tail.hpp"

namespace tessera::launch {

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

caf::error failed(const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, what);
}

std::string read_file(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

bool digits(const std::string& s) {
  return !s.empty() && s.size() < 20 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The job id recorded by start, or an error saying there is none.
caf::expected<std::string> recorded_job(const launch_options& o) {
  const auto f = o.job_dir / "job_id";
  std::string id = read_file(f);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' '))
    id.pop_back();
  if (id.empty())
    return failed("no Slurm job recorded in " + f.string() +
                  ": was this rack started with `tessera launch RACK slurm start` (and the same --state-dir)?");
  if (!digits(id))
    return failed(f.string() + " holds " + cluster::quote_input(id) + ", not a Slurm job id");
  return id;
}

/// The job's state (RUNNING, PENDING, ...), or "" once squeue no longer
/// lists it.
caf::expected<std::string> job_state(const runner& run, const std::string& job) {
  auto r = run.run({"squeue", "-h", "-j", job, "-o", "%T"}, 30s);
  if (!r)
    return r.error();
  std::string s = r->output;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  // An ended job: squeue fails with "Invalid job id" or prints nothing.
  if (r->exit_code != 0)
    return std::string{};
  return s;
}

/// The end of the job's output and of each node's log.
std::string job_logs(const launch_plan& p, const std::string& job) {
  const fs::path dir = p.spec.state_dir;
  const auto output = dir / ("job-" + job + ".out");
  std::string out = "the end of the job's output (" + output.string() + "):\n" + file_tail(output, 10);
  for (const auto& n : p.nodes) {
    const auto log = dir / ("job-" + job) / (n.id + ".log");
    if (fs::exists(log))
      out += "node " + n.id + " (" + log.string() + "):\n" + file_tail(log, 10);
  }
  return out;
}

} // namespace

std::string sbatch_script(const launch_plan& p, const std::string& bin) {
  const auto& r = p.spec;
  const auto& state = r.state_dir;
  std::string s = "#!/bin/bash\n# tessera launch: rack " + r.name + ", " + std::to_string(p.nodes.size()) +
                  " nodes on " + std::to_string(p.hosts.size()) + " hosts, one srun step each.\n";
  s += "#SBATCH --job-name=tessera-" + r.name + "\n#SBATCH --nodes=" + std::to_string(p.hosts.size()) +
       "\n#SBATCH --ntasks-per-node=1\n#SBATCH --chdir=" + state + "\n#SBATCH --output=" + state + "/job-%j.out\n";
  if (!r.slurm.partition.empty())
    s += "#SBATCH --partition=" + r.slurm.partition + "\n";
  if (!r.slurm.time.empty())
    s += "#SBATCH --time=" + r.slurm.time + "\n";
  if (!p.hosts_from_allocation) {
    std::string list;
    for (const auto& h : p.hosts)
      list += (list.empty() ? "" : ",") + h.name;
    s += "#SBATCH --nodelist=" + list + "\n";
  }
  for (const auto& a : r.slurm.sbatch_args)
    s += "#SBATCH " + a + "\n";
  s += "set -u\nstate=" + state + "\njob=\"$state/job-$SLURM_JOB_ID\"\nmkdir -p \"$job\" || exit 1\n";
  s += "hosts=($(scontrol show hostnames \"$SLURM_JOB_NODELIST\"))\n";
  s += "if [ ${#hosts[@]} -lt " + std::to_string(p.hosts.size()) +
       " ]; then\n  echo \"tessera launch: the job has ${#hosts[@]} hosts, the rack needs " +
       std::to_string(p.hosts.size()) + "\" >&2\n  exit 1\nfi\nprintf '%s\\n' \"${hosts[@]}\" > \"$job/hosts\"\n";
  if (p.hosts_from_allocation) {
    s += "# The allocation's hosts into the config (slurm-host-<k> -> the k-th host).\nsed";
    for (size_t k = 0; k < p.hosts.size(); ++k)
      s += " -e \"s/\\\"slurm-host-" + std::to_string(k) + ":/\\\"${hosts[" + std::to_string(k) + "]}:/\"";
    s += " \"$state/cluster.toml\" > \"$job/cluster.toml\" || exit 1\n";
  } else {
    s += "cp \"$state/cluster.toml\" \"$job/cluster.toml\" || exit 1\n";
  }
  for (const auto& n : p.nodes) {
    const std::string host =
      p.hosts_from_allocation ? "\"${hosts[" + std::to_string(n.host) + "]}\"" : p.host_of(n).name;
    s += "srun --overlap --nodes=1 --ntasks=1 -J " + n.id + " -w " + host;
    if (n.gpu >= 0)
      s += " --export=ALL,CUDA_VISIBLE_DEVICES=" + std::to_string(n.gpu);
    s += " " + bin + " node --config \"$job/cluster.toml\" --node " + n.id + " > \"$job/" + n.id + ".log\" 2>&1 &\n";
  }
  s += "wait\n";
  return s;
}

caf::error slurm_start(const launch_plan& p, const launch_options& o, std::ostream& out) {
  const runner run{o.dry_run, out};
  const auto& state = p.spec.state_dir;
  const bool secret = !p.spec.cluster_secret_file.empty();
  if (secret && !o.dry_run && !fs::is_regular_file(p.spec.cluster_secret_file))
    return failed("the cluster secret file " + p.spec.cluster_secret_file +
                  " does not exist: make one (head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE)");
  if (!o.dry_run)
    if (auto job = recorded_job(o))
      if (auto st = job_state(run, *job); st && !st->empty())
        return failed("the rack's job " + *job + " is " + *st + ": stop it first (tessera launch RACK slurm stop)");
  auto config = write_cluster_config(p, o, secret ? state + "/cluster.secret" : "", out);
  if (!config)
    return config.error();
  const auto script_file = o.local_dir / "tessera.sbatch";
  const auto script = sbatch_script(p, host_binary(p, o));
  if (auto err = write_text_file(script_file, script, fs::perms::owner_read | fs::perms::owner_write))
    return err;
  if (o.dry_run) {
    out << "# the batch script, " << script_file.string() << ":\n";
    std::istringstream lines{script};
    for (std::string line; std::getline(lines, line);)
      out << "#   " << line << "\n";
  }
  // The state folder must be one every host sees (the job's steps read the
  // config there and write their logs there).
  if (auto r = run.must("making " + state, {"mkdir", "-p", state}, 30s); !r)
    return r.error();
  if (auto r = run.must("copying the cluster config",
                        {"install", "-m", "600", config->string(), state + "/cluster.toml"}, 30s);
      !r)
    return r.error();
  if (secret)
    if (auto r = run.must("copying the cluster secret",
                          {"install", "-m", "600", p.spec.cluster_secret_file, state + "/cluster.secret"}, 30s);
        !r)
      return r.error();
  auto sub = run.must("sbatch", {"sbatch", "--parsable", script_file.string()}, 60s);
  if (!sub)
    return sub.error();
  if (o.dry_run) {
    out << "# then: record the job id in " << (o.job_dir / "job_id").string() << " and wait up to "
        << o.ready_timeout.count() << " s for http://" << p.host_of(p.frontend()).address << ":" << p.http_port
        << "/ready (200)\n";
    return {};
  }
  // "<id>" or "<id>;<cluster>".
  std::string job = sub->output.substr(0, sub->output.find_first_of(";\n"));
  if (!digits(job))
    return failed("sbatch --parsable printed " + cluster::quote_input(sub->output) + ", not a job id");
  if (auto err = write_text_file(o.job_dir / "job_id", job + "\n", fs::perms::owner_read | fs::perms::owner_write))
    return err;
  out << "submitted job " << job << " (output " << state << "/job-" << job << ".out)" << std::endl;
  // Until the job runs and its script has written the hosts.
  const auto deadline = std::chrono::steady_clock::now() + o.ready_timeout;
  std::string front = p.host_of(p.frontend()).address;
  const auto hosts_file = fs::path{state} / ("job-" + job) / "hosts";
  auto job_alive = [&]() -> caf::error {
    auto st = job_state(run, job);
    if (!st)
      return st.error();
    if (st->empty() || (*st != "RUNNING" && *st != "PENDING" && *st != "CONFIGURING"))
      return failed("job " + job + " is " + (st->empty() ? std::string{"gone"} : *st) +
                    " before the cluster was ready;\n" + job_logs(p, job));
    return {};
  };
  // A node whose step ended (missing from the job's running steps twice in
  // a row: a step just started may not be listed yet) did not come up.
  std::map<std::string, int> missing;
  auto steps_alive = [&]() -> caf::error {
    if (auto err = job_alive())
      return err;
    auto r = run.run({"squeue", "-h", "-s", "-j", job, "-o", "%j"}, 30s);
    if (!r || r->exit_code != 0)
      return {};
    std::set<std::string> running;
    std::istringstream lines{r->output};
    for (std::string name; std::getline(lines, name);)
      running.insert(name);
    std::string dead;
    for (const auto& n : p.nodes) {
      const int times = running.contains(n.id) ? 0 : missing[n.id] + 1;
      missing[n.id] = times;
      if (times >= 2) {
        const auto log = fs::path{state} / ("job-" + job) / (n.id + ".log");
        dead += "node " + n.id + " (job " + job + ") is not running; the end of its log (" + log.string() + "):\n" +
                file_tail(log, 20);
      }
    }
    return dead.empty() ? caf::error{} : failed(dead);
  };
  // Half a cluster serves nothing: a job that did not come up is cancelled.
  auto cancelled = [&](const std::string& why) {
    auto r = run.run({"scancel", job}, 60s);
    return failed(why + "\n" +
                  (r && r->exit_code == 0 ? "job " + job + " was cancelled" : "scancel " + job + " failed too"));
  };
  for (;;) {
    if (auto err = job_alive())
      return cancelled(error_message(err));
    std::vector<std::string> hosts;
    std::istringstream lines{read_file(hosts_file)};
    for (std::string h; std::getline(lines, h);)
      hosts.push_back(h);
    if (hosts.size() >= p.hosts.size()) {
      if (p.hosts_from_allocation)
        front = hosts[p.frontend().host];
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      auto why = run.run({"squeue", "-h", "-j", job, "-o", "%T %r"}, 30s);
      return cancelled("job " + job + " did not start within " + std::to_string(o.ready_timeout.count()) +
                       " s (squeue: " + (why ? why->output : std::string{"?"}) + ")");
    }
    std::this_thread::sleep_for(500ms);
  }
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
  out << "job " << job << " is running; waiting for http://" << front << ":" << p.http_port << "/ready ..."
      << std::endl;
  bool died = false;
  if (auto err = wait_ready(front, p.http_port, std::max(left, std::chrono::seconds{1}), [&] {
        auto dead = steps_alive();
        died = static_cast<bool>(dead);
        return dead;
      }))
    return cancelled(error_message(err) + (died ? std::string{} : "\n" + job_logs(p, job)));
  out << "rack " << p.spec.name << " is ready: http://" << front << ":" << p.http_port << " (job " << job << ")\n";
  return {};
}

caf::error slurm_stop(const launch_plan& p, const launch_options& o, std::ostream& out) {
  const runner run{o.dry_run, out};
  auto job = recorded_job(o);
  if (!job && o.dry_run) {
    out << "+ scancel <the job id in " << (o.job_dir / "job_id").string() << ">\n";
    return {};
  }
  if (!job)
    return job.error();
  auto cancel = run.run({"scancel", *job}, 60s);
  if (!cancel)
    return cancel.error();
  if (o.dry_run)
    return {};
  if (cancel->exit_code != 0) {
    // A job that already ended is stopped.
    auto st = job_state(run, *job);
    if (!st || !st->empty())
      return failed("scancel " + *job + " failed (exit " + std::to_string(cancel->exit_code) + ")\n" +
                    tail_lines(cancel->output, 10));
  }
  const auto deadline = std::chrono::steady_clock::now() + o.stop_grace + 60s;
  for (;;) {
    auto st = job_state(run, *job);
    if (!st)
      return st.error();
    if (st->empty() || *st == "CANCELLED" || *st == "COMPLETED" || *st == "FAILED")
      break;
    if (std::chrono::steady_clock::now() > deadline)
      return failed("job " + *job + " is still " + *st + " after scancel");
    std::this_thread::sleep_for(500ms);
  }
  std::error_code ec;
  fs::remove(o.job_dir / "job_id", ec);
  out << "job " << *job << " of rack " << p.spec.name << " cancelled\n";
  return {};
}

caf::error slurm_status(const launch_plan& p, const launch_options& o, std::ostream& out) {
  const runner run{o.dry_run, out};
  auto job = recorded_job(o);
  if (!job && o.dry_run) {
    out << "+ squeue -h -j <the job id in " << (o.job_dir / "job_id").string() << "> -o '%i %T %M %N'\n";
    return {};
  }
  if (!job)
    return job.error();
  auto r = run.must("squeue", {"squeue", "-h", "-j", *job, "-o", "%i %T %M %N"}, 30s);
  if (o.dry_run)
    return {};
  std::string line = r ? r->output : std::string{};
  while (!line.empty() && line.back() == '\n')
    line.pop_back();
  if (line.empty()) {
    out << "job " << *job << ": not in the queue (ended)\n";
    return failed("job " + *job + " of rack " + p.spec.name + " is not running");
  }
  out << "job " << line << "\n";
  std::string front = p.host_of(p.frontend()).address;
  if (p.hosts_from_allocation) {
    std::istringstream lines{read_file(fs::path{p.spec.state_dir} / ("job-" + *job) / "hosts")};
    std::vector<std::string> hosts;
    for (std::string h; std::getline(lines, h);)
      hosts.push_back(h);
    if (hosts.size() > p.frontend().host)
      front = hosts[p.frontend().host];
  }
  bool healthy = false;
  out << health_line(front, p.http_port, healthy) << "\n";
  if (!healthy)
    return failed("the frontend of rack " + p.spec.name + " is not healthy");
  return {};
}

} // namespace tessera::launch
