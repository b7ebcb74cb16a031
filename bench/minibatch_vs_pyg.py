#!/usr/bin/env python3
"""Mini-batch training (a sampled subgraph each step, as PyG's NeighborLoader gives it) with
spgnn.nn layers and with torch_geometric.nn layers, on the same batches.

    PYTHONPATH=build/python python3 bench/minibatch_vs_pyg.py --graph random:232965:489
    PYTHONPATH=build/python python3 bench/minibatch_vs_pyg.py --graph G.npy --models sage,gat

Full-batch training builds a graph once; a mini-batch loop hands the layers a new edge_index
every step, so spgnn builds (sorts) every batch's graph and the variants its layers need. This
measures whether the drop-in still pays there. The sampler is PyG's: per seed (batch_size of
them), up to `--fanout` in-neighbours a hop, all of them where a node has fewer, with
replacement otherwise; the batch is the union of the hops' edges, relabelled with the seeds
first, and the loss reads the seeds' rows (`out[:batch_size]`). It runs on the GPU in torch,
ahead of the timing, and each step gets a fresh copy of its batch's edge_index (a new tensor,
as a loader yields), so no library reuses a graph it has already seen.

Models (hidden sizes as PyG's examples): sage 2x256, gcn 2x256 (cached=False: the graph
changes), gat 2x64 with 4 heads, gin 3x256 (speed_vs_pyg.py's networks: ReLU, ELU for GAT);
602 features, 41 classes, dropout 0.5. Every number
is the median ms of a training step (forward, loss, backward, Adam) after warm-up, the GPU idle
before and after each step.
"""
import argparse
import importlib.util
import os
import statistics
import time

import torch
import torch.nn.functional as F

# The networks are python/examples/speed_vs_pyg.py's (ReLU, ELU for GAT), at these sizes.
HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "speed_vs_pyg", os.path.join(HERE, "..", "python", "examples", "speed_vs_pyg.py"))
speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(speed)

MODELS = {"sage": (2, 256, 1), "gcn": (2, 256, 1), "gat": (2, 64, 4), "gin": (3, 256, 1)}


def load_graph(spec, device, gen):
    """edge_index [2, E] (row 0 = source) and the node count: `random:N:D` draws N*D edges
    uniformly (a directed graph of the Reddit shape at N=232965, D=489), else an .npy file."""
    if spec.startswith("random:"):
        _, n, d = spec.split(":")
        n, d = int(n), int(d)
        ei = torch.randint(0, n, (2, n * d), generator=gen, device=device)
        return ei, n
    import numpy as np
    ei = torch.from_numpy(np.load(spec)).to(device=device, dtype=torch.int64)
    return ei, int(ei.max()) + 1


class Sampler:
    """In-neighbour sampling over a CSC (edges grouped by target), in torch on one device."""

    def __init__(self, edge_index, n, device):
        order = torch.argsort(edge_index[1])
        self.src = edge_index[0][order].contiguous()
        deg = torch.bincount(edge_index[1], minlength=n)
        self.indptr = torch.zeros(n + 1, dtype=torch.int64, device=device)
        self.indptr[1:] = torch.cumsum(deg, 0)
        self.map = torch.full((n,), -1, dtype=torch.int64, device=device)
        self.device = device

    def sample(self, seeds, fanouts, gen):
        dev = self.device
        nodes = [seeds]
        self.map[seeds] = torch.arange(seeds.numel(), device=dev)
        count = seeds.numel()
        frontier, srcs, dsts = seeds, [], []
        for f in fanouts:
            start = self.indptr[frontier]
            deg = self.indptr[frontier + 1] - start
            take = torch.clamp(deg, max=f)
            owner = torch.repeat_interleave(torch.arange(frontier.numel(), device=dev), take)
            first = torch.cumsum(take, 0) - take
            j = torch.arange(owner.numel(), device=dev) - first[owner]
            d = deg[owner]
            draw = (torch.rand(owner.numel(), generator=gen, device=dev) * d).long()
            off = torch.where(d <= f, j, draw)
            src = self.src[start[owner] + off]
            dst = frontier[owner]
            new = torch.unique(src[self.map[src] < 0])
            self.map[new] = torch.arange(count, count + new.numel(), device=dev)
            count += new.numel()
            nodes.append(new)
            srcs.append(src)
            dsts.append(dst)
            frontier = new
        n_id = torch.cat(nodes)
        src, dst = torch.cat(srcs), torch.cat(dsts)
        edge_index = torch.stack([self.map[src], self.map[dst]])
        self.map[n_id] = -1
        return n_id, edge_index


def run(lib, name, batches, x_all, y_all, a, device):
    torch.manual_seed(0)
    model = speed.make_model(lib, name, x_all.shape[1], a.classes, sizes=MODELS[name],
                             cached=False).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = []
    for step in range(a.warmup + a.steps):
        n_id, ei, bs = batches[step % len(batches)]
        x, y, ei = x_all[n_id], y_all[n_id[:bs]], ei.clone()  # a loader's fresh tensors
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[:bs], y)
        loss.backward()
        opt.step()
        sync()
        if step >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), float(loss.detach())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="random:232965:489")
    ap.add_argument("--models", default="sage,gcn,gat,gin")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanout", default="25,10", help="in-neighbours a hop, first hop first")
    ap.add_argument("--features", type=int, default=602)
    ap.add_argument("--classes", type=int, default=41)
    ap.add_argument("--batches", type=int, default=20, help="distinct batches, drawn once")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--skip-pyg", action="store_true")
    a = ap.parse_args()
    device = torch.device(a.device)
    gen = torch.Generator(device=device).manual_seed(1)
    edge_index, n = load_graph(a.graph, device, gen)
    fanouts = [int(f) for f in a.fanout.split(",")]
    sampler = Sampler(edge_index, n, device)
    del edge_index
    x_all = torch.randn(n, a.features, generator=gen, device=device)
    y_all = torch.randint(0, a.classes, (n,), generator=gen, device=device)
    perm = torch.randperm(n, generator=gen, device=device)
    batches = []
    t0 = time.perf_counter()
    for b in range(a.batches):
        seeds = perm[b * a.batch_size:(b + 1) * a.batch_size]
        n_id, ei = sampler.sample(seeds, fanouts, gen)
        batches.append((n_id, ei, seeds.numel()))
    if device.type == "cuda":
        torch.cuda.synchronize()
    sample_ms = (time.perf_counter() - t0) * 1e3 / a.batches
    nodes = statistics.mean(b[0].numel() for b in batches)
    edges = statistics.mean(b[1].shape[1] for b in batches)
    print(f"graph {a.graph}: {n} nodes; batches of {a.batch_size} seeds, fanout {a.fanout}: "
          f"{nodes:.0f} nodes, {edges:.0f} edges on average; sampling {sample_ms:.2f} ms a batch "
          f"(not in the step times)")
    import spgnn.nn as snn
    libs = [("spgnn.nn", snn)]
    if not a.skip_pyg:
        import torch_geometric.nn as pnn
        libs.append(("torch_geometric.nn", pnn))
    print(f"| model | {' | '.join(name + ' ms/step' for name, _ in libs)} |"
          + (" spgnn / PyG speedup |" if len(libs) == 2 else ""))
    print("|---|" + "---:|" * (len(libs) + (len(libs) == 2)))
    for name in a.models.split(","):
        ms = []
        for lib_name, lib in libs:
            try:
                t, _ = run(lib, name, batches, x_all, y_all, a, device)
                ms.append(t)
            except torch.cuda.OutOfMemoryError:
                ms.append(None)
                torch.cuda.empty_cache()
        cells = ["OOM" if t is None else f"{t:.2f}" for t in ms]
        if len(ms) == 2:
            cells.append(f"{ms[1] / ms[0]:.2f}x" if None not in ms else "-")
        print(f"| {name} {'x'.join(map(str, MODELS[name][:2]))} | {' | '.join(cells)} |",
              flush=True)


if __name__ == "__main__":
    main()
