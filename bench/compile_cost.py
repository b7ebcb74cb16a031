#!/usr/bin/env python3
"""torch.compile against eager for spgnn.nn models, in one run, steps interleaved.

The training-step tables (bench/python_suite.sh) time eager and compiled models in separate
passes of 10 steps each, and the compiled GCN's ratio moved between 1.00 and 1.39 from run to
run. Here both run the same loop (python/examples/speed_vs_pyg.py's models and step) with the
same nodes as an index tensor and as a boolean mask, alternating step by step so that clocks and
the GPU's state drift alike for all of them. Per variant: the median wall time of a step
(synchronised before and after, as the tables) and the median host time (until the step's last
call returns, before the closing synchronisation), which shows how much of a step the host
spends issuing work: where it is close to the wall time, the host, not the GPU, sets the pace.

    PYTHONPATH=build/python python3 bench/compile_cost.py --graph G.npy [--models gcn,gin]
        [--splits index,mask] [--steps 40] [--warmup 5] [--device cuda|cpu]
"""
import argparse
import importlib.util
import os
import statistics
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "speed_vs_pyg", os.path.join(HERE, "..", "python", "examples", "speed_vs_pyg.py"))
speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(speed)


def step(model, run, opt, x, y, sel, edge, sync):
    """(wall ms, host ms) of speed_vs_pyg.timed_step's step."""
    sync()
    t0 = time.perf_counter()
    model.train()
    opt.zero_grad()
    loss = F.cross_entropy(run(x, edge)[sel], y[sel])
    loss.backward()
    opt.step()
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    return (t2 - t0) * 1e3, (t1 - t0) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="random:20000:25",
                    help="an edge_index .npy, a dataset directory or random:N:DEG")
    ap.add_argument("--models", default="gcn,gin,sage,gat")
    ap.add_argument("--splits", default="index,mask")
    ap.add_argument("--features", type=int, default=602)
    ap.add_argument("--classes", type=int, default=41)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    splits = a.splits.split(",")
    for s in splits:
        if s not in ("index", "mask"):
            ap.error(f"--splits: unknown split {s!r} (expected index and/or mask)")
    import spgnn.nn as snn

    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    ei, n = speed.load_graph(a.graph, dev)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, a.features, generator=g).to(dev)
    y = torch.randint(0, a.classes, (n,), generator=g).to(dev)
    mask = speed.training_split(n, "mask", g, dev)
    sels = {"index": mask.nonzero().flatten(), "mask": mask}
    print(f"graph {a.graph}: {n} nodes, {ei.shape[1]} edges; {dev}; torch {torch.__version__}; "
          f"median of {a.steps} interleaved steps after {a.warmup} (and the compilation)")
    print("| model | split | eager ms | compiled ms | compiled / eager | eager host ms | "
          "compiled host ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in a.models.split(","):
        runs = {}
        for split in splits:
            for mode in ("eager", "compiled"):
                torch.manual_seed(1)
                m = speed.make_model(snn, name, a.features, a.classes).to(dev)
                opt = torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=5e-4)
                run = torch.compile(m, fullgraph=True) if mode == "compiled" else m
                runs[(split, mode)] = (m, run, opt, sels[split])
        times = {k: [] for k in runs}
        for i in range(a.warmup + a.steps):
            for k, (m, run, opt, sel) in runs.items():
                t = step(m, run, opt, x, y, sel, ei, sync)
                if i >= a.warmup:
                    times[k].append(t)
        for split in splits:
            med = {mode: (statistics.median(t[0] for t in times[split, mode]),
                          statistics.median(t[1] for t in times[split, mode]))
                   for mode in ("eager", "compiled")}
            e, c = med["eager"], med["compiled"]
            print(f"| {name} | {split} | {e[0]:.2f} | {c[0]:.2f} | {c[0] / e[0]:.3f} | "
                  f"{e[1]:.2f} | {c[1]:.2f} |", flush=True)
        del runs
        torch._dynamo.reset()
        if dev.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
