#!/usr/bin/env bash
# What memory by grant costs the KV transfer: `tessera bench transport` with
# and without --grants (a cluster secret: over tcp no rkeys, every block by
# rendezvous into granted ranges; over shm both processes are the same uid
# on one host, so the same-host path puts over an sm-only RMA context),
# contiguous and scattered blocks,
# interleaved: each round runs every variant once, back to back, so the
# ratios compare the same minutes of this machine.
#
#   scripts/bench-transport-grants.sh [ROUNDS] [OUT.json]   # defaults: 3, bench/results/transport_grants.json
#
# VARIANTS (default "plain grants plain_scatter grants_scatter") picks the
# variants; WAIT_IDLE (default 80) is --wait-idle, the idle CPU share each
# run waits for (at most 10 minutes).
#
# Prints a table (medians over rounds; grants/plain is the median of each
# round's own ratio) and writes every run's JSON into one file.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
out="${2:-bench/results/transport_grants.json}"
bin="${TESSERA_BIN:-build/release/cli/tessera}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for r in $(seq 1 "$rounds"); do
  for v in ${VARIANTS:-plain grants plain_scatter grants_scatter}; do
    args=(--rounds 1 --transports tcp,shm --wait-idle "${WAIT_IDLE:-80}")
    case $v in *grants*) args+=(--grants) ;; esac
    case $v in *scatter*) args+=(--scatter) ;; esac
    echo "round $r/$rounds: $v" >&2
    "$bin" bench transport "${args[@]}" --json "$work/${v}_$r.json" > "$work/${v}_$r.txt" 2>&1
  done
done
python3 - "$work" "$rounds" "$out" "${VARIANTS:-plain grants plain_scatter grants_scatter}" <<'PY'
import json, statistics as st, sys
work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
variants = sys.argv[4].split()
sizes = ["65536", "1048576", "16777216"]
label = {"65536": "64 KiB", "1048576": "1 MiB", "16777216": "16 MiB"}
runs = {v: [json.load(open(f"{work}/{v}_{r}.json")) for r in range(1, rounds + 1)] for v in variants}
print("KV batches, GB/s: median of %d interleaved rounds (each round's runs), ratio to ucx_perftest" % rounds)
print("%-5s %-15s %-7s %8s %8s %8s %12s" % ("", "variant", "batch", "GB/s", "/tag_bw", "/put_bw", "grants/plain"))
summary = {}
for t in ["tcp", "shm"]:
    for v in variants:
        for s in sizes:
            g = [j["block_gb_s"][t][s] for j in runs[v]]
            tb = [j["block_vs_tag_bw"][t][s] for j in runs[v]]
            pb = [j["block_vs_put_bw"][t][s] for j in runs[v]]
            ratio = ""
            base = v.replace("grants", "plain")
            if v.startswith("grants") and base in runs:
                rs = [a["block_gb_s"][t][s] / b["block_gb_s"][t][s] for a, b in zip(runs[v], runs[base])]
                ratio = "%.2f" % st.median(rs)
                summary.setdefault(t, {}).setdefault(v, {})[s] = st.median(rs)
            # Each round's own ratio to perftest, in run order.
            rounds_txt = "  /tag_bw " + " ".join("%.2f" % x for x in tb) + "  /put_bw " + " ".join("%.2f" % x for x in pb)
            print("%-5s %-15s %-7s %8.2f %8.2f %8.2f %12s %s" % (t, v, label[s], st.median(g), st.median(tb), st.median(pb), ratio, rounds_txt))
    print("%-5s round trip p50 us: plain %.1f, grants %.1f" % (t, st.median(j["rtt_us_p50"][t] for j in runs["plain"]),
                                                             st.median(j["rtt_us_p50"][t] for j in runs["grants"])))
json.dump({"rounds": rounds, "grants_over_plain": summary, "runs": runs}, open(out, "w"), indent=1)
print("wrote", out)
PY
