#!/bin/sh
# Runs every shipped chaos scenario (configs/chaos/*.toml) against a
# cluster config with `tessera chaos`, keeps each run's JSON and SVG in OUT
# (the nodes' logs in $TMPDIR/tessera-chaos-logs/<scenario>), and prints one
# markdown table of them all (bench/README.md).
#
#   scripts/chaos-all.sh [--tessera BIN] [--config configs/chaos/cluster.toml]
#                        [--out bench/results/chaos] [-- extra tessera chaos args]
#
# The config's model must exist (configs/chaos/cluster.toml: tessera model
# init --shape tiny --out /tmp/tessera-chaos-tiny). Exit 1 if any scenario
# had a wrong or lost request. With the default config it also runs the
# scenarios of each folder in configs/chaos/ (routers/, disk/) against
# that folder's cluster.toml.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="$here/build/release/cli/tessera"
config="$here/configs/chaos/cluster.toml"
out="$here/bench/results/chaos"
while [ $# -gt 0 ]; do
  case "$1" in
    --tessera) bin="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "chaos-all.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
status=0
for scenario in "$here"/configs/chaos/*.toml; do
  name="$(basename "$scenario" .toml)"
  case "$name" in cluster*) continue ;; esac
  echo "== $name" >&2
  code=0
  "$bin" chaos --config "$config" --scenario "$scenario" --json "$out/$name.json" --svg "$out/$name.svg" \
    --logs "${TMPDIR:-/tmp}/tessera-chaos-logs/$name" "$@" || code=$?
  [ "$code" -ne 0 ] && status=1
done
# The scenarios in configs/chaos/<folder>/ (routers: two routers; disk:
# kv stores with a disk tier, whose disk-full events need root) run
# against that folder's cluster.toml; with --config elsewhere only when
# SUBDIRS=1.
if [ "$config" = "$here/configs/chaos/cluster.toml" ] || [ "${SUBDIRS:-0}" = 1 ]; then
  for sub in "$here"/configs/chaos/*/; do
    [ -f "$sub/cluster.toml" ] || continue
    for scenario in "$sub"*.toml; do
      name="$(basename "$scenario" .toml)"
      case "$name" in cluster*) continue ;; esac
      echo "== $name ($(basename "$sub")/cluster.toml)" >&2
      code=0
      "$bin" chaos --config "$sub/cluster.toml" --scenario "$scenario" \
        --json "$out/$name.json" --svg "$out/$name.svg" --logs "${TMPDIR:-/tmp}/tessera-chaos-logs/$name" "$@" || code=$?
      [ "$code" -ne 0 ] && status=1
    done
  done
fi
python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def s(v):
    return "-" if v is None else f"{v:.2f} s"
print("| scenario | sent | completed | failed | wrong | lost | events: in flight, detect, recover |")
print("|---|---:|---:|---:|---:|---:|---|")
for f in sorted(out.glob("*.json")):
    j = json.loads(f.read_text())
    t = j["totals"]
    # Events of one action at one time (a plan set on every node) as one.
    groups = []
    for e in j["events"]:
        key = (e["action"], round(e["at_s"], 3), e["plan"] == "")
        if groups and groups[-1][0] == key:
            groups[-1][1].append(e)
        else:
            groups.append((key, [e]))
    parts = []
    for (action, _, heal), es in groups:
        e = es[0]
        what = "heal" if action == "faults" and heal else action
        nodes = e["node"] if len(es) == 1 else f"{len(es)} nodes"
        detect = min((x["detect_s"] for x in es if x["detect_s"] is not None), default=None)
        errors = [x["error"] for x in es if x["error"]]
        parts.append(f"{what} {nodes} @{e['applied_s']:.1f} s: {e['in_flight']}, {s(detect)}, {s(e['recover_s'])}"
                     + (f" (FAILED: {errors[0]})" if errors else ""))
    ev = "; ".join(parts)
    print(f"| {j['scenario']} | {t['sent']} | {t['completed']} | {t['failed']} | {t['wrong']} | {t['lost']} | {ev} |")
PY
exit $status
