#!/usr/bin/env bash
# Starts, stops or shows a Tessera cluster on a rack's hosts, over ssh or as
# one Slurm job: a thin wrapper of `tessera launch` (launch/rack.hpp, README.md
# "Launching on a rack").
#
#   scripts/launch.sh RACK.toml ssh|slurm start|stop|status [--dry-run] [--binary PATH] [--state-dir DIR]
#
# The binary is build/release/cli/tessera unless $TESSERA_BIN says otherwise.
set -euo pipefail
bin="${TESSERA_BIN:-$(dirname "$0")/../build/release/cli/tessera}"
[ $# -ge 3 ] || { echo "usage: scripts/launch.sh RACK.toml ssh|slurm start|stop|status [--dry-run] [...]" >&2; exit 2; }
[ -x "$bin" ] || { echo "no $bin: build first (scripts/build.sh)" >&2; exit 1; }
exec "$bin" launch "$@"
