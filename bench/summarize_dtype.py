#!/usr/bin/env python3
"""Summarise `spgnn bench --dtype all --format json` files (bench/half_suite.sh): per (kernel,
graph, F), auto's and cuSPARSE's median ms in each dtype, auto's speedup of each half dtype over
its own float32, and over cuSPARSE in the same dtype; geometric means per kernel and dtype over
the cases with F >= 64 (issue 12's bars: bf16 >= 1.7x over float32, >= 1.5x over cuSPARSE)."""
import json
import math
import sys
from collections import defaultdict


def geo(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def main(paths):
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                rows += json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            print(f"summarize_dtype: skipping {p}: {e}", file=sys.stderr)
    if not rows:
        print("summarize_dtype: no results")
        return 1
    auto, cus = defaultdict(dict), defaultdict(dict)
    failed = 0
    for r in rows:
        key = (r["kernel"], r["graph"], r["F"])
        ms = r["median_ms"]
        failed += bool(r.get("failed"))
        if ms is None:
            continue
        dt = r.get("dtype", "f32")
        if r.get("auto"):
            auto[key][dt] = ms
        if r["strategy"].startswith("cusparse"):
            cus[key][dt] = ms
    dts = ("f32", "f16", "bf16")
    print(f"{'kernel':6} {'graph':10} {'F':>4} " +
          " ".join(f"{'auto ' + d:>10}" for d in dts) + " " +
          " ".join(f"{'cusp ' + d:>10}" for d in dts) +
          "  bf16/f32  f16/f32  bf16/cusp  f16/cusp")
    over_f32, over_cus = defaultdict(list), defaultdict(list)
    cell = lambda v: f"{v:>10.4f}" if v is not None else f"{'-':>10}"  # noqa: E731
    for key in sorted(auto):
        a, c = auto[key], cus.get(key, {})
        line = f"{key[0]:6} {key[1]:10} {key[2]:>4} " + " ".join(cell(a.get(d)) for d in dts) + \
            " " + " ".join(cell(c.get(d)) for d in dts)
        for d in ("bf16", "f16"):
            x = a["f32"] / a[d] if "f32" in a and d in a else None
            line += f"  {x:>7.2f}x" if x else f"  {'-':>8}"
            if x and key[2] >= 64:
                over_f32[(key[0], d)].append(x)
        for d in ("bf16", "f16"):
            x = c[d] / a[d] if d in c and d in a else None
            line += f"  {x:>8.2f}x" if x else f"  {'-':>9}"
            if x and key[2] >= 64:
                over_cus[(key[0], d)].append(x)
        print(line)
    print()
    for (k, d), v in sorted(over_f32.items()):
        print(f"geo-mean {k:5} {d:4} auto over its float32 (F >= 64): {geo(v):.2f}x "
              f"(min {min(v):.2f}x, {len(v)} cases)")
    for (k, d), v in sorted(over_cus.items()):
        print(f"geo-mean {k:5} {d:4} auto over cuSPARSE {d} (F >= 64): {geo(v):.2f}x "
              f"(min {min(v):.2f}x, {len(v)} cases)")
    if failed:
        print(f"WRONG RESULTS: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
