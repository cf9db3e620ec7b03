#pragma once
/// @file
/// The Slurm launcher: the whole cluster as one batch job. It copies the
/// cluster config and secret into the rack's state_dir (which every host
/// of the job must see: a shared file system), writes an sbatch script with
/// one `srun --overlap --nodes=1 --ntasks=1 -w HOST` step per node
/// (backgrounded, then `wait`), submits it with `sbatch --parsable` and
/// waits for the frontend's /ready. With [placement] and no [[host]], the
/// hosts are the job's (`scontrol show hostnames $SLURM_JOB_NODELIST`):
/// the script puts their names into the config before the steps start.
/// stop is `scancel`; status is `squeue` and the frontend's /health. The
/// job id is kept in <local_dir>/job_id.

#include <ostream>
#include <string>

#include <caf/error.hpp>

#include "launch/launcher.hpp"
#include "launch/plan.hpp"

namespace tessera::launch {

/// The batch script for plan `p` (`bin`: tessera on the hosts).
[[nodiscard]] std::string sbatch_script(const launch_plan& p, const std::string& bin);

/// Submits the job and waits for /ready. Errors name the job's state and
/// hold the end of its output and of its nodes' logs.
[[nodiscard]] caf::error slurm_start(const launch_plan& p, const launch_options& o, std::ostream& out);

/// Cancels the job and waits until it is gone.
[[nodiscard]] caf::error slurm_stop(const launch_plan& p, const launch_options& o, std::ostream& out);

/// Prints the job's squeue line and the frontend's /health; error when the
/// job is not running or /health is not 200.
[[nodiscard]] caf::error slurm_status(const launch_plan& p, const launch_options& o, std::ostream& out);

} // namespace tessera::launch
