#!/usr/bin/env python3
"""Kernel-level view of one model's training step, eager against torch.compile: which GPU
kernels each runs and how long they take (torch.profiler), to find where a compiled step loses.

    PYTHONPATH=build/python python3 bench/profile_step.py --graph G.npy --models gcn [--steps 10]
        [--trace DIR] [--cprofile]

--cprofile also runs the steps under Python's cProfile and prints the functions with the most
self time: where the host spends a step (torch.compile's wrappers, custom-op dispatch, spgnn's
Python), which torch.profiler shows only as spans.
"""
import cProfile
import io
import pstats

import torch
from torch.profiler import ProfilerActivity, profile

from _interleaved import inputs, parse, parser, speed


def main():
    ap = parser(__doc__, "gcn")
    ap.add_argument("--trace", help="also write a Chrome trace per model and mode into this folder")
    ap.add_argument("--cprofile", action="store_true",
                    help="also profile the steps' Python with cProfile (top functions by self time)")
    a = parse(ap)
    import spgnn.nn as snn

    dev, ei, n, x, y, mask = inputs(a)
    sel = mask.nonzero().flatten()
    for name in a.models.split(","):
        for mode in ("eager", "compiled"):
            torch.manual_seed(1)
            m = speed.make_model(snn, name, a.features, a.classes).to(dev)
            opt = torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=5e-4)
            run = torch.compile(m, fullgraph=True) if mode == "compiled" else m
            for _ in range(a.warmup):
                speed.timed_step_host(m, run, opt, x, y, sel, ei)
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
            with profile(activities=acts) as prof:
                for _ in range(a.steps):
                    speed.timed_step_host(m, run, opt, x, y, sel, ei)
            key = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
            print(f"==== {name} {mode}: {a.steps} steps")
            print(prof.key_averages().table(sort_by=key, row_limit=25, max_name_column_width=70))
            if a.trace:
                prof.export_chrome_trace(f"{a.trace}/{name}-{mode}.json")
            if a.cprofile:
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(a.steps):
                    speed.timed_step_host(m, run, opt, x, y, sel, ei)
                pr.disable()
                out = io.StringIO()
                pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(25)
                print(f"==== {name} {mode}: cProfile of {a.steps} steps, by self time")
                print(out.getvalue())
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
