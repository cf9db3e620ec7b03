#pragma once
/// @file
/// Preflight: what `tessera serve`, `tessera node` and `tessera check`
/// verify before anything starts (before a model is loaded), so that an
/// operator sees every problem at once, each naming the flag or file and
/// the fix, instead of the first one after a minute of loading.
///
/// A preflight_report collects check_results; the checks here are the
/// ones below the actors and the engine: a port to listen on, the kv
/// store's disk tier, the cluster secret. (The CLI adds the config and the
/// model folder.)

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessera::cluster {

/// How one check ended.
enum class check_status {
  ok,
  warning, // worth saying, not worth refusing to start
  failed,  // the process would fail or misbehave: refuse to start
  skipped, // not applicable here (a remote host's port, port 0)
};

/// "ok", "warning", "failed", "skipped".
[[nodiscard]] const char* to_string(check_status s);

/// One check's outcome.
struct check_result {
  /// The node checked ("" for the whole cluster, or a single process).
  std::string node;
  /// What kind of check: config, port, disk, model, secret, reachable,
  /// health, models.
  std::string check;
  /// The flag, key, file or address checked ("--port 8000",
  /// "node[1].address 127.0.0.1:14001").
  std::string subject;
  check_status status = check_status::ok;
  /// What was found; for failed and warning, also the fix.
  std::string detail;
};

/// Every check's outcome, in the order they ran. Not thread-safe.
class preflight_report {
public:
  /// Appends `r`.
  void add(check_result r);
  /// Appends a result with status ok, failed, warning or skipped.
  void ok(const std::string& node, const std::string& check, const std::string& subject, const std::string& detail);
  void fail(const std::string& node, const std::string& check, const std::string& subject,
            const std::string& detail);
  void warn(const std::string& node, const std::string& check, const std::string& subject,
            const std::string& detail);
  void skip(const std::string& node, const std::string& check, const std::string& subject,
            const std::string& detail);

  /// Every result, in the order added.
  [[nodiscard]] const std::vector<check_result>& results() const { return results_; }
  /// Results with status failed: a process refuses to start (exit 2).
  [[nodiscard]] size_t failures() const;
  /// Results with status warning.
  [[nodiscard]] size_t warnings() const;

  /// The failures and warnings, one "  - subject: detail" line each under
  /// a heading ("<program>: 2 problems found before start:"), for stderr.
  /// Empty when there are none.
  [[nodiscard]] std::string problems_text(const std::string& program) const;
  /// Every result as a table (one line each: status, node, check,
  /// subject, detail) and a summary line, for `tessera check`.
  [[nodiscard]] std::string table_text() const;
  /// {"ok": bool, "failures": n, "warnings": n, "checks": [{node, check,
  /// subject, status, detail}, ...]}.
  [[nodiscard]] std::string json_text() const;

private:
  std::vector<check_result> results_;
};

/// Checks that host:port can be listened on, by binding and closing it
/// (try_listen). `subject` names the flag or key ("--port 8000"). Port 0
/// (any free port) is skipped.
void check_listen(preflight_report& report, const std::string& node, const std::string& subject,
                  const std::string& host, uint16_t port);

/// Checks the kv store's disk tier at `dir`, which `flag` names
/// (--kv-store-disk-dir, kvstore_disk_dir): the folder exists or can be
/// made (a probe directory is made and removed beside it; nothing is
/// left behind), files can be written in it, and its file system has room
/// for `capacity_bytes` (statvfs free space plus what the tier already
/// uses there). `capacity_flag` names the setting that lowers the need.
/// A problem is a warning, not a failure: the tier is a cache, and a node
/// whose tier cannot be used runs on host memory (kvstore/disk_recovery.hpp).
void check_disk_tier(preflight_report& report, const std::string& node, const std::string& flag,
                     const std::filesystem::path& dir, uint64_t capacity_bytes, const std::string& capacity_flag);

/// One node's disk tier, for check_shared_disks.
struct disk_tier_use {
  std::string node;
  std::filesystem::path dir;
  uint64_t capacity_bytes = 0;
};

/// Where several of `tiers` (nodes on this machine) share a file system,
/// checks that it has room for all of them together (check_disk_tier
/// checks each alone). One result per shared file system (ok, or a
/// warning); none where every tier has a disk of its own.
void check_shared_disks(preflight_report& report, const std::vector<disk_tier_use>& tiers,
                        const std::string& capacity_flag);

/// Checks the cluster secret file (load_cluster_secret: present, a
/// regular file, mode 600 or stricter, long enough). `subject` names the
/// key or flag that set it.
void check_secret_file(preflight_report& report, const std::string& node, const std::string& subject,
                       const std::filesystem::path& file);

/// With membership = "etcd": each of `endpoints` that is not on loopback
/// is a warning (plain http across a network: whoever is on the path reads
/// and can forge membership; peers are still authenticated by the cluster
/// secret), and at least one must accept a TCP connection within 1 s,
/// else a failure naming them all and how to start etcd.
void check_etcd(preflight_report& report, const std::string& node, const std::vector<std::string>& endpoints);

} // namespace tessera::cluster
