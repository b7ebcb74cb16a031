"""Sparse ops on a spgnn.Graph, DGL-style: g-SpMM, g-SDDMM, edge softmax, GAT aggregation and
the MaxK/CBSR products. All are differentiable (autograd through spgnn's own kernels) and trace
under torch.compile(fullgraph=True).

Conventions (DGL's): ``u`` is an edge's source, ``v`` its target, ``e`` the edge. Node features
are ``[N, *]`` (trailing dimensions are flattened and restored), edge features ``[E]``,
``[E, 1...]`` (broadcast over the features) or ``[E, *]`` matching the node features. Edge
tensors follow the order of the edges the graph was built from. Inputs are read in place: they
must be contiguous, float32 (float64 on the CPU, computed by the float64 reference), on the
graph's device. Every op also takes float16/bfloat16, on either device: gspmm and gsddmm with
GPU kernels that read them (float32 accumulation); the other ops, and every op on the CPU,
compute in float32 and round each result once. Under ``torch.autocast`` the ops cast their
float operands to the autocast dtype where that pays (the CPU; gspmm and gsddmm on the GPU),
else to float32.

    out = spgnn.ops.u_mul_e_sum(g, x, w)     # out[v] = sum over edges (u -> v) of x[u] * w[e]
    s = spgnn.ops.u_dot_v(g, q, k)           # s[e] = <q[u], k[v]>
    a = spgnn.ops.edge_softmax(g, s)         # softmax over each target's incoming edges
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _ops
from ._runtime import (check_float, check_int, check_real, check_same_dtype, check_tensor,
                       dtype_name)
from .graph import Graph

__all__ = ["gspmm", "gsddmm", "edge_softmax", "gat_aggregate", "maxk", "cbsr_to_dense",
           "cbsr_spgemm", "cbsr_sspmm", "dropout", "SPMM_OPS", "SPMM_REDUCES", "SDDMM_OPS"]

SPMM_OPS = ("copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e")
SPMM_REDUCES = ("sum", "mean", "max", "min")
SDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
# DGL's gspmm op names (lhs = source node data, rhs = edge data).
_DGL_SPMM = {"copy_lhs": "copy_u", "copy_rhs": "copy_e", "add": "u_add_e", "sub": "u_sub_e",
             "mul": "u_mul_e", "div": "u_div_e"}
_TARGETS = ("u", "v", "e")


def _graph(g) -> Graph:
    if not isinstance(g, Graph):
        raise TypeError(f"g must be a spgnn.Graph (build one with spgnn.Graph(edge_index, "
                        f"num_nodes)), got {type(g).__name__}")
    return g


def _flat2(x: Tensor) -> Tensor:
    """x as [rows, features] (trailing dimensions flattened; exact for empty tensors too)."""
    D = 1
    for d in x.shape[1:]:
        D *= d
    return x.reshape(x.shape[0], D)


def _to_spgnn_order(g: Graph, e: Tensor) -> Tensor:
    order = g.edge_order()
    return e if order is None else e.index_select(0, order)


def _to_user_order(g: Graph, e: Tensor) -> Tensor:
    order = g.edge_order()
    return e if order is None else torch.index_copy(torch.empty_like(e), 0, order, e)


def _node_operand(g: Graph, x: Tensor, name: str, rows: int, rows_name: str) -> Tensor:
    if isinstance(x, Tensor) and x.dim() < 2:
        raise ValueError(f"{name} must be [{rows_name}, F] (or more dimensions), got shape "
                         f"{tuple(x.shape)}")
    check_float(x, name, device=g.device, rows=rows, rows_name=rows_name)
    return _flat2(x)


def _no_scalar(t, name: str, want: str) -> None:
    """A 0-d tensor where edge data is expected: check_tensor's row check has no rows to read
    on it, and it would fail later as an IndexError naming nothing."""
    if isinstance(t, Tensor) and t.dim() == 0:
        raise ValueError(f"{name} must be {want}, got a 0-d tensor")


def _edge_operand(g: Graph, e: Tensor, name: str, feat_shape) -> Tensor:
    """e as [E, 1] (broadcast) or [E, D] in spgnn's edge order."""
    _no_scalar(e, name, "[E] or [E, D] (edge data)")
    check_float(e, name, device=g.device, rows=g.num_edges,
                rows_name="the number of edges E")
    trailing = tuple(e.shape[1:])
    D = 1
    for s in trailing:
        D *= s
    if D != 1 and feat_shape is not None and trailing != tuple(feat_shape):
        raise ValueError(f"{name} has shape {tuple(e.shape)}: edge data must be [E], [E, 1] "
                         f"(one weight per edge) or [E, {', '.join(map(str, feat_shape))}] "
                         "like the node features")
    return _to_spgnn_order(g, e.reshape(e.shape[0], D))


def gspmm(g: Graph, op: str, reduce_op: str, lhs_data: Optional[Tensor] = None,
          rhs_data: Optional[Tensor] = None, *, strategy: str = "auto") -> Tensor:
    """g-SpMM: ``out[v] = reduce_op over edges (u -> v) of op(lhs_data[u], rhs_data[e])``.

    ``op``: copy_u, copy_e, u_add_e, u_sub_e, u_mul_e, u_div_e, or DGL's names (copy_lhs,
    copy_rhs, add, sub, mul, div). ``reduce_op``: sum, mean, max, min; targets without incoming
    edges get 0. max/min propagate NaN as ``torch.scatter_reduce`` does, and their gradient goes
    to one message per output (ties: the first edge in spgnn's edge order). ``rhs_data`` may be
    omitted when the graph has edge weights. ``strategy`` picks the kernel ("auto", or a
    schedule such as "gnnone:cache_size=64"; see ``spgnn strategies``).

    On the GPU, rows of a width that is a multiple of 4 (8 for float16/bfloat16) load as 16-byte
    vectors; other widths load element by element and can run over twice as long (H200, a
    Reddit-sized graph, copy_u: 41 features 5.4-6.1 ms, 44 features 2.4-2.6 ms). Inputs are
    never copied, so pad such features yourself (``torch.nn.functional.pad``) where speed
    matters; ``spgnn.nn``'s layers do this internally.
    """
    g = _graph(g)
    op = _DGL_SPMM.get(op, op)
    if op not in SPMM_OPS:
        raise ValueError(f"op must be one of {', '.join(SPMM_OPS)} (or DGL's "
                         f"{', '.join(_DGL_SPMM)}), got {op!r}")
    if reduce_op not in SPMM_REDUCES:
        raise ValueError(f"reduce_op must be one of {', '.join(SPMM_REDUCES)}, got {reduce_op!r}")
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a string, got {type(strategy).__name__}")
    u = e = None
    feat_shape = None
    if op != "copy_e":
        if lhs_data is None:
            raise ValueError(f"gspmm({op}) needs lhs_data (node features of the sources)")
        u = _node_operand(g, lhs_data, "lhs_data", g.num_src_nodes, "num_src_nodes")
        feat_shape = tuple(lhs_data.shape[1:])
    if op != "copy_u":
        if rhs_data is not None:
            e = _edge_operand(g, rhs_data, "rhs_data", feat_shape)
            if u is not None and u.dtype != e.dtype:
                raise TypeError(f"lhs_data is {u.dtype} but rhs_data is {e.dtype}")
            if feat_shape is None:
                feat_shape = tuple(rhs_data.shape[1:]) or (1,)
        elif not g.has_weights:
            raise ValueError(f"gspmm({op}) needs rhs_data (edge data): this graph has no edge "
                             "weights to use instead")
        elif u is None:
            raise ValueError("gspmm(copy_e) needs rhs_data")
    strategy = "" if strategy == "auto" else strategy
    h = g.handle()
    if reduce_op in ("sum", "mean"):
        out = _ops.gspmm(h, op, reduce_op, u, e, g.num_dst_nodes, strategy)
    else:
        out = _ops.gspmm_arg(h, op, reduce_op, u, e, g.num_dst_nodes, strategy)[0]
    return out.reshape((g.num_dst_nodes,) + tuple(feat_shape))


def gsddmm(g: Graph, op: str, lhs_data: Optional[Tensor], rhs_data: Optional[Tensor],
           lhs_target: str = "u", rhs_target: str = "v") -> Tensor:
    """g-SDDMM: ``out[e] = op(lhs_data[lhs_target(e)], rhs_data[rhs_target(e)])`` for every edge,
    targets ``u`` (source node), ``v`` (target node) or ``e`` (the edge). ``op``: add, sub, mul,
    div, dot (over the last dimension of 2-D operands, giving [E, 1]), copy_lhs, copy_rhs.
    Returns [E, *] in the graph's edge order."""
    g = _graph(g)
    if op not in SDDMM_OPS:
        raise ValueError(f"op must be one of {', '.join(SDDMM_OPS)}, got {op!r}")
    for t, name in ((lhs_target, "lhs_target"), (rhs_target, "rhs_target")):
        if t not in _TARGETS:
            raise ValueError(f"{name} must be 'u', 'v' or 'e', got {t!r}")

    def operand(x, name, target):
        if target == "e":
            check_float(x, name, device=g.device, rows=g.num_edges,
                        rows_name="the number of edges E")
            if x.dim() < 2:
                raise ValueError(f"{name} must be [E, F], got shape {tuple(x.shape)}")
            return _to_spgnn_order(g, _flat2(x))
        rows = g.num_src_nodes if target == "u" else g.num_dst_nodes
        return _node_operand(g, x, name, rows, "num_src_nodes" if target == "u" else
                             "num_dst_nodes")

    lhs = rhs = None
    shapes = []
    if op != "copy_rhs":
        if lhs_data is None:
            raise ValueError(f"gsddmm({op}) needs lhs_data")
        lhs = operand(lhs_data, "lhs_data", lhs_target)
        shapes.append(tuple(lhs_data.shape[1:]))
    if op != "copy_lhs":
        if rhs_data is None:
            raise ValueError(f"gsddmm({op}) needs rhs_data")
        rhs = operand(rhs_data, "rhs_data", rhs_target)
        shapes.append(tuple(rhs_data.shape[1:]))
    if len(shapes) == 2:
        if shapes[0] != shapes[1]:
            raise ValueError(f"lhs_data and rhs_data must have the same feature shape, got "
                             f"{shapes[0]} and {shapes[1]}")
        if lhs.dtype != rhs.dtype:
            raise TypeError(f"lhs_data is {lhs.dtype} but rhs_data is {rhs.dtype}")
    if op == "dot" and len(shapes[0]) != 1:
        raise NotImplementedError(f"dot takes [N, F] operands (got feature shape {shapes[0]}); "
                                  "for several heads, call it per head or reshape")
    out = _ops.gsddmm(g.handle(), op, lhs, rhs, lhs_target, rhs_target)
    out = _to_user_order(g, out)
    return out if op == "dot" else out.reshape((g.num_edges,) + shapes[0])


def edge_softmax(g: Graph, logits: Tensor, norm_by: str = "dst") -> Tensor:
    """Softmax of edge scores over each target's incoming edges (``norm_by="dst"``, the GAT
    normalisation) or each source's outgoing edges (``"src"``), per column. ``logits``: [E] or
    [E, H] (or [E, H, 1]); the result has its shape and edge order. Targets without edges have
    nothing to normalise."""
    g = _graph(g)
    if norm_by not in ("dst", "src"):
        raise ValueError(f"norm_by must be 'dst' or 'src', got {norm_by!r}")
    _no_scalar(logits, "logits", "[E] or [E, H] (scores per edge and head)")
    check_float(logits, "logits", device=g.device, rows=g.num_edges,
                rows_name="the number of edges E")
    if logits.dtype == torch.float64:
        raise TypeError("edge_softmax takes float32 (or float16/bfloat16) logits, got float64")
    s = _to_spgnn_order(g, _flat2(logits))
    h = g.handle()
    if norm_by == "dst":
        out = _ops.edge_softmax(h, s)
    else:
        ht = _ops.graph_variant(h, "transpose")
        perm = _ops.graph_tensor(ht, "edge_source", s, 0)
        out_t = _ops.edge_softmax(ht, s.index_select(0, perm).contiguous())
        out = torch.index_copy(torch.empty_like(out_t), 0, perm, out_t)
    return _to_user_order(g, out).reshape(logits.shape)


def gat_aggregate(g: Graph, feat: Tensor, el: Tensor, er: Tensor, negative_slope: float = 0.2,
                  attn_dropout: float = 0.0, *, training: bool = True,
                  strategy: str = "auto") -> Tuple[Tensor, Tensor]:
    """GAT's attention and aggregation in one op (fused on the GPU, TLPGNN-style):
    ``a_e = softmax over v's edges of leaky_relu(el[u, h] + er[v, h])`` (dropped out with
    probability ``attn_dropout`` when training), ``out[v, h] = sum_e a_e * feat[u, h]``.
    feat: [N_src, H, F] (or [N_src, H*F]), el: [N_src, H], er: [N_dst, H]. With float16 or
    bfloat16 feat, el and er may be float32 (used unrounded; autocast keeps them so) or feat's
    dtype. Returns (out [N_dst, H, F] and attention [E, H] before dropout, in the graph's edge
    order, both in feat's dtype). On float32 CUDA tensors the backward reads ``out`` (as
    torch.softmax's reads its output): modifying it in place makes autograd raise."""
    g = _graph(g)
    check_float(el, "el", ndim=(2,), device=g.device, rows=g.num_src_nodes,
                rows_name="num_src_nodes")
    H = el.shape[1]
    check_float(er, "er", ndim=(2,), device=g.device, rows=g.num_dst_nodes,
                rows_name="num_dst_nodes")
    check_float(feat, "feat", ndim=(2, 3), device=g.device, rows=g.num_src_nodes,
                rows_name="num_src_nodes")
    if feat.dtype == torch.float64:
        raise TypeError("gat_aggregate takes float32 (or float16/bfloat16) tensors, got float64")
    if feat.dtype in (torch.float16, torch.bfloat16):
        # float32 el / er stay unrounded (their sum is the logit; the kernels read them as float32)
        for t, name in ((el, "el"), (er, "er")):
            if t.dtype not in (torch.float32, feat.dtype):
                raise TypeError(f"{name} is {dtype_name(t.dtype)} but feat is "
                                f"{dtype_name(feat.dtype)}: el and er must be float32 or feat's "
                                "dtype")
    else:
        check_same_dtype((feat, "feat"), (el, "el"), (er, "er"))
    if er.shape[1] != H or (feat.dim() == 3 and feat.shape[1] != H) or _flat2(
            feat).shape[1] % max(H, 1):
        raise ValueError(f"heads disagree: el {tuple(el.shape)}, er {tuple(er.shape)}, feat "
                         f"{tuple(feat.shape)}")
    attn_dropout = check_real(attn_dropout, "attn_dropout", 0.0, 1.0, hi_open=True)
    negative_slope = check_real(negative_slope, "negative_slope")
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a string, got {type(strategy).__name__}")
    p = attn_dropout if training else 0.0
    seed = torch.randint(0, 2**62, (1,), dtype=torch.int64) if p > 0 else torch.zeros(
        1, dtype=torch.int64)
    out, attn = _ops.gat_aggregate(g.handle(), _flat2(feat), el, er, H,
                                   negative_slope, p, seed, g.num_dst_nodes,
                                   "" if strategy == "auto" else strategy,
                                   _ops.gat_will_differentiate(feat, el, er))[:2]
    shape = (g.num_dst_nodes,) + tuple(feat.shape[1:])
    return out.reshape(shape), _to_user_order(g, attn)


# ---- MaxK and CBSR -----------------------------------------------------------------------------

def maxk(x: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """The k largest values of each row of x [N, F] (ties to the lower column) in CBSR form:
    (values [N, k] in ascending column order, columns [N, k] uint8 when F <= 256, else
    uint16). Differentiable in x."""
    check_float(x, "x", ndim=(2,))
    if x.dtype == torch.float64:
        raise TypeError("maxk takes float32 (or float16/bfloat16), got float64")
    k = check_int(k, "k", 1, x.shape[1], what=f"an int in [1, F = {x.shape[1]}]")
    if x.shape[1] > _MAX_F:
        raise ValueError(f"maxk needs F <= {_MAX_F} (uint16 columns), got {x.shape[1]}")
    return _ops.maxk(x, k)


def cbsr_to_dense(values: Tensor, columns: Tensor, num_features: int) -> Tensor:
    """The dense [N, F] matrix of a CBSR pair (zeros outside the kept columns)."""
    num_features = _check_cbsr(values, columns, num_features, "num_features")
    return _ops.cbsr_to_dense(values, columns, num_features)


_MAX_F = 65536  # uint16 columns reach column 65535


def _check_cbsr(values: Tensor, columns: Tensor, F, F_name: str) -> int:
    """A CBSR pair of F features, checked here so that errors name the caller's arguments (the
    compiled core's checks name its own: 'kept.index', 'x.k'). Returns F as an int."""
    check_float(values, "values", ndim=(2,))
    if values.dtype == torch.float64:
        raise TypeError("CBSR values must be float32 (or float16/bfloat16), got float64")
    k = values.shape[1]
    F = check_int(F, F_name, 1, _MAX_F, what=f"an int in [1, {_MAX_F}] (uint16 columns)")
    if k > F:
        raise ValueError(f"values has k = {k} columns but {F_name} = {F}: a row keeps at most F "
                         "features")
    want = _ops.cbsr_index_dtype(F)
    if isinstance(columns, Tensor) and columns.dtype in (torch.uint8, torch.uint16) \
            and columns.dtype != want:
        raise TypeError(f"columns must have dtype {dtype_name(want)} for "
                        f"{F_name} = {F} (uint8 when F <= 256, else uint16), got "
                        f"{dtype_name(columns.dtype)}")
    check_tensor(columns, "columns", ndim=(2,), dtypes=(want,), device=values.device)
    if columns.shape != values.shape:
        raise ValueError(f"values {tuple(values.shape)} and columns {tuple(columns.shape)} "
                         "must have one shape [N, k]")
    # Host columns are range-checked (one pass over N * k bytes, as the core's own check). Not
    # device ones: that would wait for the GPU on every call; the GPU kernels skip entries >= F
    # (they never read outside a row). Nor fake tensors under torch.compile, which hold no data.
    if _ops._eager(columns) and not _ops._functorch_active() and columns.is_cpu \
            and columns.numel():
        bad = _first_column_outside(columns, F)
        if bad is not None:
            r, j, v = bad
            raise ValueError(f"columns[{r}, {j}] = {v} is outside [0, {F_name} = {F})")
    return F


def _first_column_outside(columns: Tensor, F: int):
    """(row, position, value) of the first entry >= F of host CBSR columns, or None."""
    if columns.dtype == torch.uint8:
        if int(columns.max()) < F:
            return None
        wide = columns.to(torch.int32)
    else:
        # torch has no max or comparison for uint16: read the bits as int16, where entries below
        # 32768 keep their value and the others turn negative.
        lo, hi = torch.aminmax(columns.view(torch.int16))
        if int(lo) >= 0 and int(hi) < F:
            return None
        wide = columns.view(torch.int16).to(torch.int32) & 0xFFFF
    idx = torch.nonzero(wide >= F)
    if idx.numel() == 0:
        return None
    r, j = (int(i) for i in idx[0])
    return r, j, int(wide[r, j])


def cbsr_spgemm(g: Graph, values: Tensor, columns: Tensor, num_features: int,
                e: Optional[Tensor] = None) -> Tensor:
    """``out[v] = sum over edges (u -> v) of w_e * X[u]`` with X [N_src, F] in CBSR form (MaxK's
    forward aggregation). ``e``: [E] edge weights (default: the graph's, or 1)."""
    g = _graph(g)
    num_features = _check_cbsr(values, columns, num_features, "num_features")
    check_tensor(values, "values", device=g.device, rows=g.num_src_nodes,
                 rows_name="num_src_nodes")
    e2 = None if e is None else _edge_operand(g, e, "e", None)
    check_same_dtype((values, "values"), (e, "e"))
    return _ops.cbsr_spgemm(g.handle(), values, columns, num_features, e2, g.num_dst_nodes)


def cbsr_sspmm(g: Graph, d_out: Tensor, values: Tensor, columns: Tensor,
               e: Optional[Tensor] = None) -> Tensor:
    """MaxK's backward product: ``d_values[u, j] = sum over edges (u -> v) of w_e *
    d_out[v, columns[u, j]]`` ([N_src, k])."""
    g = _graph(g)
    check_float(d_out, "d_out", ndim=(2,), device=g.device, rows=g.num_dst_nodes,
                rows_name="num_dst_nodes")
    _check_cbsr(values, columns, d_out.shape[1], "d_out's width F")
    check_tensor(values, "values", device=g.device, rows=g.num_src_nodes,
                 rows_name="num_src_nodes")
    e2 = None if e is None else _edge_operand(g, e, "e", None)
    check_same_dtype((d_out, "d_out"), (values, "values"), (e, "e"))
    return _ops.cbsr_sspmm(g.handle(), e2, d_out, values, columns)


# ---- DGL-style shortcuts -------------------------------------------------------------------------

def _make_spmm(op: str, reduce_op: str):
    if op == "copy_u":
        def f(g, x):
            return gspmm(g, "copy_u", reduce_op, x, None)
        doc = f"out[v] = {reduce_op} over edges (u -> v) of x[u]"
    elif op == "copy_e":
        def f(g, x):
            return gspmm(g, "copy_e", reduce_op, None, x)
        doc = f"out[v] = {reduce_op} over edges (u -> v) of x[e]"
    else:
        def f(g, x, y=None):
            return gspmm(g, op, reduce_op, x, y)
        sym = {"u_add_e": "+", "u_sub_e": "-", "u_mul_e": "*", "u_div_e": "/"}[op]
        doc = f"out[v] = {reduce_op} over edges (u -> v) of x[u] {sym} y[e]"
    f.__name__ = f.__qualname__ = f"{op}_{reduce_op}"
    f.__doc__ = doc + " (see gspmm)."
    return f


def _make_sddmm(lhs: str, op: str, rhs: str):
    def f(g, x, y):
        return gsddmm(g, op, x, y, lhs, rhs)
    name = f"{lhs}_{op}_{rhs}"
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"out[e] = {op}(x[{lhs}], y[{rhs}]) for every edge (see gsddmm)."
    return f


def _make_copy(target: str):
    def f(g, x):
        return gsddmm(g, "copy_lhs", x, None, target, "v")
    f.__name__ = f.__qualname__ = f"copy_{target}"
    f.__doc__ = f"out[e] = x[{target}] for every edge (see gsddmm)."
    return f


for _op in SPMM_OPS:
    for _r in SPMM_REDUCES:
        _f = _make_spmm(_op, _r)
        globals()[_f.__name__] = _f
        __all__.append(_f.__name__)
for _l in _TARGETS:
    for _rt in _TARGETS:
        if _l == _rt:
            continue
        for _op in ("add", "sub", "mul", "div", "dot"):
            _f = _make_sddmm(_l, _op, _rt)
            globals()[_f.__name__] = _f
            __all__.append(_f.__name__)
for _t in ("u", "v"):
    _f = _make_copy(_t)
    globals()[_f.__name__] = _f
    __all__.append(_f.__name__)
del _op, _r, _l, _rt, _t, _f


def check_probability(p, who: str) -> None:
    """A dropout probability, as torch.nn.Dropout takes it: a number in [0, 1]."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{who}: p must be a probability in [0, 1], got {p!r}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Inverted dropout with torch.nn.functional.dropout's arguments and result: when training,
    each element is zeroed with probability ``p`` and the others are scaled by 1 / (1 - p).

    The mask is a hash of (seed, element index), the seed drawn from torch's default generator
    (so ``torch.manual_seed`` repeats a run): no mask is stored for the backward, which
    recomputes it, and on the CPU the elements are hashed in parallel, branch-free outside
    mostly-zero stretches (a 2708 x 1433 float32 input on 2 cores: 2-4 ms, torch's CPU dropout
    54-60 ms). float32 (and float64 on the CPU) run spgnn's kernel; other float dtypes go to
    torch's own dropout. ``inplace=True`` writes the result into ``input``, as torch does (no
    memory is saved by it here)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"dropout: input must be a torch.Tensor, got {type(input).__name__}")
    check_probability(p, "dropout")
    if not input.is_floating_point():
        raise TypeError(f"dropout: input must be a float tensor, got {input.dtype}")
    # torch's dropout has no sparse kernel either (it fails naming aten::bernoulli_).
    if input.layout != torch.strided:
        raise ValueError(f"dropout: input is a {input.layout} tensor: dropout takes a dense "
                         "(strided) tensor (input.to_dense())")
    if not training or p == 0:
        return input
    if p == 1:  # torch's result: every element zeroed (NaN and inf times 0, as torch has it)
        return input.mul_(0.0) if inplace else input * 0.0
    # Devices without spgnn kernels (meta, as in a model built on the meta device; mps, ...)
    # get torch's dropout, as other dtypes do: what torch.nn.Dropout gives there.
    if not ((input.dtype == torch.float32 and (input.is_cpu or input.is_cuda))
            or (input.dtype == torch.float64 and input.is_cpu)):
        return torch.nn.functional.dropout(input, p, True, inplace)
    out = _ops.dropout(input.contiguous(), float(p), _ops.draw_seed(input))
    return input.copy_(out) if inplace else out
