"""spgnn: fast sparse kernels for graph neural networks, inside PyTorch.

- ``spgnn.Graph``: a graph built from PyG's edge_index (row 0 = source, row 1 = target), a
  scipy sparse matrix or a torch sparse adj_t.
- ``spgnn.ops``: g-SpMM / g-SDDMM (DGL's vocabulary), edge softmax, fused GAT aggregation,
  MaxK and the CBSR products, as differentiable torch custom ops that trace under
  torch.compile(fullgraph=True).
- ``spgnn.nn``: drop-in GCNConv, SAGEConv, GINConv, GATConv and MaxK for torch_geometric.nn.
- ``spgnn.partition``: edge-cut partitions (METIS, LDG, random, range) for several GPUs, and
  ``spgnn.distributed.HaloExchange``, the differentiable halo exchange of a partition's part.

The compiled core exchanges arrays through DLPack and links no PyTorch, so one build serves
every torch >= 2.4. Ops read their inputs in place and run on the caller's current CUDA stream.
"""
import torch  # noqa: F401  (first: the extension then reuses the CUDA libraries torch loaded)

from . import _C
from . import _ops  # noqa: F401  (registers the torch.ops.spgnn custom ops)
from . import io, nn, ops
from .graph import Graph, clear_cache
from .partition import Partition, partition

__version__ = getattr(_C, "__version__", "0.1.0")
with_cuda = _C.with_cuda

__all__ = ["Graph", "ops", "nn", "io", "clear_cache", "partition", "Partition", "with_cuda",
           "__version__"]
