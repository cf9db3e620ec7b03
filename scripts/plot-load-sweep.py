#!/usr/bin/env python3
"""Plots `tessera bench trace` runs of one trace at several loads: TTFT p50
and p90 (in the trace's own time) and the hit rate against the load, one
line per routing policy. Writes an SVG (no plotting library needed).

    scripts/plot-load-sweep.py OUT.svg "TITLE" POLICY:LOAD:TIME_SCALE:RUN.json ...

LOAD is the arrival rate relative to the modelled GPUs (x the trace's own
rate), TIME_SCALE the sim's time scale of the run: wall milliseconds / it
gives the trace's milliseconds. Also prints the table as Markdown.
"""
import json
import math
import sys

W, H = 960, 380
PANELS = [("ttft_ms_p50", "TTFT p50, ms (log)", True),
          ("ttft_ms_p90", "TTFT p90, ms (log)", True),
          ("hit_rate", "hit rate, %", False)]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def load_runs(specs):
    runs = {}
    for spec in specs:
        policy, load, scale, path = spec.split(":", 3)
        with open(path) as f:
            j = json.load(f)
        runs.setdefault(policy, []).append((float(load), float(scale), j))
    for points in runs.values():
        points.sort(key=lambda p: p[0])
    return runs


def value(key, scale, j):
    if key == "hit_rate":
        return 100 * j[key]
    return j[key] / scale


def panel(out, x0, key, title, log, runs):
    pw, ph, top = 260, 250, 60
    loads = sorted({p[0] for pts in runs.values() for p in pts})
    vals = [value(key, s, j) for pts in runs.values() for (_, s, j) in pts]
    lo, hi = min(vals), max(vals)
    if log:
        lo, hi = math.log10(max(lo, 1e-9)), math.log10(hi)
    else:
        lo = 0
    hi = hi if hi > lo else lo + 1
    fx = lambda x: x0 + (x - loads[0]) / max(loads[-1] - loads[0], 1e-9) * pw
    fy = lambda y: top + ph - ((math.log10(y) if log else y) - lo) / (hi - lo) * ph
    out.append(f'<text x="{x0 + pw / 2}" y="{top - 12}" text-anchor="middle" font-size="13">{title}</text>')
    out.append(f'<rect x="{x0}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    for x in loads:
        out.append(f'<text x="{fx(x)}" y="{top + ph + 16}" text-anchor="middle" font-size="11">{x:g}x</text>')
    for frac in (0, 0.5, 1):
        y = lo + frac * (hi - lo)
        shown = 10 ** y if log else y
        out.append(f'<text x="{x0 - 4}" y="{top + ph - frac * ph + 4}" text-anchor="end" '
                   f'font-size="10">{shown:.0f}</text>')
    for i, (policy, pts) in enumerate(sorted(runs.items())):
        c = COLORS[i % len(COLORS)]
        xy = [(fx(l), fy(value(key, s, j))) for (l, s, j) in pts]
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
                   + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + '"/>')
        for x, y in xy:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>')


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    path, title, runs = sys.argv[1], sys.argv[2], load_runs(sys.argv[3:])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="15">{title}</text>']
    for k, (key, t, log) in enumerate(PANELS):
        panel(out, 55 + k * 310, key, t, log, runs)
    for i, policy in enumerate(sorted(runs)):
        c = COLORS[i % len(COLORS)]
        out.append(f'<rect x="{50 + i * 160}" y="{H - 22}" width="14" height="4" fill="{c}"/>')
        out.append(f'<text x="{70 + i * 160}" y="{H - 16}" font-size="12">{policy}</text>')
    out.append(f'<text x="{W - 10}" y="{H - 16}" text-anchor="end" font-size="11">load: x the trace\'s '
               'arrival rate; times in the trace\'s ms</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("| load | policy | hit % | prefill tokens | TTFT p50 / p90 / p99 ms (trace time) |")
    print("|---|---|---|---|---|")
    for load in sorted({p[0] for pts in runs.values() for p in pts}):
        for policy, pts in sorted(runs.items()):
            for (l, s, j) in pts:
                if l == load:
                    print(f"| {l:g}x | {policy} | {100 * j['hit_rate']:.1f} | "
                          f"{j['prefill_tokens_computed'] / 1e6:.1f} M | "
                          f"{j['ttft_ms_p50'] / s:.0f} / {j['ttft_ms_p90'] / s:.0f} / "
                          f"{j['ttft_ms_p99'] / s:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
