#!/usr/bin/env python3
"""Where a training step of python/examples/speed_vs_pyg.py's models spends its time with spgnn.nn
layers: torch.profiler over a few steps after warm-up, the top CUDA kernels and CPU ops.

Usage: bench/profile_python.py --graph G.npy [--models gcn,gin,sage] [--steps 3]
"""
import argparse
import importlib.util
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "speed_vs_pyg", os.path.join(HERE, "..", "python", "examples", "speed_vs_pyg.py"))
speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", required=True)
    ap.add_argument("--models", default="gcn,gin,sage")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rows", type=int, default=12)
    a = ap.parse_args()
    import spgnn
    dev = torch.device("cuda")
    ei, n = speed.load_graph(a.graph, dev)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(n, 602, generator=g) * 2 - 1).to(dev)
    y = torch.randint(0, 41, (n,), generator=g).to(dev)
    mask = (torch.rand(n, generator=g) < 0.6).to(dev)
    for name in a.models.split(","):
        model = speed.make_model(spgnn.nn, name, 602, 41).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x, ei)[mask], y[mask]).backward()
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
        print(f"\n==== {name}: {wall:.2f} ms per step under the profiler", flush=True)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=a.rows,
                                        max_name_column_width=60), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
