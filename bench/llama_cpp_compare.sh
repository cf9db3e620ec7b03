#!/usr/bin/env bash
# Tessera's CPU engine against llama.cpp on the same weights, side by side:
# each round runs llama.cpp F16, llama.cpp BF16 and Tessera (bf16) back to
# back, for each thread count, so every triple shares the machine's state
# (its memory bandwidth moves from minute to minute). Prints a table of
# medians over rounds and writes every run to a JSON file.
#
#   bench/llama_cpp_compare.sh --llama-cpp DIR [--model DIR] [--rounds 3]
#       [--threads 1,2] [--out bench/results/llama_cpp_compare.json]
#
# DIR is a llama.cpp checkout you built yourself (nothing is fetched here):
#   cmake -S DIR -B DIR/build -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release
#   cmake --build DIR/build -j --target llama-bench llama-batched-bench
# The model (default: `tessera model init --shape small --seed 0`, made if
# absent) is converted once per type with bench/hf_to_gguf.py, which uses
# DIR/gguf-py (needs Debian's python3-numpy and python3-sentencepiece).
# Measures, per thread count: decode at batch 1 (llama-bench tg128 against
# `tessera bench engine`'s 128-token decode) and prefill of 512 tokens
# (pp512 against the engine's 512-token prefill), aggregate decode of 16
# sequences (llama-batched-bench S_TG, 16-token prompts, 128 tokens each,
# F16, against the engine's 16-sequence decode), and the triad bandwidth
# Tessera measures before its batch-1 run (its roofline).
set -euo pipefail
cd "$(dirname "$0")/.."
llama="" model="" rounds=3 threads="1,2" out="bench/results/llama_cpp_compare.json"
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-cpp) llama="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -n "$llama" ] || { echo "--llama-cpp DIR is required (a llama.cpp checkout you built)" >&2; exit 2; }
bench_bin="$llama/build/bin/llama-bench"
batched_bin="$llama/build/bin/llama-batched-bench"
for b in "$bench_bin" "$batched_bin"; do
  [ -x "$b" ] || { echo "$b: not found or not executable: build llama.cpp's llama-bench and llama-batched-bench first" >&2; exit 2; }
done
py=/usr/bin/python3
[ -x "$py" ] || py=python3
tessera="${TESSERA_BIN:-build/release/cli/tessera}"
[ -x "$tessera" ] || { echo "$tessera: not built (cmake --build build/release --target tessera)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -z "$model" ]; then
  model="$work/small"
  "$tessera" model init --shape small --seed 0 --out "$model" > /dev/null
fi
for t in f16 bf16; do
  "$py" bench/hf_to_gguf.py --model "$model" --out "$work/model-$t.gguf" --type "$t" --gguf-py "$llama/gguf-py" > /dev/null
done
IFS=, read -r -a tlist <<< "$threads"
for r in $(seq 1 "$rounds"); do
  for th in "${tlist[@]}"; do
    echo "round $r/$rounds, $th thread(s): llama.cpp F16, BF16, Tessera" >&2
    "$bench_bin" -m "$work/model-f16.gguf" -t "$th" -p 512 -n 128 -r 3 -o json > "$work/llama_f16_t${th}_r$r.json"
    "$bench_bin" -m "$work/model-bf16.gguf" -t "$th" -p 512 -n 128 -r 3 -o json > "$work/llama_bf16_t${th}_r$r.json"
    "$batched_bin" -m "$work/model-f16.gguf" -t "$th" -c 4096 -b 2048 -ub 512 -npp 16 -ntg 128 -npl 16 \
        --output-format jsonl 2> /dev/null | grep '^{' > "$work/batched_f16_t${th}_r$r.jsonl"
    "$tessera" bench engine --model "$model" --threads "$th" --runs 3 --concurrency 1,16 \
        --prefill-tokens 512 --decode-tokens 128 --json "$work/tessera_t${th}_r$r.json" > /dev/null 2>&1
  done
done
"$py" - "$work" "$rounds" "$threads" "$out" "$llama" <<'PY'
import json, os, statistics as st, subprocess, sys
work, rounds, threads, out, llama = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4], sys.argv[5]
def llama_ts(path, test):
    for row in json.load(open(path)):
        if (test == "tg" and row["n_gen"] > 0 and row["n_prompt"] == 0) or \
           (test == "pp" and row["n_prompt"] > 0 and row["n_gen"] == 0):
            return row["avg_ts"]
    raise SystemExit(f"{path}: no {test} row")
rows, runs = [], {}
print("Tessera (bf16) vs llama.cpp, medians of %d interleaved rounds; x = Tessera / llama.cpp, each round's own ratio" % rounds)
print("%-8s %-22s %10s %10s %10s %9s %9s" % ("threads", "measure", "llama F16", "llama BF16", "Tessera", "x F16", "x BF16"))
for th in threads:
    per = []
    for r in range(1, rounds + 1):
        t = json.load(open(f"{work}/tessera_t{th}_r{r}.json"))
        per.append({
            "llama_f16": {"tg": llama_ts(f"{work}/llama_f16_t{th}_r{r}.json", "tg"), "pp": llama_ts(f"{work}/llama_f16_t{th}_r{r}.json", "pp")},
            "llama_bf16": {"tg": llama_ts(f"{work}/llama_bf16_t{th}_r{r}.json", "tg"), "pp": llama_ts(f"{work}/llama_bf16_t{th}_r{r}.json", "pp")},
            "tessera": {"tg": t["decode_tok_s"]["1"], "pp": t["prefill_tok_s"], "agg16": t["decode_tok_s"]["16"]},
            "llama_f16_agg16": json.loads(open(f"{work}/batched_f16_t{th}_r{r}.jsonl").readline())["speed_tg"],
            "triad_gb_s": t["bandwidth_gb_s"], "roofline_tok_s": t["roofline_tok_s"],
        })
    runs[th] = per
    for test, label in (("tg", "decode batch 1, tok/s"), ("pp", "prefill 512, tok/s")):
        f16 = st.median(p["llama_f16"][test] for p in per)
        bf16 = st.median(p["llama_bf16"][test] for p in per)
        ts = st.median(p["tessera"][test] for p in per)
        x16 = st.median(p["tessera"][test] / p["llama_f16"][test] for p in per)
        xb = st.median(p["tessera"][test] / p["llama_bf16"][test] for p in per)
        print("%-8s %-22s %10.1f %10.1f %10.1f %8.2fx %8.2fx" % (th, label, f16, bf16, ts, x16, xb))
        rows.append({"threads": int(th), "measure": test, "llama_f16": f16, "llama_bf16": bf16, "tessera": ts, "x_f16": x16, "x_bf16": xb})
    agg_l = st.median(p["llama_f16_agg16"] for p in per)
    agg_t = st.median(p["tessera"]["agg16"] for p in per)
    agg_x = st.median(p["tessera"]["agg16"] / p["llama_f16_agg16"] for p in per)
    print("%-8s %-22s %10.1f %10s %10.1f %8.2fx" % (th, "decode 16 seqs, tok/s", agg_l, "", agg_t, agg_x))
    rows.append({"threads": int(th), "measure": "agg16", "llama_f16": agg_l, "tessera": agg_t, "x_f16": agg_x})
    roof = st.median(p["tessera"]["tg"] / p["roofline_tok_s"] for p in per)
    lroof = st.median(p["llama_f16"]["tg"] / p["roofline_tok_s"] for p in per)
    print("%-8s %-22s %10.2f %10s %10.2f   (triad %s GB/s)" % (th, "decode / roofline", lroof, "", roof,
          " ".join("%.1f" % p["triad_gb_s"] for p in per)))
    rows.append({"threads": int(th), "measure": "roofline_fraction", "llama_f16": lroof, "tessera": roof})
commit = subprocess.run(["git", "-C", llama, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
json.dump({"rounds": rounds, "llama_cpp_commit": commit, "table": rows, "runs": runs}, open(out, "w"), indent=1)
print("wrote", out)
PY
