#!/usr/bin/env bash
# The main job: builds Tessera if needed and runs `tessera serve` — the
# whole cluster in one process behind the OpenAI-compatible HTTP API on
# http://127.0.0.1:8000 — on the built-in demo model (random weights) unless
# --model is given. Extra arguments go to `tessera serve`. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release >&2
exec build/release/cli/tessera serve "$@"
