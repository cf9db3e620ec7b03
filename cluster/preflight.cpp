#include "cluster/preflight.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cluster/cluster_secret.hpp"
#include "cluster/etcd_client.hpp"
#include "cluster/host_port.hpp"
#include "cluster/net_probe.hpp"
#include "common/error.hpp"

namespace tessera::cluster {

namespace fs = std::filesystem;

namespace {

std::string mib_text(uint64_t bytes) {
  const uint64_t mib = bytes >> 20;
  if (mib >= 10240)
    return std::to_string(mib >> 10) + " GiB";
  return std::to_string(mib) + " MiB";
}

/// Bytes of the regular files under `dir` (what the disk tier already
/// holds there); errors count as nothing.
uint64_t bytes_under(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it{dir, fs::directory_options::skip_permission_denied, ec}, end;
       !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const auto n = it->file_size(size_ec);
      if (!size_ec)
        total += n;
    }
  }
  return total;
}

/// `dir` if it exists, else its deepest ancestor that does: where the
/// folder will be made, and whose file system it will be on.
fs::path deepest_existing(const fs::path& dir) {
  std::error_code ec;
  fs::path existing = dir;
  while (!existing.empty() && !fs::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing)
    existing = existing.parent_path();
  if (existing.empty() || !fs::exists(existing, ec))
    existing = ".";
  return existing;
}

} // namespace

const char* to_string(check_status s) {
  switch (s) {
    case check_status::ok:
      return "ok";
    case check_status::warning:
      return "warning";
    case check_status::failed:
      return "failed";
    case check_status::skipped:
      return "skipped";
  }
  return "?";
}

void preflight_report::add(check_result r) {
  results_.push_back(std::move(r));
}

void preflight_report::ok(const std::string& node, const std::string& check, const std::string& subject,
                          const std::string& detail) {
  add({node, check, subject, check_status::ok, detail});
}

void preflight_report::fail(const std::string& node, const std::string& check, const std::string& subject,
                            const std::string& detail) {
  add({node, check, subject, check_status::failed, detail});
}

void preflight_report::warn(const std::string& node, const std::string& check, const std::string& subject,
                            const std::string& detail) {
  add({node, check, subject, check_status::warning, detail});
}

void preflight_report::skip(const std::string& node, const std::string& check, const std::string& subject,
                            const std::string& detail) {
  add({node, check, subject, check_status::skipped, detail});
}

size_t preflight_report::failures() const {
  return static_cast<size_t>(std::count_if(results_.begin(), results_.end(),
                                           [](const check_result& r) { return r.status == check_status::failed; }));
}

size_t preflight_report::warnings() const {
  return static_cast<size_t>(std::count_if(results_.begin(), results_.end(),
                                           [](const check_result& r) { return r.status == check_status::warning; }));
}

std::string preflight_report::problems_text(const std::string& program) const {
  const size_t failed = failures();
  const size_t warned = warnings();
  if (failed + warned == 0)
    return {};
  std::string out = program + ": ";
  if (failed > 0)
    out += std::to_string(failed) + (failed == 1 ? " problem" : " problems") + " found before start" +
           (warned > 0 ? " (and " + std::to_string(warned) + (warned == 1 ? " warning" : " warnings") + ")" : "") +
           ":\n";
  else
    out += std::to_string(warned) + (warned == 1 ? " warning:\n" : " warnings:\n");
  for (const auto& r : results_) {
    if (r.status != check_status::failed && r.status != check_status::warning)
      continue;
    out += std::string{"  - "} + (r.status == check_status::warning ? "warning: " : "");
    if (!r.node.empty())
      out += "node '" + r.node + "': ";
    out += r.subject + ": " + r.detail + "\n";
  }
  return out;
}

std::string preflight_report::table_text() const {
  size_t node_w = 4, check_w = 5, subject_w = 7;
  for (const auto& r : results_) {
    node_w = std::max(node_w, r.node.size());
    check_w = std::max(check_w, r.check.size());
    subject_w = std::max(subject_w, std::min<size_t>(r.subject.size(), 48));
  }
  auto pad = [](const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); };
  std::string out = pad("STATUS", 8) + "  " + pad("NODE", node_w) + "  " + pad("CHECK", check_w) + "  " +
                    pad("SUBJECT", subject_w) + "  DETAIL\n";
  size_t counts[4] = {0, 0, 0, 0};
  for (const auto& r : results_) {
    ++counts[static_cast<size_t>(r.status)];
    out += pad(to_string(r.status), 8) + "  " + pad(r.node.empty() ? "-" : r.node, node_w) + "  " +
           pad(r.check, check_w) + "  " + pad(r.subject, subject_w) + "  " + r.detail + "\n";
  }
  out += std::to_string(counts[0]) + " ok, " + std::to_string(counts[1]) + " warnings, " +
         std::to_string(counts[2]) + " failed, " + std::to_string(counts[3]) + " skipped\n";
  return out;
}

std::string preflight_report::json_text() const {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& r : results_)
    checks.push_back({{"node", r.node},
                      {"check", r.check},
                      {"subject", r.subject},
                      {"status", to_string(r.status)},
                      {"detail", r.detail}});
  const nlohmann::json j{{"ok", failures() == 0},
                         {"failures", failures()},
                         {"warnings", warnings()},
                         {"checks", std::move(checks)}};
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_listen(preflight_report& report, const std::string& node, const std::string& subject,
                  const std::string& host, uint16_t port) {
  if (port == 0) {
    report.skip(node, "port", subject, "port 0: any free port is taken at start");
    return;
  }
  if (auto err = try_listen(host, port)) {
    // The subject already names the endpoint.
    auto why = error_message(err);
    if (const auto prefix = join_host_port(host, port) + ": "; why.starts_with(prefix))
      why = why.substr(prefix.size());
    report.fail(node, "port", subject, "cannot listen: " + why);
  }
  else
    report.ok(node, "port", subject, "free");
}

void check_disk_tier(preflight_report& report, const std::string& node, const std::string& flag,
                     const fs::path& dir, uint64_t capacity_bytes, const std::string& capacity_flag) {
  const std::string subject = flag + " " + dir.string();
  // The tier is a cache and never keeps a node from starting (the store
  // then runs on host memory only, kvstore/disk_recovery.hpp): what is
  // wrong with it is a warning, said before start rather than found later.
  const std::string without = "; the kv store would run on host memory only";
  std::error_code ec;
  const bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec)) {
    report.warn(node, "disk", subject,
                dir.string() + " is a file, not a folder: name a folder for the disk tier" + without);
    return;
  }
  const fs::path existing = deepest_existing(dir);
  if (!fs::is_directory(existing, ec)) {
    report.warn(node, "disk", subject,
                "cannot make " + dir.string() + ": " + existing.string() + " is not a folder (choose another path)" +
                  without);
    return;
  }
  // Write there for real: permissions, read-only mounts and full disks
  // all show up as a failed mkdir.
  const fs::path probe = existing / (".tessera-preflight-" + std::to_string(::getpid()));
  if (::mkdir(probe.c_str(), 0700) != 0) {
    const int err = errno;
    report.warn(node, "disk", subject,
                "cannot " + std::string{exists ? "write in " : "make folders in "} + existing.string() + ": " +
                  std::strerror(err) +
                  (err == EROFS    ? " (a read-only file system: choose a folder on a writable disk)"
                   : err == ENOSPC ? " (the disk is full: free space or choose another disk)"
                                   : " (fix its owner or mode, or choose another folder)") +
                  without);
    return;
  }
  ::rmdir(probe.c_str());
  struct statvfs vfs {};
  if (::statvfs(existing.c_str(), &vfs) != 0) {
    report.warn(node, "disk", subject, "cannot read the free space of " + existing.string() + ": " + std::strerror(errno));
    return;
  }
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t used_bytes = exists ? bytes_under(dir) : 0;
  const std::string where = exists ? "exists" : "will be made";
  if (free_bytes + used_bytes < capacity_bytes) {
    report.warn(node, "disk", subject,
                "the disk tier may grow to " + mib_text(capacity_bytes) + " (" + capacity_flag + ") but its disk has " +
                  mib_text(free_bytes) + " free" + (used_bytes > 0 ? " (+ " + mib_text(used_bytes) + " it already uses)" : "") +
                  ", and its writes fail once the disk is full: free space, or set " + capacity_flag +
                  " to at most " + std::to_string((free_bytes + used_bytes) >> 20));
    return;
  }
  report.ok(node, "disk", subject,
            where + ", writable, " + mib_text(free_bytes) + " free for up to " + mib_text(capacity_bytes));
}

void check_etcd(preflight_report& report, const std::string& node, const std::vector<std::string>& endpoints) {
  std::string down;
  bool any = false;
  for (const auto& url : endpoints) {
    auto ep = parse_etcd_url(url);
    if (!ep) {
      report.fail(node, "etcd", "etcd_endpoints", error_message(ep.error()));
      continue;
    }
    if (!is_loopback_host(ep->host))
      report.warn(node, "etcd", "etcd_endpoints " + url,
                  "plain http off this machine: anyone on the path can read the cluster's membership and forge "
                  "entries (a forged entry can only make nodes dial a wrong address: the cluster secret still "
                  "authenticates every peer); keep etcd on a trusted network");
    if (auto err = try_connect(ep->host, ep->port, std::chrono::milliseconds{1000}))
      down += (down.empty() ? "" : "; ") + url + ": " + error_message(err);
    else
      any = true;
  }
  if (any)
    report.ok(node, "etcd", "etcd_endpoints", "reachable");
  else if (!down.empty())
    report.fail(node, "etcd", "etcd_endpoints",
                "no etcd answers (" + down + "): start one (etcd --data-dir DIR --listen-client-urls URL "
                "--advertise-client-urls URL; README, Membership through etcd) or fix etcd_endpoints");
}

void check_secret_file(preflight_report& report, const std::string& node, const std::string& subject,
                       const fs::path& file) {
  auto s = load_cluster_secret(file);
  if (!s)
    report.fail(node, "secret", subject, error_message(s.error()));
  else
    report.ok(node, "secret", subject, "readable, mode 600, " + std::to_string(s->size()) + " bytes");
}

void check_shared_disks(preflight_report& report, const std::vector<disk_tier_use>& tiers,
                        const std::string& capacity_flag) {
  // Tiers on one file system (statvfs's f_fsid) share its free space.
  struct file_system {
    std::string nodes;
    uint64_t capacity_bytes = 0;
    uint64_t used_bytes = 0;
    uint64_t free_bytes = 0;
    size_t tiers = 0;
    std::string where;
  };
  std::vector<std::pair<unsigned long, file_system>> systems;
  for (const auto& t : tiers) {
    const auto existing = deepest_existing(t.dir);
    struct statvfs vfs {};
    if (::statvfs(existing.c_str(), &vfs) != 0)
      continue;
    auto it = std::find_if(systems.begin(), systems.end(), [&](const auto& s) { return s.first == vfs.f_fsid; });
    if (it == systems.end()) {
      systems.push_back({vfs.f_fsid, {}});
      it = systems.end() - 1;
      it->second.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
      it->second.where = existing.string();
    }
    auto& fsys = it->second;
    fsys.nodes += (fsys.nodes.empty() ? "" : ", ") + t.node;
    fsys.capacity_bytes += t.capacity_bytes;
    std::error_code ec;
    fsys.used_bytes += fs::exists(t.dir, ec) ? bytes_under(t.dir) : 0;
    ++fsys.tiers;
  }
  for (const auto& [id, fsys] : systems) {
    if (fsys.tiers < 2)
      continue;
    const std::string subject = "disk of " + fsys.where;
    if (fsys.free_bytes + fsys.used_bytes < fsys.capacity_bytes)
      report.warn("", "disk", subject,
                  "the disk tiers of nodes " + fsys.nodes + " share it and may grow to " +
                    mib_text(fsys.capacity_bytes) + " together, but it has " + mib_text(fsys.free_bytes) +
                    " free" + (fsys.used_bytes > 0 ? " (+ " + mib_text(fsys.used_bytes) + " they already use)" : "") +
                    ", and their writes fail once it is full: free space, or lower " + capacity_flag +
                    " to at most " +
                    std::to_string(((fsys.free_bytes + fsys.used_bytes) / fsys.tiers) >> 20));
    else
      report.ok("", "disk", subject,
                "nodes " + fsys.nodes + ": " + mib_text(fsys.capacity_bytes) + " together, " +
                  mib_text(fsys.free_bytes) + " free");
  }
}

} // namespace tessera::cluster
