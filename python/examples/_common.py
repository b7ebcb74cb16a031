"""What the examples share: arguments, the dataset, a full-batch training loop and timing. The
models themselves are plain PyG-style modules in each example."""
import argparse
import os
import time

import torch
import torch.nn.functional as F

import spgnn

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("SPGNN_DATA") or os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared", "data"))


def parser(description, dataset="cora", epochs=200, lr=0.01, weight_decay=5e-4):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--dataset", default=dataset,
                    help=f"a dataset directory, or a name under {DATA} (cora, citeseer, "
                         "amazon-computers, coauthor-cs)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--weight-decay", type=float, default=weight_decay)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--normalize-features", action="store_true",
                    help="row-normalise x (PyG's T.NormalizeFeatures; off by default, as in PyG)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--pyg", action="store_true",
                    help="use torch_geometric.nn's layers instead of spgnn.nn's (same script)")
    return ap


def load(args):
    path = args.dataset if os.path.isdir(args.dataset) else os.path.join(DATA, args.dataset)
    if not os.path.isdir(path):
        raise SystemExit(f"dataset {args.dataset!r}: no directory {path} (../shared/data holds "
                         "cora, citeseer, amazon-computers, coauthor-cs)")
    d = spgnn.io.read_dataset(path)
    if args.normalize_features:
        d.x = d.x / d.x.sum(1, keepdim=True).clamp(min=1e-12)
    dev = torch.device(args.device)
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        setattr(d, key, getattr(d, key).to(dev))
    return d


def conv_module(args):
    """The module that provides GCNConv, GATConv, SAGEConv: spgnn.nn, or PyG's with --pyg."""
    if args.pyg:
        import torch_geometric.nn as m
        return m
    return spgnn.nn


def run(build, label, args):
    """An example's main: the dataset, the model from `build(nn, in, classes)` on spgnn.nn (or
    PyG's layers with --pyg), training, and the result."""
    d = load(args)
    torch.manual_seed(args.seed)
    model = build(conv_module(args), d.x.shape[1], d.num_classes)
    acc, ms = train(model, d, args)
    print(f"{label} on {d.name} ({'PyG' if args.pyg else 'spgnn'}): test accuracy {acc:.4f}, "
          f"{ms:.2f} ms per training step")


def train(model, d, args, log=True):
    """Full-batch training; returns the test accuracy at the best validation epoch and the
    median ms of a training step."""
    torch.manual_seed(args.seed)
    model = model.to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    run = torch.compile(model, fullgraph=True) if args.compile else model
    best_val = test_at_best = 0.0
    times = []
    for epoch in range(1, args.epochs + 1):
        if d.x.is_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        out = run(d.x, d.edge_index)
        loss = F.cross_entropy(out[d.train_mask], d.y[d.train_mask])
        loss.backward()
        opt.step()
        if d.x.is_cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        model.eval()
        with torch.no_grad():
            pred = run(d.x, d.edge_index).argmax(1)
        accs = [float((pred[m] == d.y[m]).float().mean()) for m in (d.train_mask, d.val_mask,
                                                                    d.test_mask)]
        if accs[1] > best_val:
            best_val, test_at_best = accs[1], accs[2]
        if log and (epoch % 20 == 0 or epoch == args.epochs):
            print(f"epoch {epoch:4d}  loss {float(loss):.4f}  train {accs[0]:.3f}  "
                  f"val {accs[1]:.3f}  test {accs[2]:.3f}")
    times = sorted(times[5:] or times)
    return test_at_best, times[len(times) // 2]
