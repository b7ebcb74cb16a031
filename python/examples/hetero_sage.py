#!/usr/bin/env python3
"""A heterogeneous GNN with PyG's HeteroConv and spgnn's layers (lazy widths, bipartite inputs):
papers and authors, paper classes to predict, on a generated graph (no download).

    python hetero_sage.py                 # spgnn.nn's SAGEConv inside torch_geometric's HeteroConv
    python hetero_sage.py --pyg           # the same script with torch_geometric.nn's SAGEConv
    python hetero_sage.py --conv gat      # GATConv per relation instead

The graph: papers of C classes cite papers of their own class (mostly) and are written by
authors who mostly write in one class; paper features are weak class signals, author features
noise. Relations: paper -cites-> paper, author -writes-> paper, paper -rev_writes-> author.
"""
import argparse
import time

import torch
import torch.nn.functional as F

import spgnn
from _common import device


def make_graph(papers=3000, authors=1200, classes=5, feats=32, seed=0, device="cpu"):
    """x_dict, edge_index_dict, paper labels and train/test masks of a planted hetero graph."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (papers,), generator=g)
    author_class = torch.randint(0, classes, (authors,), generator=g)

    def same_class_papers(cls, count):
        # a random paper of class cls for each entry (by rejection from a class-sorted list)
        order = torch.argsort(y)
        starts = torch.searchsorted(y[order], torch.arange(classes))
        sizes = torch.bincount(y, minlength=classes)
        pick = (torch.rand(count, generator=g) * sizes[cls]).long()
        return order[starts[cls] + pick]

    src = torch.randint(0, papers, (8 * papers,), generator=g)
    noisy = torch.rand(src.shape[0], generator=g) < 0.2
    dst = torch.where(noisy, torch.randint(0, papers, src.shape, generator=g),
                      same_class_papers(y[src], src.shape[0]))
    cites = torch.stack([src, dst])
    a = torch.randint(0, authors, (6 * papers,), generator=g)
    noisy = torch.rand(a.shape[0], generator=g) < 0.3
    p = torch.where(noisy, torch.randint(0, papers, a.shape, generator=g),
                    same_class_papers(author_class[a], a.shape[0]))
    writes = torch.stack([a, p])
    signal = F.one_hot(y, feats).float() if classes <= feats else torch.zeros(papers, feats)
    x_paper = torch.randn(papers, feats, generator=g) + 0.6 * signal
    x_author = torch.randn(authors, feats // 2, generator=g)
    train = torch.rand(papers, generator=g) < 0.3
    x = {"paper": x_paper, "author": x_author}
    ei = {("paper", "cites", "paper"): cites, ("author", "writes", "paper"): writes,
          ("paper", "rev_writes", "author"): writes.flip(0)}
    to = lambda t: t.to(device)  # noqa: E731
    return ({k: to(v) for k, v in x.items()}, {k: to(v) for k, v in ei.items()}, to(y),
            to(train), to(~train))


def build(nn, classes, hidden=64, conv="sage"):
    """Two HeteroConv layers of `nn`'s SAGEConv or GATConv (spgnn.nn or torch_geometric.nn) with
    lazy widths, then a Linear on the papers."""
    from torch_geometric.nn import HeteroConv

    def layer():
        if conv == "gat":
            return {rel: nn.GATConv((-1, -1), hidden, add_self_loops=False)
                    for rel in (("paper", "cites", "paper"), ("author", "writes", "paper"),
                                ("paper", "rev_writes", "author"))}
        return {rel: nn.SAGEConv((-1, -1), hidden)
                for rel in (("paper", "cites", "paper"), ("author", "writes", "paper"),
                            ("paper", "rev_writes", "author"))}

    class HeteroGNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = HeteroConv(layer(), aggr="sum")
            self.conv2 = HeteroConv(layer(), aggr="sum")
            self.out = torch.nn.Linear(hidden, classes)

        def forward(self, x_dict, edge_index_dict):
            x_dict = {k: F.relu(v) for k, v in self.conv1(x_dict, edge_index_dict).items()}
            x_dict = self.conv2(x_dict, edge_index_dict)
            return self.out(x_dict["paper"])

    return HeteroGNN()


def train(model, data, epochs=100, lr=0.01):
    """Full-batch training; the test accuracy after the last epoch and the median ms per step."""
    x, ei, y, tr, te = data
    model(x, ei)  # materialises the lazy widths before the optimizer sees the parameters
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x, ei)[tr], y[tr]).backward()
        opt.step()
        if y.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    model.eval()
    with torch.no_grad():
        acc = (model(x, ei).argmax(1)[te] == y[te]).float().mean().item()
    return acc, sorted(times)[len(times) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--conv", choices=("sage", "gat"), default="sage")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pyg", action="store_true", help="torch_geometric.nn's layers instead")
    args = ap.parse_args()
    if args.epochs < 1:
        ap.error(f"--epochs must be >= 1, got {args.epochs}")
    args.device = device(ap, args.device)
    if args.pyg:
        import torch_geometric.nn as nn
    else:
        nn = spgnn.nn
    data = make_graph(device=args.device)
    torch.manual_seed(args.seed)
    model = build(nn, classes=5, conv=args.conv).to(args.device)
    acc, ms = train(model, data, args.epochs)
    print(f"hetero {args.conv} ({'PyG' if args.pyg else 'spgnn'}): test accuracy {acc:.4f}, "
          f"{ms:.2f} ms per training step")


if __name__ == "__main__":
    main()
