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
Then each variant runs --steps steps back to back with no synchronisation between them (the
boolean mask still makes the host wait inside each step): ms per step of that stretch, the pace
of a loop that does not read the loss every step, where the host's extra work per compiled step
can hide under the GPU's.

    PYTHONPATH=build/python python3 bench/compile_cost.py --graph G.npy [--models gcn,gin]
        [--splits index,mask] [--steps 40] [--warmup 5] [--device cuda|cpu]
        [--mode default|reduce-overhead|max-autotune-no-cudagraphs]

--mode is torch.compile's: reduce-overhead replays each compiled region as a CUDA graph, which
removes the per-launch host work that makes the compiled GCN step slower than eager.
"""
import statistics
import time

import torch
import torch.nn.functional as F

from _interleaved import inputs, parse, parser, speed


def back_to_back(model, run, opt, x, y, sel, edge, steps: int) -> float:
    """ms per step of `steps` training steps issued with no synchronisation between them."""
    sync = torch.cuda.synchronize if x.device.type == "cuda" else (lambda: None)
    model.train()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(run(x, edge)[sel], y[sel]).backward()
        opt.step()
    sync()
    return (time.perf_counter() - t0) * 1e3 / steps


def main():
    ap = parser(__doc__, "gcn,gin,sage,gat")
    ap.add_argument("--splits", default="index,mask")
    ap.add_argument("--mode", default="default",
                    choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
                    help="torch.compile's mode for the compiled variant")
    a = parse(ap)
    splits = a.splits.split(",")
    for s in splits:
        if s not in ("index", "mask"):
            ap.error(f"--splits: unknown split {s!r} (expected index and/or mask)")
    import spgnn.nn as snn

    dev, ei, n, x, y, mask = inputs(a)
    sels = {"index": mask.nonzero().flatten(), "mask": mask}
    print(f"graph {a.graph}: {n} nodes, {ei.shape[1]} edges; {dev}; torch {torch.__version__}; "
          f"median of {a.steps} interleaved steps after {a.warmup} (and the compilation); "
          f"torch.compile mode {a.mode}")
    print("| model | split | eager ms | compiled ms | compiled / eager | eager host ms | "
          "compiled host ms | eager back to back | compiled back to back | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.models.split(","):
        runs = {}
        for split in splits:
            for mode in ("eager", "compiled"):
                torch.manual_seed(1)
                m = speed.make_model(snn, name, a.features, a.classes).to(dev)
                opt = torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=5e-4)
                run = (torch.compile(m, fullgraph=True, mode=a.mode) if mode == "compiled"
                       else m)
                runs[(split, mode)] = (m, run, opt, sels[split])
        times = {k: [] for k in runs}
        for i in range(a.warmup + a.steps):
            for k, (m, run, opt, sel) in runs.items():
                t = speed.timed_step_host(m, run, opt, x, y, sel, ei)
                if i >= a.warmup:
                    times[k].append(t)
        pace = {k: back_to_back(m, run, opt, x, y, sel, ei, a.steps)
                for k, (m, run, opt, sel) in runs.items()}
        for split in splits:
            med = {mode: (statistics.median(t[0] for t in times[split, mode]),
                          statistics.median(t[1] for t in times[split, mode]))
                   for mode in ("eager", "compiled")}
            e, c = med["eager"], med["compiled"]
            pe, pc = pace[split, "eager"], pace[split, "compiled"]
            print(f"| {name} | {split} | {e[0]:.2f} | {c[0]:.2f} | {c[0] / e[0]:.3f} | "
                  f"{e[1]:.2f} | {c[1]:.2f} | {pe:.2f} | {pc:.2f} | {pc / pe:.3f} |", flush=True)
        del runs
        torch._dynamo.reset()
        if dev.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
