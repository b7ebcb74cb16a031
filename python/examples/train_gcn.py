#!/usr/bin/env python3
"""A 2-layer GCN (Kipf & Welling), written exactly as for PyG: only the import differs.

    python train_gcn.py --dataset cora            # spgnn.nn.GCNConv
    python train_gcn.py --dataset cora --pyg      # torch_geometric.nn.GCNConv, same script
"""
import torch
import torch.nn.functional as F

from _common import parser, run


def build(nn, fin, classes, hidden=16):
    """The model, from a module providing GCNConv (spgnn.nn or torch_geometric.nn)."""
    class GCN(torch.nn.Module):
        def __init__(self, fin, hidden, classes):
            super().__init__()
            self.conv1 = nn.GCNConv(fin, hidden, cached=True)
            self.conv2 = nn.GCNConv(hidden, classes, cached=True)

        def forward(self, x, edge_index):
            x = F.dropout(x, p=0.5, training=self.training)
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=0.5, training=self.training)
            return self.conv2(x, edge_index)

    return GCN(fin, hidden, classes)


def main():
    run(build, "GCN", parser(__doc__.splitlines()[0]).parse_args())


if __name__ == "__main__":
    main()
