#!/usr/bin/env bash
# Measures how long /health and /ready take to tell the truth when a node
# of a multi-process cluster dies or hangs, and to recover.
#
#   scripts/health-detect.sh [CONFIG] [--node ID] [--signal KILL|STOP|TERM]
#
# Defaults: configs/local-3proc.toml, node decode, SIGKILL. It copies the
# config to a temporary folder with every 127.0.0.1 port moved to a free
# one (so it runs beside a cluster already up), starts it with
# scripts/cluster.sh, waits for /ready 200, sends the signal to the node,
# polls /health and /ready every 100 ms until /ready is 503 and /health
# names the node's worker unhealthy, then brings the node back (SIGCONT
# after STOP, a restart after KILL or TERM) and polls until /ready is 200
# again. It prints each time and the bodies it saw, and stops the cluster.
# The binary is build/release/cli/tessera unless $TESSERA_BIN says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
config=configs/local-3proc.toml
node=decode
signal=KILL
while [ $# -gt 0 ]; do
  case "$1" in
    --node) node="$2"; shift 2 ;;
    --signal) signal="$2"; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 1 ;;
    *) config="$1"; shift ;;
  esac
done
bin="${TESSERA_BIN:-build/release/cli/tessera}"
[ -x "$bin" ] || { echo "no $bin: build first (scripts/build.sh)" >&2; exit 1; }
run_dir="$(mktemp -d /tmp/tessera-health-detect.XXXXXX)"
export TESSERA_RUN_DIR="$run_dir" TESSERA_BIN="$bin"

# The config with fresh ports; a relative model path stays valid.
python3 - "$config" "$run_dir/cluster.toml" <<'PY'
import os, re, socket, sys
src, dst = sys.argv[1], sys.argv[2]
text = open(src).read()
def free_port(_m):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    return f"127.0.0.1:{p}"
text = re.sub(r"127\.0\.0\.1:\d+", free_port, text)
folder = os.path.dirname(os.path.abspath(src))
text = re.sub(r'^(model\s*=\s*")([^"/][^"]*)"', lambda m: f'{m.group(1)}{os.path.join(folder, m.group(2))}"',
              text, flags=re.M)
open(dst, "w").write(text)
PY
cfg="$run_dir/cluster.toml"
trap 'scripts/cluster.sh "$cfg" stop > /dev/null 2>&1 || true' EXIT
scripts/cluster.sh "$cfg" start > "$run_dir/start.txt" || { cat "$run_dir/start.txt"; exit 1; }
url="http://$(python3 - "$cfg" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
print(next(n["http"] for n in c["node"] if "frontend" in n.get("roles", [])))
PY
)"
pid="$(cat "$run_dir/$node.pid")"

python3 - "$url" "$node" "$signal" "$pid" "$bin" "$cfg" "$run_dir" <<'PY'
import json, os, signal, subprocess, sys, time, urllib.error, urllib.request
url, node, sig, pid, binary, cfg, run_dir = sys.argv[1:8]
pid = int(pid)

def get(path):
    try:
        with urllib.request.urlopen(url + path, timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except Exception as e:
        return 0, str(e)

def node_unhealthy(body):
    try:
        ws = json.loads(body).get("worker_states", [])
    except ValueError:
        return False
    return any(w["node"] == node and w["state"] == "unhealthy" for w in ws)

def wait(cond, what, limit=30.0):
    start = time.monotonic()
    while time.monotonic() - start < limit:
        h, r = get("/health"), get("/ready")
        if cond(h, r):
            return time.monotonic(), h, r
        time.sleep(0.1)
    sys.exit(f"{what}: not within {limit} s; last /health {h}, /ready {r}")

_, h, r = wait(lambda h, r: r[0] == 200 and h[0] == 200, "ready before the fault")
print(f"before: /ready {r[0]} {r[1]}")
t0 = time.monotonic()
os.kill(pid, getattr(signal, "SIG" + sig))
t_ready, h, r = wait(lambda h, r: r[0] == 503, "/ready 503")
t_health, h2, _ = wait(lambda h, r: node_unhealthy(h[1]), "/health naming the node")
print(f"SIG{sig} to node {node}: /ready 503 after {t_ready - t0:.2f} s, "
      f"/health {h2[0]} naming it unhealthy after {t_health - t0:.2f} s")
print(f"  /ready  {r[0]} {r[1]}")
print(f"  /health {h2[0]} {h2[1]}")
t1 = time.monotonic()
if sig == "STOP":
    os.kill(pid, signal.SIGCONT)
    how = "SIGCONT"
else:
    while True:  # until the old process is gone (its parent is not us)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    log = open(os.path.join(run_dir, node + ".log"), "a")
    p = subprocess.Popen([binary, "node", "--config", cfg, "--node", node], stdout=log, stderr=log)
    open(os.path.join(run_dir, node + ".pid"), "w").write(str(p.pid))
    how = "restart"
t_back, h, r = wait(lambda h, r: r[0] == 200 and h[0] == 200 and not node_unhealthy(h[1]), "/ready 200 again")
print(f"{how} of node {node}: /ready and /health 200 after {t_back - t1:.2f} s")
print(f"  /health {h[0]} {h[1]}")
PY
