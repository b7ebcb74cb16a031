#!/usr/bin/env python3
"""Training speed of one PyG-style Python training loop with spgnn.nn layers (eager and
torch.compile(fullgraph=True)), the same loop with torch_geometric.nn layers (PyG at its best:
edge_index or a sparse adj_t, GCNConv cached), and `spgnn train` on the same graph and model.

Usage: bench/python_vs_pyg.py --spgnn build/spgnn --graph G.npy --graph-spg G.spg [--name sym]
       [--models gcn,gin,sage,gat] [--epochs 20] [--json out.json] [--skip-graph]
"graphed" is the spgnn.nn step captured once in a CUDA graph (torch.cuda.graph) and replayed
(python/examples/speed_vs_pyg.py's time_training_graphed): no per-step host work; "comp+graph"
the torch.compile'd model's step captured the same way.
G.npy is an edge_index ([2, E], row 0 = source: what `spgnn generate -o G.npy` writes); G.spg
the same graph for the CLI. Models and sizes are python/examples/speed_vs_pyg.py's (the
training suite's): gcn 2x16, gin 5x64, sage 4x256, gat 5x16 (1 head), 602 features, 41
classes, dropout 0.5. Every number is the median ms of a training step after warm-up.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "speed_vs_pyg", os.path.join(HERE, "..", "python", "examples", "speed_vs_pyg.py"))
speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speed)


def cli_ms(a, name):
    layers, hidden, heads = speed.MODELS[name]
    cmd = [a.spgnn, "train", "--model", name, "--layers", str(layers), "--hidden", str(hidden),
           "--heads", str(heads), "--dataset", a.graph_spg or a.graph, "--features",
           str(a.features), "--classes", str(a.classes), "--epochs", str(a.epochs),
           "--eval-every", "0", "--device", "cuda", "--format", "json", "--dropout", "0.5",
           "--symmetrize", "off"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return "error: " + (p.stderr.strip().splitlines() or ["?"])[-1][:80]
    j = json.loads(p.stdout)
    return float(j["ms_per_epoch"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spgnn", required=True)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--graph-spg", default="")
    ap.add_argument("--name", default="")
    ap.add_argument("--models", default="gcn,gin,sage,gat")
    ap.add_argument("--features", type=int, default=602)
    ap.add_argument("--classes", type=int, default=41)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--split", choices=("mask", "index"), default="mask",
                    help="training nodes as a boolean mask or an index tensor")
    ap.add_argument("--skip-pyg", action="store_true")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--skip-graph", action="store_true",
                    help="skip the spgnn.nn step captured in a CUDA graph and replayed")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    dev = torch.device("cuda")
    ei, n = speed.load_graph(a.graph, dev)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(n, a.features, generator=g) * 2 - 1).to(dev)
    y = torch.randint(0, a.classes, (n,), generator=g).to(dev)
    mask = speed.training_split(n, a.split, g, dev)
    label = a.name or os.path.basename(a.graph)
    print(f"{label}: {n} nodes, {ei.shape[1]} edges, training nodes by {a.split}, torch "
          f"{torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else str(v)  # noqa: E731
    print(f"{'model':<6} {'spgnn train':>12} {'spgnn.nn':>10} {'compiled':>10} {'graphed':>10} "
          f"{'PyG ei':>10} {'PyG adj_t':>10} {'nn/train':>9} {'graphed/train':>14} "
          f"{'vs PyG':>8} {'graphed vs PyG':>15} {'compiled/eager':>15} {'comp+graph':>11} "
          f"{'comp+graph/eager':>17}", flush=True)
    rows = {}
    adj_t = None
    import spgnn
    for name in a.models.split(","):
        r = {"spgnn_train": cli_ms(a, name)}
        torch.manual_seed(0)
        r["spgnn_nn"] = speed.attempt(lambda: speed.time_training(
            speed.make_model(spgnn.nn, name, a.features, a.classes), x, y, mask, ei, a.epochs,
            a.warmup))
        if not a.skip_compile:
            torch._dynamo.reset()
            r["spgnn_nn_compiled"] = speed.attempt(lambda: speed.time_training(
                speed.make_model(spgnn.nn, name, a.features, a.classes), x, y, mask, ei,
                a.epochs, a.warmup, compile_=True))
        if not a.skip_graph:
            torch.manual_seed(0)
            r["spgnn_nn_graphed"] = speed.attempt(lambda: speed.time_training_graphed(
                speed.make_model(spgnn.nn, name, a.features, a.classes), x, y, mask, ei,
                a.epochs, a.warmup))
            if not a.skip_compile:
                torch._dynamo.reset()
                torch.manual_seed(0)
                r["spgnn_nn_compiled_graphed"] = speed.attempt(
                    lambda: speed.time_training_graphed(
                        speed.make_model(spgnn.nn, name, a.features, a.classes), x, y, mask, ei,
                        a.epochs, a.warmup, compile_=True))
        if not a.skip_pyg:
            import torch_geometric.nn as pyg
            from torch_geometric.utils import to_torch_csr_tensor
            r["pyg_edge_index"] = speed.attempt(lambda: speed.time_training(
                speed.make_model(pyg, name, a.features, a.classes), x, y, mask, ei, a.epochs,
                a.warmup))
            if adj_t is None:
                adj_t = to_torch_csr_tensor(ei.flip(0), size=(n, n))
            r["pyg_adj_t"] = speed.attempt(lambda: speed.time_training(
                speed.make_model(pyg, name, a.features, a.classes), x, y, mask, adj_t, a.epochs,
                a.warmup))
        ours = r["spgnn_nn"]
        best = min((v for k, v in r.items() if k.startswith("pyg") and isinstance(v, float)),
                   default=None)
        ratio = lambda p, q: f"{p / q:.2f}" if isinstance(p, float) and isinstance(q, float) else "-"  # noqa: E731
        gr = r.get("spgnn_nn_graphed")
        print(f"{name:<6} {fmt(r['spgnn_train']):>12} {fmt(ours):>10} "
              f"{fmt(r.get('spgnn_nn_compiled', '-')):>10} {fmt(gr or '-'):>10} "
              f"{fmt(r.get('pyg_edge_index', '-')):>10} "
              f"{fmt(r.get('pyg_adj_t', '-')):>10} {ratio(ours, r['spgnn_train']):>9} "
              f"{ratio(gr, r['spgnn_train']):>14} "
              f"{(ratio(best, ours) + 'x') if best else '-':>8} "
              f"{(ratio(best, gr) + 'x') if best and isinstance(gr, float) else '-':>15} "
              f"{ratio(r.get('spgnn_nn_compiled'), ours):>15} "
              f"{fmt(r.get('spgnn_nn_compiled_graphed', '-')):>11} "
              f"{ratio(r.get('spgnn_nn_compiled_graphed'), ours):>17}", flush=True)
        rows[name] = r
    if a.json:
        speed.write_json(a.json, {"graph": label, "nodes": n, "edges": int(ei.shape[1]),
                                  "split": a.split, "torch": torch.__version__,
                                  "gpu": torch.cuda.get_device_name(), "ms": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
