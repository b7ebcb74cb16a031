#!/usr/bin/env python3
"""Training speed of spgnn vs PyG on the same graph file and settings (full batch, ms/epoch).

Usage: bench/train_vs_pyg.py --spgnn build/spgnn --graph G.npy [--features 602 --classes 41]
       [--models gcn,gin,gat,sage,sage-maxk] [--epochs 20] [--skip-pyg] [--profile]
G.npy is an edge_index.npy ([2, E] int64, PyG's order: row 0 = source, row 1 = target; `spgnn
generate ... -o G.npy` writes one); spgnn reads the same file. Both sides get random features and labels
of the same sizes and train the same architecture (the issue's settings below); each prints the
median ms of a training step (forward, loss, backward, Adam) after warm-up. sage-maxk is also
compared with spgnn's own sage (ReLU) from the same run. --profile then reruns each spgnn model
with `spgnn train --profile` (a separate run, so the timed one carries no profiling) and prints
the median ms per phase.
"""
import argparse, json, subprocess, sys, time

SETTINGS = {  # name: (spgnn model, layers, hidden, heads, maxk)
    "gcn": ("gcn", 2, 16, 1, 0),
    "gin": ("gin", 5, 64, 1, 0),
    "gat": ("gat", 5, 16, 1, 0),
    "sage": ("sage", 4, 256, 1, 0),
    "sage-maxk": ("sage", 4, 256, 1, 32),
}


def spgnn_json(a, name, extra=()):
    model, layers, hidden, heads, maxk = SETTINGS[name]
    cmd = [a.spgnn, "train", "--model", model, "--layers", str(layers), "--hidden", str(hidden),
           "--heads", str(heads), "--maxk", str(maxk), "--dataset", a.graph_spg or a.graph,
           "--features", str(a.features), "--classes", str(a.classes), "--epochs", str(a.epochs),
           "--eval-every", "0", "--device", a.device, "--format", "json", "--dropout", "0.5",
           "--symmetrize", "off", *extra]  # the graph as given, as PyG trains on it
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return "error: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    return json.loads(p.stdout)


def run_spgnn(a, name, extra=()):
    j = spgnn_json(a, name, extra)
    return j if isinstance(j, str) else (j["ms_per_epoch"], j["peak_gpu_bytes"])


def dtype_args(spec):
    """'bf16' -> --dtype bf16 (TF32 GEMMs by default); '+tf32' / '+notf32' force the GEMMs'
    precision either way (e.g. 'f32+tf32', 'bf16+notf32')."""
    parts = spec.split("+")
    if parts[0] not in ("f32", "bf16", "f16") or any(p not in ("tf32", "notf32") for p in parts[1:]) \
            or len(parts) > 2:
        raise SystemExit(f"--dtypes: '{spec}' is not f32, bf16 or f16 with an optional "
                         "+tf32 or +notf32")
    extra = {"tf32": ("--tf32",), "notf32": ("--no-tf32",)}.get(parts[1] if len(parts) > 1 else "", ())
    return ("--dtype", parts[0]) + extra


PHASES = [("aggregate_forward", "aggregation fwd"), ("aggregate_backward", "aggregation bwd"),
          ("dense_gemm", "dense GEMM"), ("maxk_cbsr", "MaxK + CBSR"), ("elementwise", "elementwise"),
          ("loss", "loss"), ("optimizer", "Adam"), ("other", "other"), ("total", "epoch")]


def print_profiles(a, names):
    """Median ms per phase of each spgnn model (`spgnn train --profile`), one column per model."""
    cols = {}
    for name in names:
        j = spgnn_json(a, name, ("--profile",))
        cols[name] = j if isinstance(j, str) else j["profile"]["median_ms"]
    print(f"\nspgnn phase profile (median ms over {a.epochs} epochs, "
          f"{'CUDA events' if a.device.startswith('cuda') else 'steady clock'}; a separate run)")
    print(f"{'phase':<16}" + "".join(f"{n:>14}" for n in names))
    for key, label in PHASES:
        row = f"{label:<16}"
        for n in names:
            c = cols[n]
            row += f"{c:>14}" if isinstance(c, str) else f"{c[key]:>14.2f}"
        print(row, flush=True)


def run_pyg(a, name, adj_mode="edge_index"):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv, GINConv, GATConv, SAGEConv
    model_name, layers, hidden, heads, maxk = SETTINGS[name]
    if maxk:
        return "n/a"
    ei = np.load(a.graph)
    dev = torch.device("cuda")
    edge_index = torch.from_numpy(ei).to(dev)  # PyG's order, as spgnn writes it
    n = int(ei.max()) + 1
    if adj_mode == "sparse":
        # PyG's memory-lean path: a sparse adj_t (rows = targets) so convs run SpMM instead of
        # materialising one message per edge.
        from torch_geometric.utils import to_torch_csr_tensor
        edge_index = to_torch_csr_tensor(torch.stack([edge_index[1], edge_index[0]]), size=(n, n))
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(n, a.features, generator=g) * 2 - 1).to(dev)
    y = torch.randint(0, a.classes, (n,), generator=g).to(dev)
    train = (torch.rand(n, generator=g) < 0.6).to(dev)

    def conv(i, o):
        if model_name == "gcn":
            return GCNConv(i, o)
        if model_name == "gin":
            return GINConv(torch.nn.Sequential(torch.nn.Linear(i, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, o)))
        if model_name == "gat":
            return GATConv(i, o, heads=heads)
        return SAGEConv(i, o)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [a.features] + [hidden * heads] * (layers - 1) + [a.classes]
            self.convs = torch.nn.ModuleList(conv(dims[i], dims[i + 1] if i + 1 == layers else hidden)
                                             for i in range(layers))

        def forward(self, h):
            for i, c in enumerate(self.convs):
                h = F.dropout(h, 0.5, self.training)
                h = c(h, edge_index)
                if i + 1 < len(self.convs):
                    h = F.relu(h)
            return h

    try:
        m = Net().to(dev)
        opt = torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=5e-4)
        times = []
        for _ in range(a.epochs):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            m.train()
            opt.zero_grad()
            loss = F.cross_entropy(m(x)[train], y[train])
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        return times[len(times) // 2], torch.cuda.max_memory_allocated()
    except torch.cuda.OutOfMemoryError:
        return "OOM"
    except Exception as e:  # a conv that does not accept this adjacency type
        return "error: " + type(e).__name__
    finally:
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spgnn", required=True)
    ap.add_argument("--graph", required=True, help="edge_index .npy (read by both)")
    ap.add_argument("--graph-spg", default="", help="same graph as .spg (faster for spgnn to load)")
    ap.add_argument("--features", type=int, default=602)
    ap.add_argument("--classes", type=int, default=41)
    ap.add_argument("--models", default="gcn,gin,gat,sage,sage-maxk")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--skip-pyg", action="store_true")
    ap.add_argument("--profile", action="store_true", help="then print spgnn's phase profile")
    ap.add_argument("--device", default="cuda", help="spgnn's device (PyG always runs on cuda)")
    ap.add_argument("--dtypes", default="",
                    help="also time spgnn with these precisions, comma-separated (bf16, f16, f32, "
                         "each optionally +tf32 or +notf32), against its f32 run")
    a = ap.parse_args()
    dtypes = [d for d in a.dtypes.split(",") if d]
    for d in dtypes:
        dtype_args(d)
    fmt = lambda r: f"{r[0]:.2f} ms ({r[1] / 2**30:.1f} GiB)" if isinstance(r, tuple) else r
    names = a.models.split(",")
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        ap.error(f"unknown model(s) {','.join(unknown)}; choose from {','.join(SETTINGS)}")
    print(f"{'model':<10} {'spgnn':>24} {'PyG edge_index':>24} {'PyG sparse adj_t':>24} {'speedup vs best PyG':>20}")
    ours = {}
    for name in names:
        s = ours[name] = run_spgnn(a, name)
        pe = "skipped" if a.skip_pyg else run_pyg(a, name, "edge_index")
        ps = "skipped" if a.skip_pyg else run_pyg(a, name, "sparse")
        best = min((p for p in (pe, ps) if isinstance(p, tuple)), default=None)
        sp = f"{best[0] / s[0]:.2f}x" if isinstance(s, tuple) and best else "-"
        relu = ours.get("sage")
        if name == "sage-maxk" and isinstance(s, tuple) and isinstance(relu, tuple):
            sp = f"{relu[0] / s[0]:.2f}x vs sage"
        print(f"{name:<10} {fmt(s):>24} {fmt(pe):>24} {fmt(ps):>24} {sp:>20}", flush=True)
        for d in dtypes:
            r = run_spgnn(a, name, dtype_args(d))
            vs = f"{s[0] / r[0]:.2f}x vs f32" if isinstance(s, tuple) and isinstance(r, tuple) else "-"
            print(f"{'  ' + d:<12} {fmt(r):>24} {'':>24} {'':>24} {vs:>20}", flush=True)
    if a.profile:
        print_profiles(a, names)


if __name__ == "__main__":
    sys.exit(main())
