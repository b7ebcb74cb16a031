#!/usr/bin/env python3
"""What a boolean-mask split costs a training step, with spgnn.nn and with PyG, in one run.

PyG's tutorials pick the training nodes with a boolean mask (``out[mask]``, ``y[mask]``): each
makes the host wait for the GPU, and everything the host does after the wait (the loss, its
backward, the last layer's backward up to its first long kernel) runs while the GPU idles. That
cost belongs to the loop, not to the layers, so it should be the same with either library. This
script measures it: the same loop (python/examples/speed_vs_pyg.py's models) with the mask and
with the same nodes as an index tensor, for spgnn.nn and for PyG on a sparse adj_t (GCNConv
cached), the four variants interleaved step by step so that clocks and the GPU's state drift
alike for all of them. Median ms per step, and mask minus index per library.

    PYTHONPATH=build/python python3 bench/mask_cost.py --graph G.npy [--models gcn,gin]
        [--steps 40] [--warmup 5]
"""
import argparse
import importlib.util
import os
import statistics

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "speed_vs_pyg", os.path.join(HERE, "..", "python", "examples", "speed_vs_pyg.py"))
speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(speed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="random:20000:25",
                    help="an edge_index .npy, a dataset directory or random:N:DEG")
    ap.add_argument("--models", default="gcn")
    ap.add_argument("--features", type=int, default=602)
    ap.add_argument("--classes", type=int, default=41)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    import spgnn.nn as snn
    import torch_geometric.nn as pnn
    from torch_geometric.utils import to_torch_csr_tensor

    dev = torch.device(a.device)
    ei, n = speed.load_graph(a.graph, dev)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, a.features, generator=g).to(dev)
    y = torch.randint(0, a.classes, (n,), generator=g).to(dev)
    mask = speed.training_split(n, "mask", g, dev)
    index = mask.nonzero().flatten()
    adj_t = to_torch_csr_tensor(ei.flip(0), size=(n, n))  # as speed_vs_pyg.py's PyG runs
    print(f"graph {a.graph}: {n} nodes, {ei.shape[1]} edges; {dev}; torch {torch.__version__}; "
          f"median of {a.steps} interleaved steps after {a.warmup}")
    print("| model | spgnn index | spgnn mask | spgnn mask - index | PyG index | PyG mask | "
          "PyG mask - index |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in a.models.split(","):
        runs = {}
        for lib, edge in (("spgnn", ei), ("pyg", adj_t)):
            for split, sel in (("index", index), ("mask", mask)):
                torch.manual_seed(1)
                m = speed.make_model(snn if lib == "spgnn" else pnn, name, a.features,
                                     a.classes).to(dev)
                opt = torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=5e-4)
                runs[(lib, split)] = (m, opt, edge, sel)
        times = {k: [] for k in runs}
        for step in range(a.warmup + a.steps):
            for k, (m, opt, edge, sel) in runs.items():
                ms = speed.timed_step(m, m, opt, x, y, sel, edge)
                if step >= a.warmup:
                    times[k].append(ms)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"| {name} | {med['spgnn', 'index']:.2f} | {med['spgnn', 'mask']:.2f} | "
              f"{med['spgnn', 'mask'] - med['spgnn', 'index']:+.2f} | {med['pyg', 'index']:.2f} | "
              f"{med['pyg', 'mask']:.2f} | {med['pyg', 'mask'] - med['pyg', 'index']:+.2f} |")
        del runs
        if dev.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
