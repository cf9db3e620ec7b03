#!/usr/bin/env python3
"""Shrinks a Mooncake-format trace's blocks so a slow engine can replay it.

    scripts/scale-trace.py IN.jsonl OUT.jsonl FACTOR

Every input_length becomes ceil(input_length / FACTOR), hash_ids and
timestamps stay as they are, so the trace keeps its sharing structure with
blocks of 512 / FACTOR tokens: replay the result with
`tessera bench trace --block-tokens (512 / FACTOR)`. Its unbounded-cache
optimum is then close to the original's (a partial last block is rounded up).
output_length is kept; cap it with `--max-output`.
"""
import json
import math
import sys


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, factor = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if factor < 1 or 512 % factor:
        print("FACTOR must divide 512", file=sys.stderr)
        return 2
    with open(src) as fin, open(dst, "w") as fout:
        for line in fin:
            if not line.strip():
                continue
            r = json.loads(line)
            r["input_length"] = math.ceil(r["input_length"] / factor)
            fout.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
