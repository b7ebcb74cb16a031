#!/usr/bin/env python3
"""The same training loop with spgnn.nn layers and with torch_geometric.nn layers, on one graph.

    python speed_vs_pyg.py                                   # a 20k-node random graph, GCN/GIN/SAGE/GAT
    python speed_vs_pyg.py --graph G.npy --models gcn,sage    # an edge_index .npy (row 0 = source)
    python speed_vs_pyg.py --graph ../../../shared/data/amazon-computers
    python speed_vs_pyg.py --models gat --size gat=2,8,8     # the GAT paper's 8 heads of 8

Per model: median ms of a training step (forward, loss, backward, Adam) after warm-up, for
spgnn (eager, and compiled with torch.compile(fullgraph=True)) and PyG, both at their best: PyG
on edge_index and on a sparse adj_t (torch CSR; GCNConv with cached=True), the faster of the two
counted. Features and labels are random (speed only). --json writes the numbers as JSON.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

import spgnn

# name: (layers, hidden, heads) -- the settings of spgnn's training suite (bench/train_suite.sh)
MODELS = {"gcn": (2, 16, 1), "gin": (5, 64, 1), "sage": (4, 256, 1), "gat": (5, 16, 1)}


def make_model(lib, name, fin, classes, pyg_sparse=False, sizes=None, cached=True):
    """`name`'s network from `lib` (spgnn.nn or torch_geometric.nn): MODELS' sizes, or `sizes`
    = (layers, hidden, heads); GCNConv caches its normalised graph unless cached=False (a graph
    that changes every step)."""
    layers, hidden, heads = sizes or MODELS[name]

    def conv(i, o, last):
        if name == "gcn":
            return lib.GCNConv(i, o, cached=cached)
        if name == "gin":
            mlp = torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))
            return lib.GINConv(mlp)
        if name == "gat":
            return lib.GATConv(i, o, heads=1 if last else heads, dropout=0.5)
        return lib.SAGEConv(i, o)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [fin] + [hidden * heads] * (layers - 1)
            self.convs = torch.nn.ModuleList(
                conv(dims[i], classes if i + 1 == layers else hidden, i + 1 == layers)
                for i in range(layers))
            self.act = F.elu if name == "gat" else F.relu

        def forward(self, x, edge_index):
            x = F.dropout(x, 0.5, self.training)
            for i, c in enumerate(self.convs):
                x = c(x, edge_index)
                if i + 1 < len(self.convs):
                    x = F.dropout(self.act(x), 0.5, self.training)
            return x

    return Net()


def training_split(n, kind, gen, device):
    """60% of the nodes as PyG's tutorials pick them (a boolean mask: `out[mask]` makes the host
    wait for the GPU, twice a step) or as OGB's scripts do (an index tensor: no wait)."""
    mask = torch.rand(n, generator=gen) < 0.6
    return (mask if kind == "mask" else mask.nonzero().flatten()).to(device)


def timed_step_host(model, run, opt, x, y, mask, edge):
    """(wall ms, host ms) of one training step (forward, loss, backward, Adam); the GPU is idle
    before and after. Host ms ends when the step's last call returns, before the closing
    synchronisation. ``run`` is the model or its compiled form."""
    sync = torch.cuda.synchronize if x.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    model.train()
    opt.zero_grad()
    loss = F.cross_entropy(run(x, edge)[mask], y[mask])
    loss.backward()
    opt.step()
    t1 = time.perf_counter()
    sync()
    return (time.perf_counter() - t0) * 1e3, (t1 - t0) * 1e3


def timed_step(model, run, opt, x, y, mask, edge) -> float:
    """Wall ms of timed_step_host's step."""
    return timed_step_host(model, run, opt, x, y, mask, edge)[0]


def time_training(model, x, y, mask, edge, epochs, warmup, compile_=False):
    model = model.to(x.device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    run = torch.compile(model, fullgraph=True) if compile_ else model
    times = [timed_step(model, run, opt, x, y, mask, edge) for _ in range(warmup + epochs)]
    times = sorted(times[warmup:])
    return times[len(times) // 2]


def time_training_graphed(model, x, y, mask, edge, epochs, warmup, compile_=False):
    """The same training step captured once in a CUDA graph and replayed (torch.cuda.graph):
    ms per replayed step. The step runs eagerly ``warmup`` times first (at least 2, on a side
    stream, torch's recipe), so every cached graph variant and Adam's state exist before the
    capture. A boolean mask becomes an index tensor before the capture: indexing by a mask makes
    the host wait for the GPU, which a graph cannot replay. Adam is ``capturable``. With
    ``compile_`` the model is torch.compile'd first (its warm-up steps compile it), and the
    compiled step is what the graph captures."""
    model = model.to(x.device).train()
    run = torch.compile(model, fullgraph=True) if compile_ else model
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4, capturable=True)
    idx = mask.nonzero().flatten() if mask.dtype == torch.bool else mask
    xi, yi = x, y[idx]

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(run(xi, edge)[idx], yi).backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(2, warmup)):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    times = []
    for _ in range(epochs + 1):  # (the first replay uploads the graph)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    times = sorted(times[1:])
    return times[len(times) // 2]


def write_json(path, obj):
    """obj as JSON at path, written whole or not at all (a temporary name, then a rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def attempt(fn):
    """A number, or why there is none (PyG running out of memory is a result, not a crash)."""
    try:
        return fn()
    except torch.cuda.OutOfMemoryError:
        return "OOM"
    except Exception as e:  # noqa: BLE001 -- reported in the table
        return f"error: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def load_graph(spec, device):
    if spec.startswith("random:"):
        try:
            _, n, deg = spec.split(":")
            n, deg = int(n), int(deg)
        except ValueError:
            raise SystemExit(f"--graph {spec}: expected random:N:DEG with integers N and DEG")
        if n < 1 or deg < 1:
            raise SystemExit(f"--graph {spec}: N and DEG must be >= 1")
        g = torch.Generator().manual_seed(1)
        ei = torch.randint(0, n, (2, n * deg), generator=g)
        return torch.cat([ei, ei.flip(0)], 1).to(device), n
    if os.path.isdir(spec):
        d = spgnn.io.read_dataset(spec)
        return d.edge_index.to(device), d.num_nodes
    try:
        ei = spgnn.io.read_npy(spec)
    except ValueError as e:
        raise SystemExit(f"--graph: {e}") from None
    if ei.dim() != 2 or ei.shape[0] != 2:
        raise SystemExit(f"{spec}: expected an edge_index [2, E], got {tuple(ei.shape)}")
    return ei.to(device), int(ei.max()) + 1


def parse_size(ap, spec):
    """(layers, hidden, heads) of a --size MODEL=LAYERS,HIDDEN,HEADS, or an argparse error."""
    name, eq, rest = spec.partition("=")
    if name not in MODELS or not eq:
        ap.error(f"--size {spec}: expected MODEL=LAYERS,HIDDEN,HEADS with MODEL one of "
                 f"{', '.join(MODELS)}")
    try:
        layers, hidden, heads = (int(v) for v in rest.split(","))
    except ValueError:
        ap.error(f"--size {spec}: expected three integers LAYERS,HIDDEN,HEADS after '='")
    if min(layers, hidden, heads) < 1:
        ap.error(f"--size {spec}: LAYERS, HIDDEN and HEADS must be >= 1")
    if heads != 1 and name != "gat":
        ap.error(f"--size {spec}: only gat has heads (HEADS must be 1 for {name})")
    return layers, hidden, heads


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="random:20000:25",
                    help="random:N:DEG, an edge_index .npy (PyG order), or a dataset directory")
    ap.add_argument("--models", default="gcn,gin,sage,gat")
    ap.add_argument("--features", type=int, default=602)
    ap.add_argument("--classes", type=int, default=41)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--split", choices=("mask", "index"), default="mask",
                    help="training nodes as a boolean mask (PyG's tutorials) or an index tensor "
                         "(OGB's scripts)")
    ap.add_argument("--skip-pyg", action="store_true")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--size", action="append", default=[], metavar="MODEL=LAYERS,HIDDEN,HEADS",
                    help="a model's sizes instead of the training suite's (repeatable; e.g. "
                         "gat=2,8,8: two layers, 8 heads of 8 in the hidden one)")
    ap.add_argument("--json", default="", help="also write the results to this file")
    a = ap.parse_args()
    names = a.models.split(",")
    bad = [n for n in names if n not in MODELS]
    if bad:
        ap.error(f"unknown model(s) {bad}; choose from {', '.join(MODELS)}")
    sizes = dict(MODELS)
    for spec in a.size:
        sizes[spec.partition("=")[0]] = parse_size(ap, spec)
    for flag, v, lo in (("--epochs", a.epochs, 1), ("--warmup", a.warmup, 0),
                        ("--features", a.features, 1), ("--classes", a.classes, 2)):
        if v < lo:
            ap.error(f"{flag} must be >= {lo}, got {v}")
    from _common import device  # here: bench scripts load this module without examples/ on the path
    dev = device(ap, a.device)
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        ap.error(f"--json {a.json}: its directory does not exist")
    ei, n = load_graph(a.graph, dev)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(n, a.features, generator=g) * 2 - 1).to(dev)
    y = torch.randint(0, a.classes, (n,), generator=g).to(dev)
    mask = training_split(n, a.split, g, dev)
    print(f"graph {a.graph}: {n} nodes, {ei.shape[1]} edges; {a.features} features, "
          f"{a.classes} classes; {dev}; training nodes by {a.split}; torch {torch.__version__}",
          flush=True)
    adj_t = None
    results = {}
    fmt = lambda r: f"{r:.2f}" if isinstance(r, float) else r  # noqa: E731
    for name in names:
        if sizes[name] != MODELS[name]:
            print(f"{name}: {sizes[name][0]} layers, hidden {sizes[name][1]}, "
                  f"{sizes[name][2]} heads", flush=True)
    print(f"{'model':<6} {'spgnn':>10} {'compiled':>10} {'PyG ei':>10} {'PyG adj_t':>10} "
          f"{'vs PyG':>8}", flush=True)
    for name in names:
        r = {}
        torch.manual_seed(0)
        mk = lambda lib: make_model(lib, name, a.features, a.classes, sizes=sizes[name])  # noqa: E731
        r["spgnn"] = attempt(lambda: time_training(mk(spgnn.nn), x, y, mask, ei, a.epochs,
                                                   a.warmup))
        if not a.skip_compile:
            torch._dynamo.reset()
            r["spgnn_compiled"] = attempt(lambda: time_training(
                mk(spgnn.nn), x, y, mask, ei, a.epochs, a.warmup, compile_=True))
        if not a.skip_pyg:
            import torch_geometric.nn as pyg
            from torch_geometric.utils import to_torch_csr_tensor
            r["pyg_edge_index"] = attempt(lambda: time_training(
                mk(pyg), x, y, mask, ei, a.epochs, a.warmup))
            if adj_t is None:
                # PyG's lean path: adj_t (rows = targets), so convs run one SpMM per layer
                adj_t = to_torch_csr_tensor(ei.flip(0), size=(n, n))
            r["pyg_adj_t"] = attempt(lambda: time_training(
                mk(pyg), x, y, mask, adj_t, a.epochs, a.warmup))
        best = min((v for k, v in r.items() if k.startswith("pyg") and isinstance(v, float)),
                   default=None)
        sp = f"{best / r['spgnn']:.2f}x" if best and isinstance(r["spgnn"], float) else "-"
        results[name] = r
        print(f"{name:<6} {fmt(r['spgnn']):>10} {fmt(r.get('spgnn_compiled', '-')):>10} "
              f"{fmt(r.get('pyg_edge_index', '-')):>10} {fmt(r.get('pyg_adj_t', '-')):>10} "
              f"{sp:>8}", flush=True)
    if a.json:
        write_json(a.json, {"graph": a.graph, "nodes": n, "edges": int(ei.shape[1]),
                            "torch": torch.__version__, "device": str(dev), "ms": results,
                            "sizes": {k: dict(zip(("layers", "hidden", "heads"), sizes[k]))
                                      for k in names}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
