#!/usr/bin/env bash
# Replays a Mooncake-format trace against one `tessera serve` per
# configuration (routing policy x KV cache size) and prints their results
# side by side (`tessera bench trace --compare`).
#
#   scripts/bench-trace.sh TRACE OUT_DIR [more `tessera bench trace` options]
#
# Environment (defaults in brackets):
#   TESSERA      the tessera binary [build/release/cli/tessera]
#   SERVER_ARGS  arguments every server gets, e.g.
#                "--engine sim --prefill 4 --decode 4" [--mode agg --decode 1]
#   POLICIES     router policies (--router-policy) to compare [kv round-robin]
#   CACHE_FLAG   the server option that sets the cache size [--kv-cache-mb]
#   CACHE_SIZES  its values to compare [256 1024]
#
# Writes OUT_DIR/<policy>_<size>.json and .svg per configuration, and
# OUT_DIR/table.txt. Each configuration runs on a fresh server, so no cache
# carries over from the one before.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,18p' "$0" >&2
  exit 2
fi
trace=$1
out=$2
shift 2
cd "$(dirname "$0")/.."
tessera=${TESSERA:-build/release/cli/tessera}
server_args=${SERVER_ARGS:---mode agg --decode 1}
mkdir -p "$out"
results=()
status=0
cache_flag=${CACHE_FLAG:---kv-cache-mb}
for policy in ${POLICIES:-kv round-robin}; do
  for size in ${CACHE_SIZES:-256 1024}; do
    name="${policy}_${size}"
    args="$server_args --router-policy $policy $cache_flag $size"
    echo "== $name: tessera serve $args" >&2
    "$tessera" bench trace --trace "$trace" --spawn-server --server-args "$args" \
      --label "$policy, $cache_flag $size" --json "$out/$name.json" --svg "$out/$name.svg" "$@" || status=1
    [[ -f "$out/$name.json" ]] && results+=("$out/$name.json")
  done
done
if [[ ${#results[@]} -gt 0 ]]; then
  "$tessera" bench trace --compare "${results[@]}" | tee "$out/table.txt"
fi
exit $status
