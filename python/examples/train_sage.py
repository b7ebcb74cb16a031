#!/usr/bin/env python3
"""GraphSAGE (mean aggregation, 2 layers of 256), written exactly as for PyG.

    python train_sage.py --dataset amazon-computers
    python train_sage.py --dataset amazon-computers --pyg
"""
import torch
import torch.nn.functional as F

from _common import parser, run


def build(nn, fin, classes, hidden=256):
    """The model, from a module providing SAGEConv (spgnn.nn or torch_geometric.nn)."""
    class SAGE(torch.nn.Module):
        def __init__(self, fin, hidden, classes):
            super().__init__()
            self.conv1 = nn.SAGEConv(fin, hidden)
            self.conv2 = nn.SAGEConv(hidden, classes)

        def forward(self, x, edge_index):
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=0.5, training=self.training)
            return self.conv2(x, edge_index)

    return SAGE(fin, hidden, classes)


def main():
    args = parser(__doc__.splitlines()[0], dataset="amazon-computers").parse_args()
    run(build, "GraphSAGE", args)


if __name__ == "__main__":
    main()
