#!/usr/bin/env python3
"""Summarise `spgnn bench --format json` files: one row per (kernel, graph, F), the median ms of
each strategy, its speedup over the baseline, and geometric means per strategy."""
import json
import math
import sys
from collections import defaultdict


def main(paths):
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                rows += json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            print(f"summarize: skipping {p}: {e}", file=sys.stderr)
    if not rows:
        print("summarize: no results")
        return 1
    cases = defaultdict(dict)
    for r in rows:
        # `auto` is reported under its own name (it resolves to one of the strategies, which
        # may also be in the file on its own row)
        base = r["strategy"].split("(")[0].split(" ")[0]
        case = cases[(r["kernel"], r["graph"], r["F"])]
        if r.get("auto") and "auto" not in case:
            # bench writes auto's own run first; a listed strategy (or the baseline) that auto
            # resolves to comes later, flagged auto too, and keeps its own column
            case["auto"] = r
            case.setdefault(base, r)  # bench prints one row when auto is a listed schedule
        else:
            case[base] = r
    strategies = sorted({s for c in cases.values() for s in c})
    speed_key = next(k for k in rows[0] if k.startswith("speedup_vs_"))
    print(f"{'kernel':6} {'graph':10} {'F':>4} " + " ".join(f"{s + ' ms':>14}" for s in strategies)
          + "  " + " ".join(f"{s + ' x':>12}" for s in strategies if s != speed_key[11:]))
    geo = defaultdict(list)
    failed = 0
    for (kernel, graph, F), c in sorted(cases.items()):
        line = f"{kernel:6} {graph:10} {F:>4} "
        line += " ".join(f"{c[s]['median_ms']:>14.4f}" if s in c and c[s]["median_ms"] is not None
                         else f"{'-':>14}" for s in strategies)
        line += "  "
        for s in strategies:
            if s == speed_key[11:]:
                continue
            sp = c.get(s, {}).get(speed_key)
            line += f"{sp:>11.2f}x " if sp else f"{'-':>12} "
            if sp:
                geo[(kernel, s)].append(sp)
        failed += sum(1 for r in c.values() if r.get("failed"))
        print(line)
    print()
    for (kernel, s), v in sorted(geo.items()):
        gm = math.exp(sum(math.log(x) for x in v) / len(v))
        print(f"geo-mean speedup {kernel:5} {s:12} over {speed_key[11:]}: {gm:.2f}x  "
              f"(min {min(v):.2f}x, max {max(v):.2f}x, {len(v)} cases)")
    # Issue 12: `auto` is never more than 5% slower than the baseline (cuSPARSE's best
    # algorithm on the GPU) on any case.
    slow = [(k, g, F, c["auto"][speed_key], c["auto"]["strategy"])
            for (k, g, F), c in sorted(cases.items())
            if "auto" in c and c["auto"].get(speed_key) and c["auto"][speed_key] < 0.95]
    if any("auto" in c for c in cases.values()):
        print(f"auto more than 5% slower than {speed_key[11:]}: {len(slow)} case(s)")
        for k, g, F, sp, st in slow:
            print(f"  {k} {g} F={F}: {sp:.2f}x ({st})")
    if failed:
        print(f"WRONG RESULTS: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
