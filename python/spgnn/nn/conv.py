"""Drop-in replacements for torch_geometric.nn's GCNConv, SAGEConv, GINConv and GATConv.

They take PyG's constructor arguments and ``forward(x, edge_index)`` with ``edge_index`` a PyG
``[2, E]`` tensor (row 0 = source, row 1 = target) or a ``spgnn.Graph``; the sparse work runs on
spgnn's kernels, the dense work on PyTorch. The graph of an ``edge_index`` (and the normalised,
self-looped and transposed variants a layer needs) is built on first use and cached, keyed by
the tensor, so a training loop pays for it once; an in-place change to edge_index is noticed.

On several devices, pass a ``spgnn.distributed.DistGraph`` (one part of a partitioned graph)
in place of ``edge_index`` and the owned rows as ``x``: a layer fetches the halo rows its
aggregation reads, as the same model does on the whole graph.

A torch sparse ``adj_t`` (COO or CSR, rows = targets, as PyG's) works in place of
``edge_index`` too, as in PyG: its values weight the messages of GCNConv, SAGEConv and GINConv
and GATConv ignores them; its graph is cached like an edge_index's. torch.compile does not
trace sparse tensors: there, build ``spgnn.Graph.from_sparse_tensor(adj_t)`` once and pass it.
A weighted ``spgnn.Graph`` weights SAGEConv's and GINConv's messages the same way.

SAGEConv, GINConv and GATConv also take bipartite inputs as PyG's do (``x=(x_src, x_dst)``,
``in_channels=(in_src, in_dst)``; edges run from x_src's rows to x_dst's), e.g. inside PyG's
HeteroConv.

Not supported (a clear error says so): bipartite inputs to GCNConv (as in PyG), GATConv's self
loops when a bipartite graph has more targets than sources, a ``size=`` that differs from the
inputs' rows, ``edge_attr``/``edge_dim`` in GATConv, aggregations other than
sum/add/mean/max/min, lazy ``in_channels=-1`` with SAGEConv's ``project``,
torch_sparse.SparseTensor adjacencies (convert them with ``adj_t.to_torch_sparse_csr_tensor()``),
float64 inputs on the GPU and float64 in GATConv. Inputs may be float32, float16 or bfloat16 (a
model converted with ``.to(dtype)``, or torch.autocast), and float64 on the CPU. Lazy
``in_channels=-1`` (or ``(-1, -1)``) takes the width from the first input, as in PyG.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from .. import _ops
from .._runtime import INT64_MAX, check_float, check_int, check_real, dtype_name
from ..distributed import DistGraph
from ..graph import Graph, as_graph, is_new, resolve

__all__ = ["GCNConv", "SAGEConv", "GINConv", "GATConv"]

EdgeIndex = Union[Tensor, Graph]  # a [2, E] edge_index, a torch sparse adj_t, or a Graph


def _glorot(t: Tensor) -> None:
    # PyG's glorot: uniform in +-sqrt(6 / (fan_in + fan_out)) over the last two dimensions.
    # A lazy Linear's weight gets it once its width is known (_materialize).
    if t is not None and not isinstance(t, torch.nn.parameter.UninitializedParameter):
        a = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
        with torch.no_grad():
            t.uniform_(-a, a)


def _check_channels(in_channels, out_channels, cls, bipartite=False):
    """Checks the widths; with ``bipartite``, in_channels may be a pair (sources, targets), as
    in PyG. Returns in_channels as a (sources, targets) pair."""
    if bipartite and isinstance(in_channels, (tuple, list)):
        if len(in_channels) != 2:
            raise ValueError(f"{cls}: in_channels must be an int or a pair (sources, targets), "
                             f"got {in_channels!r}")
        for v in in_channels:
            _check_channels(v, out_channels, cls)
        return tuple(in_channels)
    for v, name in ((in_channels, "in_channels"), (out_channels, "out_channels")):
        if isinstance(v, (tuple, list)):
            raise NotImplementedError(f"{cls}: bipartite {name}={v} is not supported by spgnn.nn")
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{cls}: {name} must be an int, got {v!r}")
        if v == -1 and name == "in_channels":
            continue  # lazy: the width is read from the first input, as in PyG
        if v <= 0:
            raise ValueError(f"{cls}: {name} must be positive, got {v}")
        if v > INT64_MAX:  # torch.empty's shape would fail with an overflow naming nothing
            raise ValueError(f"{cls}: {name} = {v} is too large")
    return (in_channels, in_channels)


def _linear(in_features: int, out_features: int, bias: bool) -> torch.nn.Module:
    """A Linear, or for in_features = -1 (PyG's lazy initialisation) a LazyLinear whose width
    comes from the first input it meets (_materialize)."""
    if in_features == -1:
        return torch.nn.LazyLinear(out_features, bias=bias)
    return torch.nn.Linear(in_features, out_features, bias=bias)


def _materialize(lin, t: Tensor, init=None) -> None:
    """Gives a lazy Linear its input width from t (the layers read .weight directly, which does
    not run the lazy module's own hook) and its initialisation: torch's default, or ``init``
    (the layer's own, e.g. glorot) alone, so the random stream advances as in PyG."""
    if lin is None or not isinstance(lin.weight, torch.nn.parameter.UninitializedParameter):
        return
    with torch.no_grad():
        if init is None:
            lin.initialize_parameters(t)
            return
        lin.in_features = t.shape[-1]
        lin.weight.materialize((lin.out_features, lin.in_features))
        if lin.bias is not None:
            lin.bias.materialize((lin.out_features,))
            lin.bias.zero_()
    init(lin)


def _check_width(cls, lin, t: Tensor, name: str, in_channels) -> None:
    """A wrong input width is named here; PyG's layers fail inside torch.mm. Reads the weight's
    shape, not in_features: a lazy Linear given a state dict keeps in_features 0. A dtype other
    than the weights' is named too (_check_dtype)."""
    if lin is not None and t.shape[1] != lin.weight.shape[1]:
        raise ValueError(f"{cls}: {name} has {t.shape[1]} features but in_channels is "
                         f"{in_channels}")
    if lin is not None:
        _check_dtype(cls, t, name, lin.weight)


def _check_dtype(cls, t: Tensor, name: str, weight: Optional[Tensor]) -> None:
    """x in the weights' dtype, as PyG's layers need it too (they fail inside torch's matmul:
    "expected m1 and m2 to have the same dtype"). A float64 model (.double()) takes float64 x;
    under torch.autocast the GEMMs cast both sides themselves."""
    if weight is None or t.dtype == weight.dtype or torch.is_autocast_enabled(t.device.type):
        return
    have, want = dtype_name(t.dtype), dtype_name(weight.dtype)
    raise TypeError(f"{cls}: {name} is {have} but the layer's weights are {want}: pass "
                    f"{name}.to(torch.{want}) or convert the layer (layer.to(torch.{have}))")


def _dense(cls, t: Tensor, name: str, why: str) -> None:
    """A sparse x is taken where a Linear reads it first, as torch's Linear and PyG's layers
    take it; an aggregation that reads x itself needs its rows in memory."""
    if t.layout != torch.strided:
        raise ValueError(f"{cls}: {name} is a {t.layout} tensor, but {why} reads {name} itself "
                         f"and takes a dense (strided) tensor: pass {name}.to_dense()")


def _unsupported_kwargs(kwargs, cls):
    if kwargs:
        names = ", ".join(sorted(kwargs))
        raise NotImplementedError(f"{cls}: argument(s) {names} are not supported by spgnn.nn "
                                  "(see spgnn.nn's documentation for what is)")


def _input(x, cls, name="x") -> Tensor:
    if isinstance(x, (tuple, list)):
        raise NotImplementedError(f"{cls}: bipartite inputs x=(x_src, x_dst) are not supported "
                                  f"by spgnn.nn's {cls} (SAGEConv, GINConv and GATConv take them)")
    check_float(x, name, ndim=(2,), contiguous=False)
    return x


def _input_pair(x, edge_index, size, cls):
    """(x_src, x_dst) from what a layer that takes bipartite inputs got, as PyG: x, or a pair
    (x_src, x_dst) whose edges run from x_src's rows to x_dst's; ``size`` may repeat the pair's
    row counts (n_src, n_dst). x_dst is x for a single tensor."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise ValueError(f"{cls}: x must be a tensor or a pair (x_src, x_dst), got "
                             f"{len(x)} items")
        if x[1] is None:
            raise NotImplementedError(f"{cls}: x=(x_src, None) is not supported by spgnn.nn; "
                                      "pass the targets' features")
        if isinstance(edge_index, DistGraph):
            raise NotImplementedError(f"{cls}: bipartite inputs on a DistGraph are not supported")
        x_src = _input(x[0], cls, "x[0] (x_src)")
        x_dst = _input(x[1], cls, "x[1] (x_dst)")
        if x_src.device != x_dst.device or x_src.dtype != x_dst.dtype:
            raise TypeError(f"{cls}: x_src and x_dst must share device and dtype, got "
                            f"{x_src.dtype} on {x_src.device} and {x_dst.dtype} on {x_dst.device}")
    else:
        x_src = x_dst = _input(x, cls)
    if size is not None:
        want = (x_src.shape[0], x_dst.shape[0])
        if tuple(int(v) for v in size) != want:
            raise NotImplementedError(f"{cls}: size={tuple(size)} differs from the inputs' rows "
                                      f"{want}; spgnn.nn takes the sizes from x")
    return x_src, x_dst


def _no_size(size, cls):
    if size is not None:
        raise NotImplementedError(f"{cls}: size= (bipartite message passing) is not supported "
                                  "by spgnn.nn")


def _padded(width: int) -> int:
    """spgnn's kernels load 4 features at a time only when the width allows: at 41 features,
    gnnone's SpMM on a 114M-edge graph took 9 ms, at 16 features 1.3 ms. Widths of 4 or more
    are aggregated rounded up to a multiple of 4 (zero columns), and sliced back."""
    return width if width < 4 else -(-width // 4) * 4


def _half_rows(t: Tensor) -> bool:
    """Whether the GPU attention reads rows like t's in a half dtype (t is one, or autocast
    casts it to one)."""
    if t.device.type != "cuda":
        return False
    if t.dtype in (torch.float16, torch.bfloat16):
        return True
    return (torch.is_autocast_enabled("cuda")
            and torch.get_autocast_dtype("cuda") in (torch.float16, torch.bfloat16))


def _attn_width(width: int, half: bool) -> int:
    """The width a GAT head is attended at: _padded, and for half rows on the GPU a multiple of
    8 above 8, where the backward loads 8 halves a lane instead of 4 (H200, 114M edges, one
    head, bfloat16: backward 14.45 ms at 44 features, 9.02 at 48; 5.91 at 12, 4.93 at 16)."""
    w = _padded(width)
    return -(-w // 8) * 8 if half and w > 8 and w % 8 else w


def _lin(x: Tensor, weight: Tensor):
    """x W^T with the output width padded (zero rows of W, which cost nothing) and the true
    width; the caller slices the aggregated result back to the true width."""
    width = weight.shape[0]
    pad = _padded(width) - width
    if pad == 0:
        return F.linear(x, weight), width
    return F.linear(x, F.pad(weight, (0, 0, 0, pad))), width


def _linear_aggregate(x: Tensor, weight: Tensor, bias: Optional[Tensor], agg,
                      root: Optional[Tuple[Tensor, Tensor]] = None) -> Tensor:
    """agg(x W^T) + b (+ x_root W_root^T when ``root`` is given), for a linear ``agg`` (a sum
    or mean aggregation): it commutes with W, so the aggregation runs on the narrower side --
    agg(x) W^T when x is not wider than the output, which also needs no SpMM in the backward
    when x needs no gradient. Bias and root term ride in the GEMMs' epilogues. Layers resolve
    their graph inside ``agg``, after the GEMM is queued, so that in eager mode the GPU works on
    it during the lookups (torch.compile's scheduler hoists the lookups either way)."""
    fin, fout = weight.shape[1], weight.shape[0]
    base = F.linear(root[0], root[1], bias) if root is not None else None
    # A sparse x (torch's Linear takes one) is transformed first: the aggregation reads dense rows.
    if _padded(fin) <= _padded(fout) and x.layout == torch.strided:
        pad = _padded(fin) - fin
        a = agg(F.pad(x, (0, pad)) if pad else x)
        a = a[:, :fin] if pad else a
        if base is None:
            return F.linear(a, weight, bias)
        return torch.addmm(base, a, weight.t())
    y, width = _lin(x, weight)
    out = agg(y)[:, :width]
    if base is not None:
        return out + base
    return out if bias is None else out + bias


def _build_first(edge_index, n: int, n_src: int = -1, kind: Optional[str] = None) -> None:
    """Builds a new CUDA edge_index's graph (and its variant ``kind``) before the layer queues
    its transform. The build reads a few numbers back from the GPU (the id range; a self-loop
    variant's edge count), which waits for everything queued before it: here that is the work
    before the layer, and the GPU then runs the transform while the host goes on. A graph built
    after the transform waited for the GEMM too, and a mini-batch loop (a new edge_index every
    step) paid it every layer. A cached graph is still looked up after the transform is queued
    (see _linear_aggregate); torch.compile orders the lookups itself."""
    if (isinstance(edge_index, Tensor) and edge_index.is_cuda
            and edge_index.layout == torch.strided and not torch.compiler.is_compiling()
            and is_new(edge_index, n, n_src)):
        h = resolve(edge_index, n, n_src)
        if kind is not None:
            _variant(edge_index, h, kind)


def _sources(edge_index, t: Tensor) -> Tensor:
    """The rows an aggregation over ``edge_index`` reads as sources: ``t`` itself, or on a
    DistGraph ``t``'s owned rows followed by the halo rows fetched from their owners."""
    return edge_index.gather(t) if isinstance(edge_index, DistGraph) else t


def _overlapped(edge_index) -> bool:
    """A DistGraph that hides its exchange behind the owned-source edges (sum, mean, max and
    min aggregations)."""
    return isinstance(edge_index, DistGraph) and edge_index.overlap


def _variant(edge_index, h: Tensor, kind: str) -> Tensor:
    """The handle of a derived graph (normalised, self-looped, ...); a DistGraph derives the
    ones that need the whole graph (GCN's degrees) itself."""
    if isinstance(edge_index, DistGraph):
        g = edge_index.variant(kind)
        if g is not None:
            return g.handle()
    return _ops.graph_variant(h, kind)


def _agg(h: Tensor, op: str, reduce: str, x: Tensor, n: int) -> Tensor:
    """Aggregation over the handle's graph; e is the graph's own values when op needs one."""
    x = x.contiguous()
    if reduce in ("max", "min"):
        return _ops.gspmm_arg(h, op, reduce, x, None, n, "")[0]
    return _ops.gspmm(h, op, reduce, x, None, n, "")


class GCNConv(torch.nn.Module):
    r"""GCN (Kipf & Welling): ``out = D^-1/2 (A + I) D^-1/2 (x W) + b``, as PyG's GCNConv, with
    the degree taken over each node's incoming edges (weights included) and self loops added
    to nodes without one (existing loops keep their weight). ``cached`` is accepted: spgnn always
    caches the normalised graph of an edge_index (and recomputes it if edge_index changes)."""

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False,
                 cached: bool = False, add_self_loops: Optional[bool] = None,
                 normalize: bool = True, bias: bool = True, **kwargs):
        super().__init__()
        _check_channels(in_channels, out_channels, "GCNConv")
        _unsupported_kwargs(kwargs, "GCNConv")
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv: add_self_loops=True needs normalize=True (as in PyG)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = _linear(in_channels, out_channels, bias=False)
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        _glorot(self.lin.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def _variant(self) -> str:
        if not self.add_self_loops:
            return "gcn_noloops"
        return "gcn_improved" if self.improved else "gcn"

    def forward(self, x: Tensor, edge_index: EdgeIndex,
                edge_weight: Optional[Tensor] = None) -> Tensor:
        x = _input(x, "GCNConv")
        _materialize(self.lin, x, lambda m: _glorot(m.weight))
        _check_width("GCNConv", self.lin, x, "x", self.in_channels)
        edge_index = as_graph(edge_index)
        n = x.shape[0]
        if (edge_weight is None and self.normalize and x.dtype == torch.float64
                and not isinstance(edge_index, DistGraph)):
            # A float64 model (.double(), finite-difference checks): spgnn's GCN variants hold
            # their weights in float32, so the norm is computed in float64 as for given weights
            # (a weighted Graph's own weights, widened, in the graph's edge order).
            h = resolve(edge_index, n)
            w = (_ops.graph_tensor(h, "values", x, 0)
                 if isinstance(edge_index, Graph) and edge_index.has_weights
                 else torch.ones(_ops.nnz_of(h), dtype=x.dtype, device=x.device))
            agg = self._weighted(x, h, w, n, graph_order=True)
        elif edge_weight is not None:
            if isinstance(edge_index, DistGraph):
                raise NotImplementedError("GCNConv: edge_weight with a DistGraph is not "
                                          "supported; the partition's edge weights are used")
            agg = self._weighted(x, resolve(edge_index, n), edge_weight, n)
        else:
            _build_first(edge_index, n, kind=self._variant() if self.normalize else None)

            def agg(t):
                if _overlapped(edge_index):
                    kind = (self._variant() if self.normalize else
                            "weighted" if edge_index.has_weights else "sum")
                    return edge_index.aggregate(t, kind)
                # The graph is looked up once the transform is queued (see _linear_aggregate).
                h = resolve(edge_index, n)
                t = _sources(edge_index, t)
                if self.normalize:
                    return _agg(_variant(edge_index, h, self._variant()), "u_mul_e", "sum", t, n)
                if isinstance(edge_index, Graph) and edge_index.has_weights:
                    return _agg(h, "u_mul_e", "sum", t, n)
                return _agg(h, "copy_u", "sum", t, n)
        return _linear_aggregate(x, self.lin.weight, self.bias, agg)

    def _weighted(self, x, h, edge_weight, n, graph_order=False):
        """The aggregation with caller-given edge weights: PyG's gcn_norm in torch ops
        (differentiable in the weights) on spgnn's edge order; the SpMM is spgnn's.
        graph_order: the weights are in the graph's edge order already, not the input's."""
        E = _ops.nnz_of(h)
        check_float(edge_weight, "edge_weight", ndim=(1,), device=x.device, rows=E,
                    rows_name="the number of edges E", contiguous=False)
        w = edge_weight.to(x.dtype)
        if not graph_order:
            order = _ops.graph_tensor(h, "edge_source", x, 0)  # spgnn's edge i = input's order[i]
            w = w.index_select(0, order)
        if not self.normalize:
            return lambda t: _ops.gspmm(h, "u_mul_e", "sum", t.contiguous(), w.contiguous(), n, "")
        hv = _ops.graph_variant(h, self._variant())
        src = _ops.graph_tensor(hv, "edge_source", x, 0)
        fill = 2.0 if self.improved else 1.0
        # Added loops (src = -1) take `fill`: appended after the E weights, so the gather has a
        # valid index even when E = 0 (an edge-less graph: index 0 of an empty w raised).
        E = w.shape[0]
        wv = torch.cat([w, w.new_full((1,), fill)]).index_select(
            0, torch.where(src >= 0, src, torch.full_like(src, E)))
        row = _ops.graph_tensor(hv, "row", x, 0)
        col = _ops.graph_tensor(hv, "col", x, 0)
        deg = torch.zeros(n, dtype=w.dtype, device=w.device).index_add(0, row, wv)
        dinv = deg.pow(-0.5)
        dinv = torch.where(torch.isinf(dinv), torch.zeros_like(dinv), dinv)
        norm = (dinv.index_select(0, col) * wv * dinv.index_select(0, row)).contiguous()
        return lambda t: _ops.gspmm(hv, "u_mul_e", "sum", t.contiguous(), norm, n, "")

    def __repr__(self):
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


_AGGRS = {"sum": "sum", "add": "sum", "mean": "mean", "max": "max", "min": "min"}


def _aggr_name(aggr, cls) -> str:
    if not isinstance(aggr, str) or aggr not in _AGGRS:
        raise NotImplementedError(f"{cls}: aggr={aggr!r} is not supported by spgnn.nn (sum, add, "
                                  "mean, max, min)")
    return _AGGRS[aggr]


def _aggregate(edge_index, reduce: str, x: Tensor, n: int, n_src: int = -1) -> Tensor:
    """reduce over edge_index of x's rows (sources) into n targets; n_src >= 0: a bipartite
    graph with n_src sources."""
    if reduce in ("sum", "mean", "max", "min") and _overlapped(edge_index):
        return edge_index.aggregate(x, reduce)
    h = resolve(edge_index, n, n_src)
    x = _sources(edge_index, x)
    if isinstance(edge_index, Graph) and edge_index.has_weights:
        # A weighted graph (e.g. from a sparse adj_t) scales each message by its edge weight,
        # as PyG's SAGEConv and GINConv do with a weighted torch sparse adj_t: sum(w x),
        # mean = sum(w x) / deg, max(w x).
        return _agg(h, "u_mul_e", reduce, x, n)
    # A mean reads the bare pattern (the kernel divides by the degree), and its backward scales
    # the gradient's rows by 1/deg and sums over the pattern's transpose, as `spgnn train` does:
    # 1/deg weights on the edges cost each SpMM a weight read per edge (14.7 against 12.8 ms at
    # F = 256 on the Reddit shape, H200) for what one pass over the rows does.
    return _agg(_ops.graph_variant(h, "pattern"), "copy_u", reduce, x, n)


class SAGEConv(torch.nn.Module):
    r"""GraphSAGE: ``out = W_l . aggr_{u -> v} x_u + W_r x_v`` (+ bias in W_l), as PyG's
    SAGEConv; ``aggr`` sum/add/mean/max/min, ``normalize`` (L2 per row), ``root_weight``,
    ``project``. For sum and mean the transform runs before the aggregation when it narrows the
    features (the same result, fewer bytes gathered)."""

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False,
                 bias: bool = True, **kwargs):
        super().__init__()
        in_src, in_dst = _check_channels(in_channels, out_channels, "SAGEConv", bipartite=True)
        _unsupported_kwargs(kwargs, "SAGEConv")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr = aggr
        self._reduce = _aggr_name(aggr, "SAGEConv")
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        if project:
            if in_src == -1:
                raise NotImplementedError("SAGEConv: project=True with lazy in_channels=-1 is "
                                          "not supported by spgnn.nn; pass the feature width")
            self.lin = torch.nn.Linear(in_src, in_src, bias=True)
        self.lin_l = _linear(in_src, out_channels, bias=bias)
        if root_weight:
            self.lin_r = _linear(in_dst, out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        if self.project:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.root_weight:
            self.lin_r.reset_parameters()

    def forward(self, x, edge_index: EdgeIndex, size=None) -> Tensor:
        x, x_root = _input_pair(x, edge_index, size, "SAGEConv")
        _materialize(self.lin_l, x)
        if self.root_weight:
            _materialize(self.lin_r, x_root)
        bipartite = x is not x_root
        n_src = x.shape[0] if bipartite else -1
        _check_width("SAGEConv", self.lin if self.project else self.lin_l, x,
                     "x_src" if bipartite else "x", self.in_channels)
        if self.root_weight:
            _check_width("SAGEConv", self.lin_r, x_root, "x_dst", self.in_channels)
        edge_index = as_graph(edge_index)
        n = x_root.shape[0]
        # as in PyG, the root term reads the targets' x before the projection
        if self.project:
            x = F.relu(self.lin(x))
        root = (x_root, self.lin_r.weight) if self.root_weight else None
        if self._reduce not in ("sum", "mean"):
            _dense("SAGEConv", x, "x_src" if bipartite else "x", f"aggr={self.aggr!r}")
        if self._reduce in ("sum", "mean"):
            _build_first(edge_index, n, n_src)
            out = _linear_aggregate(x, self.lin_l.weight, self.lin_l.bias,
                                    lambda t: _aggregate(edge_index, self._reduce, t, n, n_src),
                                    root)
        else:
            out = self.lin_l(_aggregate(edge_index, self._reduce, x, n, n_src))
            if root is not None:
                out = out + self.lin_r(x_root)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self):
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr})"


class GINConv(torch.nn.Module):
    r"""GIN: ``out = nn((1 + eps) x_v + sum_{u -> v} x_u)``, as PyG's GINConv (``eps`` fixed,
    or trainable with ``train_eps=True``). When ``nn`` is a Sequential that starts with a
    narrowing Linear, that Linear runs before the aggregation (the same result, fewer bytes
    gathered)."""

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False, **kwargs):
        super().__init__()
        _unsupported_kwargs(kwargs, "GINConv")
        if not isinstance(nn, torch.nn.Module) and not callable(nn):
            raise TypeError(f"GINConv: nn must be a torch.nn.Module, got {type(nn).__name__}")
        self.nn = nn
        if isinstance(eps, Tensor) and eps.numel() == 1:  # float(eps) took one before
            eps = eps.item()
        self.initial_eps = check_real(eps, "GINConv: eps")
        if train_eps:
            self.eps = Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self):
        if hasattr(self.nn, "reset_parameters"):
            self.nn.reset_parameters()
        else:
            for m in self.nn.modules():
                if m is not self.nn and hasattr(m, "reset_parameters"):
                    m.reset_parameters()
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    def forward(self, x, edge_index: EdgeIndex, size=None) -> Tensor:
        x, x_dst = _input_pair(x, edge_index, size, "GINConv")
        bipartite = x is not x_dst
        n_src = x.shape[0] if bipartite else -1
        if isinstance(self.nn, torch.nn.Module):
            weight = next((p for p in self.nn.parameters() if p.dtype.is_floating_point), None)
            _check_dtype("GINConv", x, "x_src" if bipartite else "x", weight)
        edge_index = as_graph(edge_index)
        n = x_dst.shape[0]
        first = self.nn[0] if isinstance(self.nn, torch.nn.Sequential) and len(self.nn) else None
        if (isinstance(first, torch.nn.Linear) and first.out_features < first.in_features
                and x.shape[1] == first.in_features and x_dst.shape[1] == first.in_features):
            # The MLP's first Linear commutes with the aggregation and the (1 + eps) self term:
            # applying it first gathers out_features per edge instead of in_features.
            y, width = _lin(x, first.weight)
            y_dst = _lin(x_dst, first.weight)[0] if bipartite else y
            out = (_aggregate(edge_index, "sum", y, n, n_src) + (1 + self.eps) * y_dst)[:, :width]
            if first.bias is not None:
                out = out + first.bias
            for m in list(self.nn)[1:]:
                out = m(out)
            return out
        _dense("GINConv", x, "x_src" if bipartite else "x", "the sum aggregation")
        if bipartite:
            _dense("GINConv", x_dst, "x_dst", "the (1 + eps) x_dst term")
        out = _aggregate(edge_index, "sum", x, n, n_src)
        out = out + (1 + self.eps) * x_dst
        return self.nn(out)

    def __repr__(self):
        return f"{type(self).__name__}(nn={self.nn})"


class GATConv(torch.nn.Module):
    r"""GAT (Velickovic et al.), as PyG's GATConv: ``heads`` attention heads of
    ``softmax_u(LeakyReLU(a_src . W x_u + a_dst . W x_v))``, dropout on the attention weights
    while training, heads concatenated (``concat=True``) or averaged, self loops added
    (``add_self_loops``), optional ``residual``. Attention and aggregation run as one fused
    kernel on the GPU. ``return_attention_weights=True`` also returns ``(edge_index, alpha)`` of
    the graph the layer attended over (self loops included), in spgnn's edge order."""

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: Optional[int] = None, fill_value="mean", bias: bool = True,
                 residual: bool = False, **kwargs):
        super().__init__()
        in_src, in_dst = _check_channels(in_channels, out_channels, "GATConv", bipartite=True)
        _unsupported_kwargs(kwargs, "GATConv")
        if edge_dim is not None:
            raise NotImplementedError("GATConv: edge features (edge_dim) are not supported by "
                                      "spgnn.nn")
        heads = check_int(heads, "GATConv: heads", 1, what="a positive int (at most 2^63 - 1)")
        dropout = check_real(dropout, "GATConv: dropout", 0.0, 1.0, hi_open=True)
        negative_slope = check_real(negative_slope, "GATConv: negative_slope")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.residual = add_self_loops, residual
        # As PyG: one transform `lin`, or `lin_src` and `lin_dst` when in_channels is a pair.
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = _linear(in_channels, heads * out_channels, bias=False)
        else:
            self.lin_src = _linear(in_src, heads * out_channels, bias=False)
            self.lin_dst = _linear(in_dst, heads * out_channels, bias=False)
        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))
        total = heads * out_channels if concat else out_channels
        self.res = _linear(in_dst, total, bias=False) if residual else None
        if bias:
            self.bias = Parameter(torch.empty(total))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        for lin in (self.lin, self.lin_src, self.lin_dst):
            if lin is not None:
                _glorot(lin.weight)
        _glorot(self.att_src)
        _glorot(self.att_dst)
        if self.res is not None:
            _glorot(self.res.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor, edge_index: EdgeIndex, edge_attr: Optional[Tensor] = None,
                size=None, return_attention_weights: Optional[bool] = None):
        if edge_attr is not None:
            raise NotImplementedError("GATConv: edge_attr is not supported by spgnn.nn")
        x, x_dst = _input_pair(x, edge_index, size, "GATConv")
        # float16/bfloat16 run as the other layers' do (a model converted with .to(), or
        # autocast); the attention has no float64 kernels, so a .double() GAT is named here.
        for t, name in ((x, "x_src" if x is not x_dst else "x"), (x_dst, "x_dst")):
            if t.dtype == torch.float64:
                raise TypeError(f"GATConv: {name} is float64, but spgnn's attention kernels take "
                                "float32 (or float16/bfloat16)")
        # PyG's order of first use (the residual first), so lazy widths draw the same numbers
        for lin, t in ((self.res, x_dst), (self.lin, x), (self.lin_src, x), (self.lin_dst, x_dst)):
            _materialize(lin, t, lambda m: _glorot(m.weight))
        bipartite = x is not x_dst
        src_name = "x_src" if bipartite else "x"
        for lin, t, name in ((self.lin, x, src_name), (self.lin, x_dst, "x_dst"),
                             (self.lin_src, x, src_name), (self.lin_dst, x_dst, "x_dst"),
                             (self.res, x_dst, "x_dst")):
            _check_width("GATConv", lin, t, name, self.in_channels)
        sparse_in = isinstance(edge_index, Tensor) and edge_index.layout in (torch.sparse_coo,
                                                                             torch.sparse_csr)
        layout = edge_index.layout if sparse_in else None
        edge_index = as_graph(edge_index)
        n, n_src, H, C = x_dst.shape[0], x.shape[0], self.heads, self.out_channels
        if not (self.add_self_loops and n > n_src):  # that case is named below
            _build_first(edge_index, n, n_src if bipartite else -1,
                         "loops" if self.add_self_loops else None)
        # One head narrower in than out (a classifier layer) attends over x itself: the
        # attention is linear in the features, sum_u a_uv (x_u W^T) = (sum_u a_uv x_u) W^T, and
        # the logit el_u = (x_u W^T) . a_l = x_u . (a_l W). The per-edge gathers then carry the
        # input's width: H200, 114M edges, one head, float32, the fused kernels at 16 features
        # take 2.64 / 6.22 ms (forward / backward) against 6.36 / 14.80 at 44.
        half = _half_rows(x)
        attend_x = (H == 1 and self.lin is not None
                    and _attn_width(x.shape[1], half) < _attn_width(C, half))
        if attend_x:
            w = self.lin.weight  # [C, in]
            el = x @ (self.att_src.view(1, C) @ w).view(-1, 1)
            er = x_dst @ (self.att_dst.view(1, C) @ w).view(-1, 1)
            feat = x
        else:
            if self.lin is not None:
                feat = self.lin(x)
                feat_dst = self.lin(x_dst) if bipartite else feat
            else:
                feat, feat_dst = self.lin_src(x), self.lin_dst(x_dst)
            el = (feat.view(n_src, H, C) * self.att_src).sum(-1)
            er = (feat_dst.view(n, H, C) * self.att_dst).sum(-1)
        h = resolve(edge_index, n, n_src if bipartite else -1)
        if self.add_self_loops:
            if n > n_src:
                raise NotImplementedError(
                    f"GATConv: self loops on a bipartite graph with more targets ({n}) than "
                    f"sources ({n_src}) are not supported by spgnn.nn; pass add_self_loops=False")
            h = _variant(edge_index, h, "loops")
        if isinstance(edge_index, DistGraph):
            # One exchange for the halo's transformed features and source attention logits.
            src = edge_index.gather(torch.cat([feat, el], 1))
            feat, el = src[:, : feat.shape[1]], src[:, feat.shape[1]:]
        p = self.dropout if self.training else 0.0
        seed = _ops.draw_seed(feat) if p > 0 else torch.zeros(1, dtype=torch.int64)
        # Heads of 4 or more features run at a width rounded up to a multiple of 4 (zero
        # columns, sliced off after): float4 loads instead of scalar ones (half rows on the GPU:
        # a multiple of 8 above 8, _attn_width). The attention logits
        # above use the true width, so the scores are unchanged. H100, 114M edges, one head:
        # fused forward 8.97 ms at 41 features, 6.24 at 44; backward 19.34 and 15.27.
        Fw = feat.shape[1] // H  # the attended width: C, or x's own (attend_x)
        Cp = _attn_width(Fw, half)
        if Cp != Fw:
            feat = F.pad(feat.reshape(feat.shape[0], H, Fw), (0, Cp - Fw)).reshape(-1, H * Cp)
        out, attn = _ops.gat_aggregate(h, feat.contiguous(), el.contiguous(), er.contiguous(), H,
                                       self.negative_slope, p, seed, n, "",
                                       _ops.gat_will_differentiate(feat, el, er))[:2]
        out = out.view(n, H, Cp)
        if Cp != Fw:
            out = out[..., :Fw]
        if attend_x:
            out = (out.reshape(n, Fw) @ w.t()).view(n, H, C)
        out = out.reshape(n, H * C) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        if return_attention_weights:
            ei = torch.stack([_ops.graph_tensor(h, "col", x, 0), _ops.graph_tensor(h, "row", x, 0)])
            if sparse_in:  # as PyG: the attended adj_t (self loops included) holding alpha
                adj = torch.sparse_coo_tensor(ei.flip(0), attn,
                                              (n, n_src) + tuple(attn.shape[1:])).coalesce()
                return out, (adj.to_sparse_csr() if layout == torch.sparse_csr else adj, attn)
            return out, (ei, attn)
        return out

    def __repr__(self):
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
