"""PyG-compatible layers on spgnn's kernels: change ``from torch_geometric.nn import GCNConv``
to ``from spgnn.nn import GCNConv`` and keep the rest of the script."""
from .conv import GATConv, GCNConv, GINConv, SAGEConv
from .dropout import Dropout
from .maxk import MaxK

__all__ = ["GCNConv", "SAGEConv", "GINConv", "GATConv", "MaxK", "Dropout"]
