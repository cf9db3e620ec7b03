#pragma once
/// @file
/// A rack: the hosts a Tessera cluster is launched on (`tessera launch`),
/// read from TOML strictly: an unknown key (with the nearest known one), a
/// wrong type or a value out of range is an error naming the file, the line
/// and the key; every problem of a file is reported at once.
///
///   [rack]
///   name = "lab"                     # letters, digits, '-', '_'
///   model = "/models/m"              # the model folder on the hosts; "" = demo
///   served_model_name = "m"          # default: the folder's name
///   cluster_secret_file = "lab.secret" # here (relative to this file); copied
///                                    # to <state_dir>/cluster.secret
///   ports_base = 14100               # frontend HTTP; node i's transport: base+1+i
///   state_dir = "/tmp/tessera-lab"   # on the hosts: config, logs, pid files
///                                    # (Slurm: a folder every host shares)
///   binary = "tessera"               # tessera on the hosts (--binary overrides)
///   ssh_options = ["-o", "StrictHostKeyChecking=accept-new"]
///   [cluster]                        # any key of the cluster config
///   threads_per_worker = 4           # (cluster/cluster_config.hpp) but model,
///   kv_cache_mb = 4096               # served_model_name, transport,
///                                    # cluster_secret_file and node
///   [placement]                      # either this ...
///   prefill = 2                      # worker nodes to spread over the hosts'
///   decode = 4                       # GPUs (one GPU each); the frontend node
///   worker = 0                       # goes on the first host
///   [slurm]                          # only for `slurm`; all optional
///   partition = "gpu"
///   time = "1-00:00:00"
///   nodes = 2                        # placement with no [[host]]: hosts come
///   gpus_per_node = 8                # from the allocation (SLURM_JOB_NODELIST)
///   sbatch_args = ["--account=lab"]
///   [[host]]
///   name = "gpu-a"                   # the Slurm node name too
///   address = "10.0.0.1"             # what its nodes bind and are dialled at
///   ssh = "user@gpu-a"               # default: address
///   ssh_port = 22
///   ssh_identity = "~/.ssh/id_ed25519" # relative to this file unless absolute
///   gpus = 8
///   roles = ["frontend", "prefill", "decode"]  # ... or this: one node each

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace tessera::launch {

/// One [[host]].
struct rack_host {
  std::string name;
  std::string address;
  /// user@host (or host) for ssh and scp.
  std::string ssh;
  uint16_t ssh_port = 22;
  /// "" = ssh's default keys.
  std::string ssh_identity;
  int gpus = 0;
  /// One node per entry: frontend (with the router), prefill, decode or
  /// worker. Empty with [placement].
  std::vector<std::string> roles;
};

/// The [placement] table: worker nodes to place by GPU count.
struct rack_placement {
  int prefill = 0;
  int decode = 0;
  int worker = 0;
  [[nodiscard]] int total() const { return prefill + decode + worker; }
};

/// The [slurm] table.
struct rack_slurm {
  std::string partition;
  std::string time;
  /// Placement without [[host]]: this many hosts of gpus_per_node each.
  int nodes = 0;
  int gpus_per_node = 0;
  std::vector<std::string> sbatch_args;
};

/// A rack as read.
struct rack {
  std::string name;
  std::string model;
  std::string served_model_name;
  /// Resolved against the rack file's folder. "" = none (the nodes then
  /// refuse to start as a multi-node cluster).
  std::string cluster_secret_file;
  uint16_t ports_base = 14100;
  std::string state_dir;
  std::string binary = "tessera";
  std::vector<std::string> ssh_options;
  /// The [cluster] table as TOML text (key order: sorted), copied into the
  /// generated cluster config.
  std::string cluster_options;
  bool has_placement = false;
  rack_placement placement;
  rack_slurm slurm;
  std::vector<rack_host> hosts;
};

/// Reads rack TOML `text`; `file` names it in messages and resolves
/// relative paths. Errors (caf::sec::invalid_argument): every problem, one
/// a line, "<file>:<line>: <key> ...".
[[nodiscard]] caf::expected<rack> parse_rack(std::string_view text, const std::filesystem::path& file);

/// Whether `s` (a path or command for the hosts' shells) is of letters,
/// digits and -_./+ only, not starting with '-'.
[[nodiscard]] bool is_safe_path(std::string_view s);

/// parse_rack on the file's text.
[[nodiscard]] caf::expected<rack> load_rack(const std::filesystem::path& file);

} // namespace tessera::launch
