#!/usr/bin/env python3
"""Writes seeded request workloads in the Mooncake trace format
(shared/traces/README.md) for `tessera bench trace`, each with its own
prefix-cache optimum, so a cross-turn cache is judged on shapes nobody
tuned it on:

  documents  long shared documents (20k-100k tokens), many questions each,
             Zipf popularity: a few documents carry most of the load
  chats      many short multi-turn chats (C.AI-like, 10-30 turns); each
             turn's prompt is the whole conversation so far
  agents     a tool-agent pattern: a few fixed 5-10k system prompts, short
             varying tails

Each line: {"timestamp": ms, "input_length": N, "output_length": M,
"hash_ids": [...]}, one id per 512-token block, prefix-chained (two
requests whose first k ids are equal share their first k*512 tokens; a
partial last block gets an id of its own). The optimum is what an unbounded
cache would reuse: for each request in arrival order, the longest prefix of
its ids already seen, in tokens, over all input tokens.

  scripts/make-workloads.py --out DIR [--seed 1] [--minutes 20] [--rate 2.0]
  scripts/make-workloads.py --check FILE.jsonl   # format and chaining checks

Writes DIR/<name>.jsonl per workload and DIR/workloads.json (each one's
request count, mean input and output, optimum), and prints a table.
Deterministic for a given seed and arguments.
"""

import argparse
import bisect
import json
import math
import os
import random
import sys

BLOCK = 512


class ids:
    """Hands out hash ids; full blocks of a shared text keep theirs."""

    def __init__(self):
        self.next = 0

    def fresh(self, n=1):
        out = list(range(self.next, self.next + n))
        self.next += n
        return out


def blocks_of(length):
    return (length + BLOCK - 1) // BLOCK


def zipf_sampler(rng, n, s=1.1):
    weights = [1.0 / (k + 1) ** s for k in range(n)]
    total = sum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    return lambda: min(bisect.bisect_left(cdf, rng.random()), n - 1)


def poisson_times(rng, rate_per_s, minutes):
    t, end, out = 0.0, minutes * 60.0, []
    while True:
        t += rng.expovariate(rate_per_s)
        if t >= end:
            return out
        out.append(t)


def documents(rng, minutes, rate):
    """20 documents of 20k-100k tokens (whole blocks), Zipf-popular; each
    request is one document and a 30-300 token question."""
    gen = ids()
    docs = []
    for _ in range(20):
        n = rng.randint(20_000 // BLOCK, 100_000 // BLOCK)
        docs.append(gen.fresh(n))
    pick = zipf_sampler(rng, len(docs))
    out = []
    for t in poisson_times(rng, rate, minutes):
        d = docs[pick()]
        q = rng.randint(30, 300)
        out.append({"timestamp": int(t * 1000), "input_length": len(d) * BLOCK + q,
                    "output_length": rng.randint(50, 400), "hash_ids": d + gen.fresh(1)})
    return out


def chats(rng, minutes, rate):
    """Conversations of 10-30 turns starting at `rate`/10 per second; a turn
    follows the previous answer after 5-60 s of thinking; each prompt is the
    conversation so far plus the new user message."""
    gen = ids()
    out = []
    for start in poisson_times(rng, rate / 10.0, minutes):
        full = []          # ids of the conversation's full blocks
        length = 0         # tokens of the conversation so far
        t = start
        system = rng.randint(100, 600)
        length = system
        for _turn in range(rng.randint(10, 30)):
            length += rng.randint(20, 200)  # the user's message
            need = length // BLOCK
            if need > len(full):
                full += gen.fresh(need - len(full))
            partial = gen.fresh(1) if length % BLOCK else []
            answer = rng.randint(30, 400)
            if t < minutes * 60.0:
                out.append({"timestamp": int(t * 1000), "input_length": length,
                            "output_length": answer, "hash_ids": full + partial})
            length += answer
            t += 2.0 + rng.uniform(5.0, 60.0)
    out.sort(key=lambda r: r["timestamp"])
    return out


def agents(rng, minutes, rate):
    """Three agents, each a fixed 5-10k token system prompt (whole blocks);
    each call adds a 200-2000 token tail of its own."""
    gen = ids()
    prompts = [gen.fresh(rng.randint(5_000 // BLOCK, 10_000 // BLOCK)) for _ in range(3)]
    out = []
    for t in poisson_times(rng, rate, minutes):
        p = prompts[rng.randrange(len(prompts))]
        tail = rng.randint(200, 2000)
        out.append({"timestamp": int(t * 1000), "input_length": len(p) * BLOCK + tail,
                    "output_length": rng.randint(20, 300), "hash_ids": p + gen.fresh(blocks_of(tail))})
    return out


def optimum(requests):
    """Fraction of input tokens an unbounded cache reuses (longest prefix of
    already-seen ids, whole blocks, never past the input)."""
    seen, hit, total = set(), 0, 0
    for r in requests:
        n = 0
        for h in r["hash_ids"]:
            if h not in seen:
                break
            n += 1
        hit += min(n * BLOCK, r["input_length"])
        total += r["input_length"]
        seen.update(r["hash_ids"])
    return hit / total if total else 0.0


def check(requests):
    """The format's invariants; returns a list of problems."""
    problems, last = [], -1
    for i, r in enumerate(requests):
        if set(r) != {"timestamp", "input_length", "output_length", "hash_ids"}:
            problems.append(f"request {i}: keys {sorted(r)}")
            continue
        if r["timestamp"] < last:
            problems.append(f"request {i}: timestamp goes back")
        last = r["timestamp"]
        if len(r["hash_ids"]) != blocks_of(r["input_length"]):
            problems.append(f"request {i}: {len(r['hash_ids'])} ids for {r['input_length']} tokens")
        if r["output_length"] < 1:
            problems.append(f"request {i}: output_length {r['output_length']}")
    return problems


WORKLOADS = {"documents": documents, "chats": chats, "agents": agents}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="directory to write the workloads into")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=20.0, help="trace time of each workload")
    ap.add_argument("--rate", type=float, default=2.0,
                    help="requests per second (documents, agents); chats start rate/10 conversations per second")
    ap.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), help="only these workloads")
    ap.add_argument("--check", metavar="FILE", help="check a workload file and exit")
    a = ap.parse_args()
    if a.check:
        with open(a.check) as f:
            reqs = [json.loads(line) for line in f if line.strip()]
        problems = check(reqs)
        for p in problems[:20]:
            print(p, file=sys.stderr)
        print(f"{a.check}: {len(reqs)} requests, optimum {optimum(reqs):.3f}, "
              f"{len(problems)} problems")
        return 1 if problems else 0
    if not a.out:
        ap.error("--out DIR (or --check FILE)")
    os.makedirs(a.out, exist_ok=True)
    summary = {"seed": a.seed, "minutes": a.minutes, "rate": a.rate, "block_tokens": BLOCK, "workloads": {}}
    print(f"{'workload':10} {'requests':>9} {'mean in':>9} {'mean out':>9} {'optimum':>8}")
    for name in a.only or sorted(WORKLOADS):
        # One generator per workload, seeded by the seed and the name: a
        # workload does not change when another is added or left out.
        rng = random.Random(f"{a.seed}/{name}")
        reqs = WORKLOADS[name](rng, a.minutes, a.rate)
        problems = check(reqs)
        if problems:
            print(f"{name}: {problems[0]}", file=sys.stderr)
            return 1
        path = os.path.join(a.out, name + ".jsonl")
        with open(path, "w") as f:
            for r in reqs:
                f.write(json.dumps(r) + "\n")
        n = len(reqs)
        mean_in = sum(r["input_length"] for r in reqs) / max(n, 1)
        mean_out = sum(r["output_length"] for r in reqs) / max(n, 1)
        opt = optimum(reqs)
        summary["workloads"][name] = {"file": path, "requests": n, "mean_input": mean_in,
                                      "mean_output": mean_out, "optimum": opt}
        print(f"{name:10} {n:9d} {mean_in:9.0f} {mean_out:9.0f} {opt:8.3f}")
    with open(os.path.join(a.out, "workloads.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
