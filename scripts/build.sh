#!/usr/bin/env bash
# Installs dependencies (if missing), configures and builds a preset.
# Usage: scripts/build.sh [preset]   (default: release). Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/install-deps.sh
if [ ! -f "build/$preset/build.ninja" ]; then
  cmake --preset "$preset" >/dev/null
fi
cmake --build "build/$preset" -j "$(nproc)"
