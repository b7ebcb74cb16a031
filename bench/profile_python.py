#!/usr/bin/env python3
"""Where a training step of python/examples/speed_vs_pyg.py's models spends its time with spgnn.nn
layers: torch.profiler over a few steps after warm-up, the top CUDA kernels and CPU ops.

Usage: bench/profile_python.py --graph G.npy [--models gcn,gin,sage] [--steps 3] [--gaps 10]

--gaps N also prints how long the GPU sat idle during the profiled steps, that idle time summed
by the kernel the GPU then waited for (the N largest), and the N longest idle stretches, each
with the host (CPU) ops that were running while the GPU waited: what a step's host time costs
when it is not hidden behind kernels.
"""
import argparse
import importlib.util
import json
import os
import tempfile
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "speed_vs_pyg", os.path.join(HERE, "..", "python", "examples", "speed_vs_pyg.py"))
speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speed)


def idle_report(prof, top, steps):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    named = sorted((e["ts"], e["ts"] + e["dur"], e.get("name", "?")) for e in events
                   if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e)
    kern = [(t0, t1) for t0, t1, _ in named]
    cpu = [e for e in events if e.get("cat") == "cpu_op" and "dur" in e]
    if not kern:
        print("no GPU activity in the trace")
        return
    busy, gaps, end = 0.0, [], kern[0][0]
    for t0, t1 in kern:
        if t0 > end:
            gaps.append((t0 - end, end, t0))
        busy += max(0.0, t1 - max(t0, end))
        end = max(end, t1)
    span = end - kern[0][0]
    idle = sum(g[0] for g in gaps)
    print(f"GPU busy {busy / 1e3:.2f} ms, idle {idle / 1e3:.2f} ms between the first and last "
          f"kernel ({span / 1e3:.2f} ms) over {steps} steps: {idle / 1e3 / steps:.3f} ms idle per "
          "step.")
    # All the idle time, by the kernel the GPU waited for: short gaps (< 10 us) are kernel
    # boundaries, longer ones host work the GPU could not hide behind earlier kernels.
    by_next, short = {}, 0.0
    for (dur, g0, g1) in gaps:
        if dur < 10:
            short += dur
            continue
        nxt = next(k[2] for k in named if k[0] >= g1)
        name = nxt.split("(")[0].replace("void ", "")[-60:]
        c, t = by_next.get(name, (0, 0.0))
        by_next[name] = (c + 1, t + dur)
    print(f"  gaps under 10 us: {short / 1e3 / steps:.3f} ms per step "
          f"({sum(1 for g in gaps if g[0] < 10) / steps:.0f} a step); longer ones by the kernel "
          "that followed (count, ms per step):")
    for name, (c, t) in sorted(by_next.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"    {t / 1e3 / steps:7.3f} ms  {c / steps:5.1f}x  {name}")
    print(f"  the {top} longest idle stretches (host ops running in them, outermost first):")
    for dur, g0, g1 in sorted(gaps, reverse=True)[:top]:
        ops = sorted((e for e in cpu if e["ts"] < g1 and e["ts"] + e["dur"] > g0),
                     key=lambda e: (-e["dur"], e["ts"]))
        names = []
        for e in ops:
            if e["name"] not in names:
                names.append(e["name"])
        print(f"  {dur:8.1f} us: {', '.join(names[:8])}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", required=True)
    ap.add_argument("--models", default="gcn,gin,sage")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rows", type=int, default=12)
    ap.add_argument("--gaps", type=int, default=0)
    ap.add_argument("--split", choices=("mask", "index"), default="mask")
    ap.add_argument("--compile", action="store_true", help="the model under torch.compile")
    a = ap.parse_args()
    import spgnn
    dev = torch.device("cuda")
    ei, n = speed.load_graph(a.graph, dev)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(n, 602, generator=g) * 2 - 1).to(dev)
    y = torch.randint(0, 41, (n,), generator=g).to(dev)
    mask = speed.training_split(n, a.split, g, dev)
    for name in a.models.split(","):
        model = speed.make_model(spgnn.nn, name, 602, 41).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        run = torch.compile(model, fullgraph=True) if a.compile else model

        def step():
            opt.zero_grad()
            F.cross_entropy(run(x, ei)[mask], y[mask]).backward()
            opt.step()
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(a.steps):
                step()
            torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3 / a.steps
        print(f"\n==== {name}{' (compiled)' if a.compile else ''}: {wall:.2f} ms per step under "
              "the profiler", flush=True)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=a.rows,
                                        max_name_column_width=60), flush=True)
        if a.gaps:
            idle_report(prof, a.gaps, a.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
