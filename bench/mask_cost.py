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
import statistics

import torch

from _interleaved import inputs, parse, parser, speed


def main():
    a = parse(parser(__doc__, "gcn"))
    import spgnn.nn as snn
    import torch_geometric.nn as pnn
    from torch_geometric.utils import to_torch_csr_tensor

    dev, ei, n, x, y, mask = inputs(a)
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
