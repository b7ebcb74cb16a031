"""Edge-cut partitions of a graph for full-graph training on several GPUs: every vertex gets one
owner part, and a part holds the edges into the vertices it owns (what `spgnn partition` writes
to a directory, with halo and send lists; see docs/ARCHITECTURE.md, "Partitions")."""
from __future__ import annotations

from typing import NamedTuple, Optional, Union

import torch
from torch import Tensor

from . import _ops
from ._runtime import C, check_int, check_real
from .graph import Graph

__all__ = ["Partition", "partition", "METHODS"]

METHODS = ("metis", "ldg", "random", "range")


class Partition(NamedTuple):
    owner: Tensor  # int32 [num_nodes]: the part of every vertex
    method: str    # what ran (metis falls back to ldg when it cannot take the graph)
    note: str      # why it fell back, or ""


def partition(graph: Union[Graph, Tensor], parts: int, method: str = "metis", *,
              num_nodes: Optional[int] = None, seed: int = 1,
              imbalance: float = 1.05) -> Partition:
    """The owner part of every vertex of ``graph`` (a ``spgnn.Graph`` or a PyG ``edge_index``
    with ``num_nodes``). ``method``: ``metis`` (METIS k-way, balancing vertices and edges),
    ``ldg`` (restreamed linear deterministic greedy), ``random`` (vertex counts within one) or
    ``range`` (contiguous id ranges of equal load). ``imbalance`` bounds the heaviest part's load
    over the mean (metis, ldg)."""
    if isinstance(graph, Tensor):
        graph = Graph(graph, num_nodes)
    elif not isinstance(graph, Graph):
        raise TypeError(f"graph must be a spgnn.Graph or an edge_index tensor, got "
                        f"{type(graph).__name__}")
    elif num_nodes is not None and num_nodes != graph.num_dst_nodes:
        raise ValueError(f"num_nodes={num_nodes} but the graph has {graph.num_dst_nodes} nodes")
    if graph.num_src_nodes != graph.num_dst_nodes:
        raise ValueError("partition: the graph is bipartite; partitions need one vertex set")
    parts = check_int(parts, "parts", 1, what="a positive int (at most 2^63 - 1)")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    seed = check_int(seed, "seed", 0, 2**64 - 1, what="an int in [0, 2^64)")
    imbalance = check_real(imbalance, "imbalance", 1.0, 10.0)
    owner = torch.empty(graph.num_dst_nodes, dtype=torch.int32)
    used, note = C.partition(_ops._addr(graph.handle()), parts, method, seed, imbalance, owner)
    return Partition(owner, used, note)
