"""spgnn.Graph: a graph in spgnn's storage format, built from what PyG users have.

Orientation follows PyG: ``edge_index[0]`` holds sources, ``edge_index[1]`` targets, and
messages flow source -> target. Every edge is kept as given (parallel edges and self loops
count, as in PyG's message passing). Inside, edges are sorted by target (spgnn's row-sorted
COO); edge tensors passed to or returned by ``spgnn.ops`` stay in *your* edge order.
"""
from __future__ import annotations

import collections
import numbers
import threading
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _device_graph, _ops
from ._runtime import C, check_int, check_tensor, stream_of

__all__ = ["Graph", "clear_cache"]


def _base_from(obj_nnz):
    obj, nnz = obj_nnz
    return torch.from_dlpack(obj), nnz


class Graph:
    """A graph on one device, with the variants that layers derive from it (GCN normalisation,
    mean weights, self loops, transposes) built on first use and cached.

    Build it with ``Graph(edge_index, num_nodes)`` (PyG's ``edge_index``: ``[2, E]`` int64,
    row 0 = source, row 1 = target), ``Graph.from_scipy(A)`` (``A[i, j]`` = an edge i -> j, as
    ``torch_geometric.utils.from_scipy_sparse_matrix`` reads it) or
    ``Graph.from_sparse_tensor(adj_t)`` (a torch sparse COO/CSR ``adj_t`` as PyG's layers take
    it: ``adj_t[i, j]`` = an edge j -> i). Optional edge weights travel with the graph and are
    the default edge values of the ops (GCNConv uses them as ``edge_weight``).

    Pass it to ``spgnn.nn`` layers in place of ``edge_index`` and to the ops in ``spgnn.ops``.
    """

    def __init__(self, edge_index: Tensor, num_nodes: Optional[int] = None,
                 edge_weight: Optional[Tensor] = None, *,
                 size: Optional[Tuple[int, int]] = None):
        # Any layout: the graph is built in spgnn's own arrays (a sort), so the rows are read
        # through contiguous views or copies of them.
        check_tensor(edge_index, "edge_index", ndim=(2,), dtypes=(torch.int64, torch.int32),
                     contiguous=False)
        if edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E] (row 0 = source, row 1 = "
                             f"target), got {tuple(edge_index.shape)}")
        if size is not None:
            if num_nodes is not None:
                raise ValueError("pass either num_nodes or size=(num_src_nodes, num_dst_nodes)")
            if not isinstance(size, (tuple, list)) or len(size) != 2:
                raise ValueError("size must be a pair (num_src_nodes, num_dst_nodes), got "
                                 f"{size!r}")
            n_src = _check_count(size[0], "size[0]")
            n_dst = _check_count(size[1], "size[1]")
        else:
            if num_nodes is None:
                # PyG's maybe_num_nodes: one more than the largest id.
                num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
            n_src = n_dst = _check_count(num_nodes, "num_nodes")
        if edge_weight is not None:
            check_tensor(edge_weight, "edge_weight", ndim=(1,), dtypes=(torch.float32,),
                         device=edge_index.device, rows=edge_index.shape[1],
                         rows_name="the number of edges E")
        built = None
        if edge_index.is_cuda and C.with_cuda:  # sorted on the GPU (_device_graph), else the host
            built = _device_graph.build(edge_index[1], edge_index[0], edge_weight, n_dst, n_src,
                                        "edge_index[1]", "edge_index[0]")
        try:
            if built is None:
                built = C.build_graph(
                    edge_index[1].contiguous(), edge_index[0].contiguous(),
                    None if edge_weight is None else edge_weight.detach(),
                    n_dst, n_src, "edge_index[1]", "edge_index[0]", stream_of(edge_index))
        except MemoryError as e:  # std::bad_alloc names nothing; a typo in num_nodes is the usual cause
            raise MemoryError(f"cannot allocate a graph of {n_dst} target and {n_src} source nodes "
                              f"({edge_index.shape[1]} edges): check num_nodes / size "
                              f"({e})") from e
        base, nnz = _base_from(built)
        self._init(base, nnz)

    # Pickling (torch.save, copy.deepcopy, multiprocessing) goes by value: the edge list in the
    # order it was built from, its weights and sizes, rebuilt on load (the handle inside names a
    # graph of this process only, and another process may hold a different graph under it).
    def __reduce__(self):
        # edge_index and edge_weight are in the caller's order, so edge_order() survives
        ei, w = self.edge_index.cpu(), self.edge_weight
        w = None if w is None else w.cpu()
        return (_rebuild, (ei, w, self.num_src_nodes, self.num_dst_nodes, str(self.device)))

    def _init(self, base: Tensor, nnz: int):
        self._base = base
        self._nnz = nnz
        self._info = C.graph_info(base.untyped_storage().data_ptr())
        self._edge_source: Optional[Tensor] = None

    @classmethod
    def _wrap(cls, obj_nnz) -> "Graph":
        g = cls.__new__(cls)
        g._init(*_base_from(obj_nnz))
        return g

    # ---- other constructors ---------------------------------------------------------------------
    @classmethod
    def from_edge_index(cls, edge_index: Tensor, num_nodes: Optional[int] = None,
                        edge_weight: Optional[Tensor] = None) -> "Graph":
        return cls(edge_index, num_nodes, edge_weight)

    @classmethod
    def from_scipy(cls, A, device: Union[str, torch.device] = "cpu") -> "Graph":
        """From a scipy sparse matrix: A[i, j] != 0 is an edge i -> j of weight A[i, j]."""
        import numpy as np
        import scipy.sparse as sp
        if not sp.issparse(A):
            raise TypeError(f"from_scipy needs a scipy sparse matrix, got {type(A).__name__}")
        coo = A.tocoo()
        ei = torch.from_numpy(np.stack([coo.row.astype(np.int64), coo.col.astype(np.int64)]))
        w = torch.from_numpy(np.asarray(coo.data, dtype=np.float32))
        return cls(ei.to(device), edge_weight=w.to(device), size=(A.shape[0], A.shape[1]))

    @classmethod
    def from_sparse_tensor(cls, adj_t: Tensor) -> "Graph":
        """From a torch sparse COO or CSR tensor in PyG's ``adj_t`` layout (rows = targets):
        adj_t[i, j] is an edge j -> i whose weight is the stored value."""
        if not isinstance(adj_t, Tensor) or adj_t.layout not in (torch.sparse_coo,
                                                                  torch.sparse_csr):
            raise TypeError("from_sparse_tensor needs a torch sparse COO or CSR tensor, got "
                            f"{getattr(adj_t, 'layout', type(adj_t).__name__)}")
        if adj_t.dim() != 2:
            raise ValueError(f"adj_t must be 2-D, got shape {tuple(adj_t.shape)}")
        if adj_t.layout == torch.sparse_coo:
            t = adj_t.coalesce()
            dst, src = t.indices()
            vals = t.values()
        else:
            rowptr, src = adj_t.crow_indices(), adj_t.col_indices()
            dst = torch.repeat_interleave(torch.arange(adj_t.shape[0], device=rowptr.device),
                                          rowptr[1:] - rowptr[:-1])
            vals = adj_t.values()
        if vals.dtype != torch.float32:
            vals = vals.float()
        ei = torch.stack([src.long(), dst.long()])
        return cls(ei, edge_weight=vals.contiguous(), size=(adj_t.shape[1], adj_t.shape[0]))

    # ---- what it is -----------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        if self.num_src_nodes != self.num_dst_nodes:
            raise ValueError(f"this graph is bipartite ({self.num_src_nodes} sources, "
                             f"{self.num_dst_nodes} targets): use num_src_nodes/num_dst_nodes")
        return self.num_dst_nodes

    @property
    def num_src_nodes(self) -> int:
        return self._info["n_cols"]

    @property
    def num_dst_nodes(self) -> int:
        return self._info["n_rows"]

    @property
    def num_edges(self) -> int:
        return self._nnz

    @property
    def device(self) -> torch.device:
        return torch.device(self._info["device"])

    @property
    def has_weights(self) -> bool:
        return self._info["has_values"]

    def __repr__(self) -> str:
        return (f"spgnn.Graph(num_src_nodes={self.num_src_nodes}, "
                f"num_dst_nodes={self.num_dst_nodes}, num_edges={self.num_edges}, "
                f"device={self.device}, weighted={self.has_weights})")

    def handle(self) -> Tensor:
        """The op-level handle (internal): a view of the graph's own handle storage, which
        torch.compile treats as a graph input and never recycles."""
        return _ops.handle_from_base(self._base, self._nnz)

    def fresh_handle(self) -> Tensor:
        """A handle with storage of its own, for an op to return (internal)."""
        return _ops.wrap_handle(C.rehandle(self._base.untyped_storage().data_ptr()))

    def _tensor(self, name: str) -> Tensor:
        like = torch.empty(0, device=self.device)
        return _ops.graph_tensor(self.handle(), name, like, 0)

    # edge_index and edge_weight answer in the order of the edge list the graph was built from,
    # the order in which spgnn.ops read and write edge tensors: ops.u_mul_e_sum(g, x,
    # g.edge_weight) is the weighted aggregation. (They answered in spgnn's target-sorted order,
    # so that call silently paired each edge with another edge's weight on any unsorted input,
    # e.g. every Graph.from_scipy of a bipartite matrix.)
    def _in_callers_order(self, t: Tensor, dim: int) -> Tensor:
        order = self.edge_order()
        return t if order is None else torch.empty_like(t).index_copy_(dim, order, t)

    @property
    def edge_index(self) -> Tensor:
        """[2, E] int64 in the order of the edge list the graph was built from (the order of
        the edge tensors of spgnn.ops); a fresh copy. ``g.edge_index[:, g.edge_order()]`` is
        spgnn's own order, sorted by target, then source."""
        return self._in_callers_order(torch.stack([self._tensor("col"), self._tensor("row")]), 1)

    @property
    def edge_weight(self) -> Optional[Tensor]:
        """The edge weights in the order of edge_index (a copy), or None."""
        return self._in_callers_order(self._tensor("values"), 0) if self.has_weights else None

    def edge_order(self) -> Optional[Tensor]:
        """Edge i of spgnn's order is edge ``edge_order()[i]`` of the edge list it was built
        from; None when the two orders agree (the input was sorted by target)."""
        if self._info["identity_order"]:
            return None
        if self._edge_source is None:
            self._edge_source = self._tensor("edge_source")
        return self._edge_source

    def to(self, device: Union[str, torch.device]) -> "Graph":
        """The same graph on another device (cached: asking twice gives the same arrays)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device == self.device:
            return self
        return Graph._wrap(C.derive(self._base.untyped_storage().data_ptr(), f"to:{device}"))

    def cuda(self, device=None) -> "Graph":
        """On a GPU: the current one, or ``device`` (an index, or a cuda torch.device / str)."""
        if device is None:
            return self.to("cuda")
        if isinstance(device, (str, torch.device)):
            device = torch.device(device)
            if device.type != "cuda":
                raise ValueError(f"Graph.cuda(device): {device} is not a CUDA device")
            return self.to(device)
        # torch.device("cuda", i) keeps only i's low byte: cuda(300) would be GPU 44, silently.
        return self.to(torch.device("cuda", check_int(device, "device", 0, 127,
                                                      what="a CUDA device index in [0, 127]")))

    def cpu(self) -> "Graph":
        return self.to("cpu")


def _rebuild(edge_index: Tensor, edge_weight: Optional[Tensor], n_src: int, n_dst: int,
             device: str) -> Graph:
    return Graph(edge_index, edge_weight=edge_weight, size=(n_src, n_dst)).to(device)


def _check_count(n, name: str) -> int:
    """A node count: an int (numpy's integers too) or a one-element integer tensor; never a
    float or a bool, which int() would silently truncate."""
    if isinstance(n, Tensor):
        if n.numel() != 1 or n.is_floating_point() or n.is_complex() or n.dtype == torch.bool:
            raise ValueError(f"{name} must be a non-negative int, got a tensor of dtype "
                             f"{n.dtype} and shape {tuple(n.shape)}")
        n = int(n)
    if isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 2 ** 62:
        raise ValueError(f"{name} = {n} is too large")
    return check_int(n, name, 0, 2 ** 62 - 1, what="a non-negative int")


# ---- graphs of edge_index tensors ----------------------------------------------------------------
# Layers take PyG's edge_index on every call; building the graph is a sort, so it is done once
# per edge_index and kept. The key is the tensor's memory and version: the cache holds a
# reference to the tensor, so no other tensor can take its memory while the entry lives, and an
# in-place change bumps the version. A few graphs are kept (most recently used first).
_CACHE_SIZE = 8
_cache: "collections.OrderedDict[tuple, Tuple[Tensor, Graph]]" = collections.OrderedDict()
_cache_lock = threading.Lock()


def _cached_graph(key: tuple, source: Tensor, build) -> Graph:
    """The Graph cached under key, else build() cached there (the cache holds `source` too, so
    its memory, whose address is in the key, cannot be reused while the entry lives)."""
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit[1]
    g = build()
    with _cache_lock:
        _cache[key] = (source, g)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return g


def _edge_index_key(edge_index: Tensor, num_nodes: int, num_src: int) -> tuple:
    n_dst = int(num_nodes)
    n_src = n_dst if num_src < 0 else int(num_src)
    return (edge_index.data_ptr(), tuple(edge_index.shape), tuple(edge_index.stride()),
            edge_index.dtype, edge_index.device, edge_index._version, n_dst, n_src)


def is_new(edge_index: Tensor, num_nodes: int, num_src: int = -1) -> bool:
    """Whether edge_index's graph (num_nodes targets, num_src sources) is not cached yet."""
    with _cache_lock:
        return _edge_index_key(edge_index, num_nodes, num_src) not in _cache


def _edge_index_graph(edge_index: Tensor, num_nodes: int, num_src: int = -1) -> Graph:
    """edge_index's graph with num_nodes targets and num_src sources (-1: num_nodes), cached."""
    key = _edge_index_key(edge_index, num_nodes, num_src)
    n_dst, n_src = key[-2], key[-1]
    return _cached_graph(key, edge_index,
                         lambda: Graph(edge_index, n_dst) if n_src == n_dst
                         else Graph(edge_index, size=(n_src, n_dst)))


def _sparse_graph(adj_t: Tensor) -> Graph:
    """The Graph of a torch sparse adj_t (Graph.from_sparse_tensor), cached like an edge_index's:
    keyed by its index and value arrays, shape and version (an in-place change is noticed).
    torch.compile refuses sparse tensors itself; there, pass the Graph."""
    if adj_t.layout == torch.sparse_csr:
        arrays = (adj_t.crow_indices().data_ptr(), adj_t.col_indices().data_ptr(),
                  adj_t.values().data_ptr())
    else:
        arrays = (adj_t._indices().data_ptr(), adj_t._values().data_ptr())
    key = ("sparse", adj_t.layout, arrays, tuple(adj_t.shape), adj_t.dtype, adj_t.device,
           adj_t._version)
    return _cached_graph(key, adj_t, lambda: Graph.from_sparse_tensor(adj_t))


def as_graph(edge_index):
    """What a layer got as edge_index, with a torch sparse adj_t replaced by its (cached) Graph;
    anything else unchanged."""
    if isinstance(edge_index, Tensor) and edge_index.layout in (torch.sparse_coo,
                                                                 torch.sparse_csr):
        return _sparse_graph(edge_index)
    return edge_index


_identity: "dict[tuple, Graph]" = {}


def identity_handle(n: int, device: torch.device) -> Tensor:
    key = (int(n), str(device))
    g = _identity.get(key)
    if g is None:
        g = _identity[key] = Graph._wrap(C.identity_graph(int(n), str(device)))
    return g.handle()


def clear_cache() -> None:
    """Forgets the graphs built from edge_index tensors (and the identity graphs), releasing
    their memory once nothing else refers to them."""
    with _cache_lock:
        _cache.clear()
    _identity.clear()


def resolve(edge_index, num_nodes: int, num_src: int = -1) -> Tensor:
    """A handle for what a layer got as edge_index: an spgnn.Graph, a PyG edge_index tensor, or
    a torch sparse adj_t; num_nodes targets and num_src sources (-1: a square graph, except
    that a Graph or adj_t keeps its own source count)."""
    if isinstance(edge_index, Graph):
        if edge_index.num_dst_nodes != num_nodes:
            raise ValueError(f"the graph has {edge_index.num_dst_nodes} target nodes but x has "
                             f"{num_nodes} rows" + (" (x_dst)" if num_src >= 0 else ""))
        if num_src >= 0 and edge_index.num_src_nodes != num_src:
            raise ValueError(f"the graph has {edge_index.num_src_nodes} source nodes but x_src "
                             f"has {num_src} rows")
        return edge_index.handle()
    if isinstance(edge_index, Tensor):
        if edge_index.layout in (torch.sparse_coo, torch.sparse_csr):
            return resolve(_sparse_graph(edge_index), num_nodes, num_src)
        check_tensor(edge_index, "edge_index", ndim=(2,), dtypes=(torch.int64, torch.int32),
                     contiguous=False)
        if edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E] (row 0 = source, row 1 = "
                             f"target), got {tuple(edge_index.shape)}")
        return _ops.graph_from_edge_index(edge_index, num_nodes, num_src)
    name = type(edge_index).__name__
    if name == "SparseTensor":
        raise TypeError("torch_sparse.SparseTensor is not supported: pass edge_index, a torch "
                        "sparse adj_t (adj_t.to_torch_sparse_csr_tensor()), or a spgnn.Graph")
    raise TypeError(f"edge_index must be a [2, E] tensor or a spgnn.Graph, got {name}")
