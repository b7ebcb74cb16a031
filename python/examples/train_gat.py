#!/usr/bin/env python3
"""A 2-layer GAT (8 heads of 8, as in the GAT paper), written exactly as for PyG.

    python train_gat.py --dataset cora            # spgnn.nn.GATConv (one fused kernel per layer)
    python train_gat.py --dataset cora --pyg      # torch_geometric.nn.GATConv, same script
"""
import torch
import torch.nn.functional as F

from _common import parser, run


def build(nn, fin, classes, hidden=8, heads=8):
    """The model, from a module providing GATConv (spgnn.nn or torch_geometric.nn)."""
    class GAT(torch.nn.Module):
        def __init__(self, fin, hidden, classes, heads=8):
            super().__init__()
            self.conv1 = nn.GATConv(fin, hidden, heads=heads, dropout=0.6)
            self.conv2 = nn.GATConv(hidden * heads, classes, heads=1, concat=False, dropout=0.6)

        def forward(self, x, edge_index):
            x = F.dropout(x, p=0.6, training=self.training)
            x = F.elu(self.conv1(x, edge_index))
            x = F.dropout(x, p=0.6, training=self.training)
            return self.conv2(x, edge_index)

    return GAT(fin, hidden, classes, heads)


def main():
    run(build, "GAT", parser(__doc__.splitlines()[0], lr=0.005).parse_args())


if __name__ == "__main__":
    main()
