"""Host time of a training step where the compute is negligible: a 2-layer model on a tiny
random graph, spgnn.nn against torch_geometric.nn, with spgnn's eager fronts (the default) and
with every spgnn call routed through the torch custom ops (what torch.compile traces). On a GPU
this is the time a small graph's epoch costs whatever the kernels do; on the CPU it is the same
Python and dispatcher work. Median ms per step, the three variants interleaved step by step.

    PYTHONPATH=build/python python3 bench/host_overhead.py [--models gcn,sage,gin,gat]
        [--device cpu|cuda] [--steps 400]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import spgnn
import spgnn.nn as snn
from spgnn import _ops


def make(lib, kind, fin, hid, classes):
    if kind == "gcn":
        return torch.nn.ModuleList([lib.GCNConv(fin, hid, cached=True),
                                    lib.GCNConv(hid, classes, cached=True)])
    if kind == "sage":
        return torch.nn.ModuleList([lib.SAGEConv(fin, hid), lib.SAGEConv(hid, classes)])
    if kind == "gat":
        return torch.nn.ModuleList([lib.GATConv(fin, hid), lib.GATConv(hid, classes)])
    if kind == "gin":
        def mlp(a, b):
            return torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(),
                                       torch.nn.Linear(b, b))
        return torch.nn.ModuleList([lib.GINConv(mlp(fin, hid)), lib.GINConv(mlp(hid, classes))])
    raise ValueError(f"unknown model {kind!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gcn,sage,gin,gat")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--edges", type=int, default=256)
    a = ap.parse_args()
    try:
        import torch_geometric.nn as pnn
    except ImportError:
        pnn = None
    dev = torch.device(a.device)
    torch.manual_seed(0)
    n, fin, hid, classes = a.nodes, 32, 16, 4
    ei = torch.randint(0, n, (2, a.edges), device=dev)
    x = torch.randn(n, fin, device=dev)
    y = torch.randint(0, classes, (n,), device=dev)
    mask = torch.rand(n, device=dev) < 0.6
    direct = _ops._direct

    def step(m, opt, g):
        opt.zero_grad()
        h = F.dropout(F.relu(m[0](x, g)), 0.5, True)
        loss = F.cross_entropy(m[1](h, g)[mask], y[mask])
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()

    print(f"host ms per training step, {n} nodes, {a.edges} edges, {a.device}, torch "
          f"{torch.__version__}, median of {a.steps}")
    print("| model | spgnn.nn | spgnn.nn via custom ops | PyG | spgnn / PyG |")
    print("|---|---:|---:|---:|---:|")
    for kind in a.models.split(","):
        variants = {"fronts": snn, "custom ops": snn}
        if pnn is not None:
            variants["pyg"] = pnn
        runs = {}
        for name, lib in variants.items():
            torch.manual_seed(1)
            m = make(lib, kind, fin, hid, classes).to(dev)
            g = spgnn.Graph(ei, num_nodes=n) if lib is snn else ei
            runs[name] = (m, torch.optim.Adam(m.parameters(), 0.01), g)
        times = {k: [] for k in runs}
        for rep in range(a.steps + 50):
            for name, (m, opt, g) in runs.items():
                _ops._direct = direct if name != "custom ops" else (lambda args: False)
                t = time.perf_counter()
                step(m, opt, g)
                if rep >= 50:
                    times[name].append(time.perf_counter() - t)
        _ops._direct = direct
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        pyg = med.get("pyg", float("nan"))
        print(f"| {kind} | {med['fronts']:.3f} | {med['custom ops']:.3f} | {pyg:.3f} | "
              f"{med['fronts'] / pyg:.2f} |")


if __name__ == "__main__":
    main()
