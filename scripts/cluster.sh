#!/usr/bin/env bash
# Starts, stops or shows a multi-process Tessera cluster on this machine from
# one config (configs/*.toml): one `tessera node` process per [[node]].
#
#   scripts/cluster.sh CONFIG start [--dry-run]   # start every node, wait for /health
#   scripts/cluster.sh CONFIG stop  [--dry-run]   # SIGTERM every node, wait for exit
#   scripts/cluster.sh CONFIG status
#   scripts/cluster.sh CONFIG check                # tessera check: preflight, or a running cluster's health
#
# start runs `tessera check --before-start` first (config, secret, model,
# ports, disk tier) and starts nothing if it finds a problem. --dry-run
# prints the commands and needs no built binary.
# Logs and pid files go to $TESSERA_RUN_DIR (default: /tmp/tessera-<config name>).
# The binary is build/release/cli/tessera unless $TESSERA_BIN says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:?usage: scripts/cluster.sh CONFIG start|stop|status|check [--dry-run]}"
action="${2:?usage: scripts/cluster.sh CONFIG start|stop|status|check [--dry-run]}"
dry=false
[ "${3:-}" = "--dry-run" ] && dry=true
bin="${TESSERA_BIN:-build/release/cli/tessera}"
run_dir="${TESSERA_RUN_DIR:-/tmp/tessera-$(basename "$config" .toml)}"

# Node ids and the frontend's HTTP address, read from the TOML with python3
# (tomllib is in Debian 12's Python 3.11).
read_config() {
  python3 - "$config" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    c = tomllib.load(f)
for n in c.get("node", []):
    http = n.get("http", "127.0.0.1:8000") if "frontend" in n.get("roles", []) else ""
    print(n["id"], http)
PY
}

run() {
  if $dry; then echo "+ $*"; else "$@"; fi
}

# The config's cluster_secret_file (relative to the config's folder), if any.
secret_file() {
  python3 - "$config" <<'PY'
import os, sys, tomllib
with open(sys.argv[1], "rb") as f:
    c = tomllib.load(f)
s = c.get("cluster_secret_file", "")
if s:
    print(s if os.path.isabs(s) else os.path.join(os.path.dirname(sys.argv[1]), s))
PY
}

case "$action" in
  start)
    [ -x "$bin" ] || $dry || { echo "no $bin: build first (scripts/build.sh)" >&2; exit 1; }
    run mkdir -p "$run_dir"
    secret="$(secret_file)"
    if [ -n "$secret" ] && [ ! -f "$secret" ]; then
      # One secret per cluster, readable by this user only.
      run sh -c "umask 077; head -c 32 /dev/urandom | base64 > '$secret'"
      $dry || echo "made the cluster secret $secret (mode 600; copy it to every host of the cluster)"
    fi
    # Every problem before anything starts (exit 2: nothing was started).
    if $dry; then
      echo "+ $bin check --config $config --before-start"
    elif ! "$bin" check --config "$config" --before-start > "$run_dir/check.txt"; then
      cat "$run_dir/check.txt" >&2
      echo "tessera check found problems (above); nothing was started" >&2
      exit 2
    fi
    url=""
    # Start in reverse order: earlier nodes are dialled by later ones, and
    # every node retries until its peers are up, so any order works.
    while read -r id http; do
      if $dry; then
        echo "+ $bin node --config $config --node $id > $run_dir/$id.log 2>&1 &"
      else
        "$bin" node --config "$config" --node "$id" > "$run_dir/$id.log" 2>&1 &
        echo $! > "$run_dir/$id.pid"
        echo "started node $id (pid $!, log $run_dir/$id.log)"
      fi
      [ -n "$http" ] && url="http://$http"
    done < <(read_config | tac)
    if [ -n "$url" ] && ! $dry; then
      for _ in $(seq 1 300); do
        if curl -sf "$url/health" > /dev/null; then
          echo "cluster ready: $url"
          exit 0
        fi
        sleep 0.2
      done
      echo "the cluster did not become healthy within 60 s; see $run_dir/*.log" >&2
      exit 1
    fi
    ;;
  stop)
    while read -r id http; do
      pid_file="$run_dir/$id.pid"
      if [ -f "$pid_file" ]; then
        pid=$(cat "$pid_file")
        run kill -TERM "$pid" 2>/dev/null || true
        if ! $dry; then
          for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
          kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
          rm -f "$pid_file"
          echo "stopped node $id"
        fi
      fi
    done < <(read_config)
    ;;
  status)
    while read -r id http; do
      pid_file="$run_dir/$id.pid"
      if [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
        echo "node $id: running (pid $(cat "$pid_file"))"
      else
        echo "node $id: stopped"
      fi
    done < <(read_config)
    ;;
  check)
    run "$bin" check --config "$config"
    ;;
  *)
    echo "unknown action '$action' (start, stop, status, check)" >&2
    exit 1
    ;;
esac
