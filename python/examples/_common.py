"""What the examples share: arguments, the dataset, a full-batch training loop and timing. The
models themselves are plain PyG-style modules in each example."""
import argparse
import math
import os
import time

import torch
import torch.nn.functional as F

import spgnn

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("SPGNN_DATA") or os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared", "data"))


def device(ap, spec):
    """The torch device named by --device, or a parser error saying why it cannot be used."""
    try:
        dev = torch.device(spec)
    except RuntimeError:
        ap.error(f"--device: expected cpu, cuda or cuda:N, got {spec!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device {spec}: no GPU is visible")
    if dev.type not in ("cpu", "cuda"):
        ap.error(f"--device: spgnn runs on cpu or cuda, got {spec!r}")
    return dev


class _Parser(argparse.ArgumentParser):
    """The examples' flags, checked: a bad value is a usage error, not a traceback mid-run."""

    def parse_args(self, *a, **k):
        args = super().parse_args(*a, **k)
        if args.epochs < 1:
            self.error(f"--epochs must be >= 1, got {args.epochs}")
        if not (math.isfinite(args.lr) and args.lr > 0):
            self.error(f"--lr must be a finite number > 0, got {args.lr}")
        if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
            self.error(f"--weight-decay must be a finite number >= 0, got {args.weight_decay}")
        args.device = device(self, args.device)
        return args


def parser(description, dataset="cora", epochs=200, lr=0.01, weight_decay=5e-4):
    ap = _Parser(description=description)
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
    try:
        d = spgnn.io.read_dataset(path)
    except (ValueError, OSError) as e:
        raise SystemExit(f"dataset {args.dataset!r}: {e}") from None
    missing = [f for f, key in (("x.npy", "x"), ("y.npy", "y"), ("train_idx.npy", "train_mask"),
                                ("val_idx.npy", "val_mask"), ("test_idx.npy", "test_mask"))
               if getattr(d, key) is None]
    if missing:
        raise SystemExit(f"dataset {args.dataset!r}: {path} has no {', '.join(missing)}; the "
                         "examples train on features, labels and a train/val/test split")
    # Unlabelled vertices (y = -1) take part in no loss and no accuracy.
    for key in ("train_mask", "val_mask", "test_mask"):
        setattr(d, key, getattr(d, key) & (d.y >= 0))
    if not bool(d.train_mask.any()):
        raise SystemExit(f"dataset {args.dataset!r}: the train split has no labelled vertex")
    if args.normalize_features:
        d.x = d.x / d.x.sum(1, keepdim=True).clamp(min=1e-12)
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        setattr(d, key, getattr(d, key).to(args.device))
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
