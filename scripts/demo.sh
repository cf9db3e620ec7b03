#!/usr/bin/env bash
# The main job: builds Tessera if needed and runs it on the built-in demo
# model (random weights). Extra arguments go to `tessera generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release >&2
exec build/release/cli/tessera generate "$@"
