"""spgnn's kernels as PyTorch custom ops (torch.library): each has a fake implementation (shapes
only, for torch.compile) and, where it is differentiable, an autograd formula written with other
spgnn ops, so forward and backward both compile without graph breaks.

Graphs cross op boundaries as *handles*: an int64 host tensor of shape [nnz, 0] over one element
(read through its storage, which exists though the tensor holds no elements), the id of a graph
entry of the compiled core. The entry stays alive as long as any handle does; the shape tells
fake implementations the edge count (data-dependent for derived graphs, e.g. after adding self
loops), so edge-shaped outputs get the right symbolic size. These ops are internal: the public
API is spgnn.ops, spgnn.Graph and spgnn.nn.

Why [nnz, 0] with strides (1, 1), and not [nnz] with stride 0: torch.compile(mode=
"reduce-overhead") checks every input of a compiled region for internal overlap
(torch._inductor.output_code.complex_memory_overlap), which asks of each stride-0 dimension
whether its size is 1. For a derived graph's data-dependent edge count that has no answer, and
torch 2.11 stopped the backward's compilation with "GuardOnDataDependentSymNode: Ne(u1, 1)".
With no stride-0 dimension the question is never asked; an empty tensor needs no storage past
its offset, so any strides are valid over the one element.

Edge tensors here are in the graph's canonical order (sorted by destination, then source);
spgnn.ops maps them from and to the caller's edge order.
"""
# No `from __future__ import annotations` here: torch 2.4's custom_op reads the annotations of
# the op functions as types and rejects the strings that import makes of them.
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _device_graph
from ._runtime import C, arr, on_device, stream_of

_lib = "spgnn"

# torch >= 2.4 names
register_fake = torch.library.register_fake
register_autograd = torch.library.register_autograd

# Every spgnn op is tagged cudagraph_unsafe where torch has that tag, so that
# torch.compile(mode="reduce-overhead") runs them between its CUDA-graph partitions instead of
# recording them: a model reaches its graphs through host-side handles, whose lookups (and the
# variants built on first use) inductor's graph trees would not replay. The ops themselves can be
# captured: torch.cuda.graph over a whole eager or compiled training step, after a warm-up step
# (python/tests/test_cuda_graph.py), replays them with no host work.
_UNSAFE_TAGS = tuple(t for t in (getattr(torch.Tag, "cudagraph_unsafe", None),) if t is not None)


def custom_op(name, fn, *, mutates_args):
    # custom_op's tags= and the cudagraph_unsafe tag both came in 2025 releases; a torch with the
    # tag but not the argument registers the op untagged rather than failing at import
    if _UNSAFE_TAGS:
        try:
            return torch.library.custom_op(name, fn, mutates_args=mutates_args,
                                           tags=_UNSAFE_TAGS)
        except TypeError:
            pass
    return torch.library.custom_op(name, fn, mutates_args=mutates_args)


def _new_size():
    """A fresh symbolic size for a data-dependent edge count (fake mode only)."""
    ctx = torch.library.get_ctx()
    env = getattr(ctx, "_shape_env", None)
    if env is None or env.allow_dynamic_output_shape_ops:
        return ctx.new_dynamic_size()
    # torch 2.4's torch.compile allows such sizes only where
    # torch._dynamo.config.capture_dynamic_output_shape_ops is on, and stopped at "dynamic shape
    # operator: spgnn.graph_variant" without it; later versions allow them. new_dynamic_size
    # makes them with these two calls once allowed; making them here leaves that global setting
    # (and what it does to the user's own nonzero() & co.) as it was.
    size = env.create_unbacked_symint()
    torch.fx.experimental.symbolic_shapes._constrain_range_for_size(size, min=0)
    return size


def handle_from_base(base: Tensor, nnz: int) -> Tensor:
    return base.as_strided((nnz, 0), (1, 1))


def _fake_handle(nnz) -> Tensor:
    return handle_from_base(torch.empty(1, dtype=torch.int64, device="cpu"), nnz)


def nnz_of(h: Tensor):
    return h.shape[0]


def _addr(h: Tensor) -> int:
    if h.dtype != torch.int64 or h.device.type != "cpu" or h.dim() != 2:
        raise TypeError("not a spgnn graph handle")
    return h.untyped_storage().data_ptr() + 8 * h.storage_offset()


def wrap_handle(obj_nnz) -> Tensor:
    """A handle tensor from what _C.build_graph / _C.derive return: (array over the id, nnz)."""
    obj, nnz = obj_nnz
    return handle_from_base(torch.from_dlpack(obj), nnz)


# ---- graphs ----------------------------------------------------------------------------------------

def _eager(*ts: Tensor) -> bool:
    """True outside torch.compile's tracing, on real tensors: graph lookups then skip the
    custom-op dispatch (tens of microseconds of host time per call, which a training step whose
    loss syncs on a boolean mask pays while the GPU waits)."""
    return not torch.compiler.is_compiling() and all(type(t) is Tensor for t in ts)


# The graph-handle ops below are defined through torch.library.Library, not custom_op: they are
# never differentiated (handles, and graph arrays that are constants), and custom_op wraps each
# call in a Python autograd layer, a redispatch and an output-aliasing check: 10.8 us a call
# against 6.2 here, for a lookup of 3.7 us (this CPU, no grad). A compiled GCN step makes three
# such calls, each before or after its kernels, on the host time that torch.compile adds.
_handle_lib = torch.library.Library(_lib, "FRAGMENT")


def _handle_op(schema: str, impl):
    name = schema.split("(", 1)[0]
    _handle_lib.define(schema, tags=(torch.Tag.pt2_compliant_tag,) + _UNSAFE_TAGS)
    _handle_lib.impl(name, impl, "CompositeExplicitAutograd")
    # not differentiable: outputs never require grad (graph_tensor's `like` only names a dtype)
    _handle_lib.impl(name, torch.library.fallthrough_kernel, "Autograd")
    return getattr(torch.ops.spgnn, name).default


def _graph_from_edge_index_impl(edge_index: Tensor, num_nodes: int, num_src: int) -> Tensor:
    from .graph import _edge_index_graph
    # A fresh handle, not a view of the cached graph's: torch.compile may recycle the storage of
    # an op's output once it is done with it.
    return _edge_index_graph(edge_index, num_nodes, num_src).fresh_handle()


_graph_from_edge_index_op = _handle_op(
    "graph_from_edge_index(Tensor edge_index, SymInt num_nodes, SymInt num_src) -> Tensor",
    _graph_from_edge_index_impl)


@register_fake(f"{_lib}::graph_from_edge_index")
def _(edge_index, num_nodes, num_src):
    return _fake_handle(edge_index.shape[1])


def graph_from_edge_index(edge_index: Tensor, num_nodes: int, num_src: int = -1) -> Tensor:
    """The handle of edge_index's graph with num_nodes targets and num_src sources (-1: as many
    as targets)."""
    if _eager(edge_index):
        from .graph import _edge_index_graph
        return _edge_index_graph(edge_index, num_nodes, num_src).handle()
    return _graph_from_edge_index_op(edge_index, num_nodes, num_src)


# Derivations whose edge count equals the parent's.
_SAME_NNZ = {"mean", "pattern", "transpose", "gcn_noloops"}


def _derive(h: Tensor, kind: str) -> Tensor:
    addr = _addr(h)
    if kind in _device_graph.KINDS:
        # A graph built on its GPU gets its variants built there too (_device_graph).
        hit = C.cached_variant(addr, kind)
        if hit is not None:
            return wrap_handle(hit)
        info = C.graph_info(addr)
        if info["device_built"]:
            built = _device_graph.derive(addr, kind, info)
            return wrap_handle(built if built is not None else C.rehandle(addr))
    try:
        return wrap_handle(C.derive(addr, kind))
    except MemoryError as e:  # std::bad_alloc names nothing
        info = C.graph_info(addr)
        raise MemoryError(f"cannot build the {kind} variant of a graph of {info['n_rows']} "
                          f"target and {info['n_cols']} source nodes ({info['nnz']} edges): "
                          f"it does not fit in memory ({e})") from e


_graph_variant_op = _handle_op("graph_variant(Tensor h, str kind) -> Tensor", _derive)


@register_fake(f"{_lib}::graph_variant")
def _(h, kind):
    return _fake_handle(nnz_of(h) if kind in _SAME_NNZ else _new_size())


def graph_variant(h: Tensor, kind: str) -> Tensor:
    """The handle of a derived graph (built once, cached with its parent)."""
    if _eager(h):
        return _derive(h, kind)
    return _graph_variant_op(h, kind)


_NODE_SHAPED = ("inv_degree",)


def _graph_tensor_impl(h: Tensor, name: str, like: Tensor, rows: int) -> Tensor:
    """A fresh copy of one of the graph's arrays (see _C.graph_tensor) on `like`'s device, in
    `like`'s float dtype for float arrays. `rows` is the length of node-shaped arrays
    (inv_degree: the graph's rows), which fake tensors cannot read off the handle."""
    shape, dtype, device_built = C.graph_tensor_spec(_addr(h), name)
    if name in _NODE_SHAPED and shape[0] != rows:
        raise ValueError(f"graph_tensor({name}): the graph has {shape[0]} such rows, not {rows}")
    if device_built and like.is_cuda:
        out = _device_graph.tensor(_addr(h), name)
        if out.device != like.device:
            raise ValueError(f"graph_tensor({name}): the graph is on {out.device}, not "
                             f"{like.device}")
        return out.to(like.dtype) if out.is_floating_point() else out
    out = torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    with on_device(like):
        C.graph_tensor(_addr(h), name, arr(out), stream_of(like))
    return out.to(like.dtype) if out.is_floating_point() else out


_graph_tensor_op = _handle_op(
    "graph_tensor(Tensor h, str name, Tensor like, SymInt rows) -> Tensor", _graph_tensor_impl)


@register_fake(f"{_lib}::graph_tensor")
def _(h, name, like, rows):
    if name in _NODE_SHAPED:
        return like.new_empty((rows,))
    if name == "values":
        return like.new_empty((nnz_of(h),))
    return like.new_empty((nnz_of(h),), dtype=torch.int64)


# ---- g-SpMM ----------------------------------------------------------------------------------------

def _spmm_width(op: str, u: Optional[Tensor], e: Optional[Tensor]) -> int:
    if op == "copy_e":
        return 1 if e is None or e.dim() == 1 else e.shape[1]
    return u.shape[1]


def _like(u, e):
    return u if u is not None else e


def _gspmm_impl(h: Tensor, op: str, reduce: str, u: Optional[Tensor], e: Optional[Tensor],
                n_rows: int, strategy: str) -> Tensor:
    like = _like(u, e)
    out = torch.empty((n_rows, _spmm_width(op, u, e)), dtype=like.dtype, device=like.device)
    with on_device(like):
        C.gspmm(_addr(h), op, reduce, arr(u), arr(e), arr(out), None, None, stream_of(like),
                strategy)
    return out


_gspmm_op = custom_op(f"{_lib}::gspmm", _gspmm_impl, mutates_args=())


@register_fake(f"{_lib}::gspmm")
def _(h, op, reduce, u, e, n_rows, strategy):
    like = _like(u, e)
    return like.new_empty((n_rows, _spmm_width(op, u, e)))


def _gspmm_arg_impl(h: Tensor, op: str, reduce: str, u: Optional[Tensor], e: Optional[Tensor],
                    n_rows: int, strategy: str) -> Tuple[Tensor, Tensor, Tensor]:
    like = _like(u, e)
    F = _spmm_width(op, u, e)
    out = torch.empty((n_rows, F), dtype=like.dtype, device=like.device)
    arg_u = torch.empty((n_rows, F), dtype=torch.int64, device=like.device)
    arg_e = torch.empty((n_rows, F), dtype=torch.int64, device=like.device)
    with on_device(like):
        C.gspmm(_addr(h), op, reduce, arr(u), arr(e), arr(out), arr(arg_u), arr(arg_e),
                stream_of(like), strategy)
    return out, arg_u, arg_e


_gspmm_arg_op = custom_op(f"{_lib}::gspmm_arg", _gspmm_arg_impl, mutates_args=())


@register_fake(f"{_lib}::gspmm_arg")
def _(h, op, reduce, u, e, n_rows, strategy):
    like = _like(u, e)
    F = _spmm_width(op, u, e)
    return (like.new_empty((n_rows, F)), like.new_empty((n_rows, F), dtype=torch.int64),
            like.new_empty((n_rows, F), dtype=torch.int64))


def _reduce_to(g: Tensor, e: Tensor) -> Tensor:
    """Sums an edge gradient [nnz, F] down to e's (broadcast) shape."""
    if e.dim() == 1:
        return g.sum(1) if g.shape[1] != 1 else g.reshape(-1)
    if e.shape[1] == 1 and g.shape[1] != 1:
        return g.sum(1, keepdim=True)
    return g


def _transpose_perm(ht: Tensor, like: Tensor) -> Tensor:
    """Edge i of the transpose ht is edge perm[i] of its parent: edge tensors of the parent
    enter the transpose as x.index_select(0, perm). Fetched only where an edge tensor needs it."""
    return graph_tensor(ht, "edge_source", like, 0)


def _e_values(h: Tensor, e: Optional[Tensor], like: Tensor) -> Tensor:
    return e if e is not None else graph_tensor(h, "values", like, 0)


def _gspmm_setup(ctx, inputs, output):
    h, op, reduce, u, e, n_rows, strategy = inputs
    ctx.op, ctx.reduce, ctx.strategy = op, reduce, strategy
    ctx.n_cols = u.shape[0] if u is not None else None
    ctx.e_none = e is None
    ctx.save_for_backward(h, u, e)


def _gspmm_sum_backward(h, op, u, e, grad, need_u, need_e, n_cols):
    """Gradients of a sum-reduced g-SpMM w.r.t. u and e, given grad_out (already divided by the
    degree for mean)."""
    gu = ge = None
    if need_u and op != "copy_e":
        ht = graph_variant(h, "transpose")
        if op in ("copy_u", "u_add_e", "u_sub_e"):
            gu = gspmm(ht, "copy_u", "sum", grad, None, n_cols, "")
        else:  # u_mul_e, u_div_e: the same op over the transpose with e in its edge order
            # (the transpose carries the graph's own values already permuted)
            et = None if e is None else e.index_select(0, _transpose_perm(ht, grad))
            gu = gspmm(ht, op, "sum", grad, et, n_cols, "")
    if need_e and e is not None:
        broadcast = e.dim() == 1 or (e.shape[1] == 1 and grad.shape[1] != 1)
        if op == "copy_e" or op in ("u_add_e", "u_sub_e"):
            g = grad.sum(1, keepdim=True) if broadcast else grad
            ge = gsddmm(h, "copy_rhs", None, g, "u", "v")
            if op == "u_sub_e":
                ge = -ge
        elif op == "u_mul_e":
            ge = gsddmm(h, "dot" if broadcast else "mul", u, grad, "u", "v")
        else:  # u_div_e: d(u / e) / de = -u / e^2
            ue = gsddmm(h, "dot" if broadcast else "mul", u, grad, "u", "v")
            ev = e.reshape(-1, 1) if e.dim() == 1 else e
            ge = -ue / (ev * ev)
        ge = _reduce_to(ge, e)
    return gu, ge


def _gspmm_backward(ctx, grad):
    h, u, e = ctx.saved_tensors
    grad = grad.contiguous()
    if ctx.reduce == "mean":
        grad = grad * graph_tensor(h, "inv_degree", grad, grad.shape[0]).unsqueeze(1)
    gu, ge = _gspmm_sum_backward(h, ctx.op, u, e, grad, ctx.needs_input_grad[3],
                                 ctx.needs_input_grad[4], ctx.n_cols)
    return None, None, None, gu, ge, None, None


register_autograd(f"{_lib}::gspmm", _gspmm_backward, setup_context=_gspmm_setup)


def _gspmm_arg_setup(ctx, inputs, output):
    h, op, reduce, u, e, n_rows, strategy = inputs
    _, arg_u, arg_e = output
    ctx.op = op
    ctx.e_shape = None if e is None else tuple(e.shape)
    ctx.save_for_backward(h, u, e, arg_u, arg_e)
    ctx.mark_non_differentiable(arg_u, arg_e)


def _gspmm_arg_backward(ctx, grad, _gu, _ge):
    """max/min: each output element came from one edge (arg_e) and source (arg_u); rows without
    edges (arg = -1) give nothing."""
    h, u, e, arg_u, arg_e = ctx.saved_tensors
    op = ctx.op
    grad = grad.contiguous()
    valid = arg_e >= 0
    ie = arg_e.clamp(min=0)
    iu = arg_u.clamp(min=0)
    F = grad.shape[1]

    def e_at(values: Tensor) -> Tensor:  # the winning edge's operand, per output element
        v = values.reshape(values.shape[0], -1)
        return v.reshape(-1)[ie] if v.shape[1] == 1 else v.gather(0, ie)

    gu = ge = None
    if ctx.needs_input_grad[3] and op != "copy_e":
        factor = None
        if op in ("u_mul_e", "u_div_e"):
            w = e_at(_e_values(h, e, grad))
            factor = w if op == "u_mul_e" else 1.0 / w
        contrib = grad if factor is None else grad * factor
        contrib = torch.where(valid, contrib, torch.zeros_like(contrib))
        gu = torch.zeros_like(u).scatter_add_(0, iu, contrib)
    if ctx.needs_input_grad[4] and e is not None and op != "copy_u":
        if op == "copy_e" or op == "u_add_e":
            d = grad
        elif op == "u_sub_e":
            d = -grad
        elif op == "u_mul_e":
            d = grad * u.gather(0, iu)
        else:  # u_div_e
            w = e_at(e)
            d = -grad * u.gather(0, iu) / (w * w)
        d = torch.where(valid, d, torch.zeros_like(d))
        full = torch.zeros((e.shape[0], F), dtype=grad.dtype, device=grad.device)
        full.scatter_add_(0, ie, d)
        ge = _reduce_to(full, e).reshape(ctx.e_shape)
    return None, None, None, gu, ge, None, None


register_autograd(f"{_lib}::gspmm_arg", _gspmm_arg_backward, setup_context=_gspmm_arg_setup)


# ---- g-SDDMM ---------------------------------------------------------------------------------------

def _sddmm_width(op, lhs, rhs):
    if op == "dot":
        return 1
    return (lhs if lhs is not None else rhs).shape[1]


def _gsddmm_impl(h: Tensor, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor],
                 lhs_target: str, rhs_target: str) -> Tensor:
    like = lhs if lhs is not None else rhs
    out = torch.empty((nnz_of(h), _sddmm_width(op, lhs, rhs)), dtype=like.dtype,
                      device=like.device)
    with on_device(like):
        C.gsddmm(_addr(h), op, arr(lhs), arr(rhs), arr(out), lhs_target, rhs_target,
                 stream_of(like), "")
    return out


_gsddmm_op = custom_op(f"{_lib}::gsddmm", _gsddmm_impl, mutates_args=())


@register_fake(f"{_lib}::gsddmm")
def _(h, op, lhs, rhs, lhs_target, rhs_target):
    like = lhs if lhs is not None else rhs
    return like.new_empty((nnz_of(h), _sddmm_width(op, lhs, rhs)))


def _gather_to_edges(h, x: Tensor, target: str) -> Tensor:
    """x's row for every edge ([nnz, F]) by target."""
    if target == "e":
        return x
    return gsddmm(h, "copy_lhs", x, None, target, "v")


def _reduce_from_edges(h, ge: Tensor, target: str, rows: int) -> Tensor:
    """The adjoint of _gather_to_edges: sums edge rows into their target's rows."""
    if target == "e":
        return ge
    if target == "v":
        return gspmm(h, "copy_e", "sum", None, ge.contiguous(), rows, "")
    ht = graph_variant(h, "transpose")
    return gspmm(ht, "copy_e", "sum", None, ge.index_select(0, _transpose_perm(ht, ge)), rows, "")


def _sddmm_side_grad(h, op, side, x, other, x_t, o_t, grad, out):
    """d loss / d x for one operand x (target x_t) of out = op(lhs, rhs); `other` is the other
    operand (target o_t); `side` is "lhs" or "rhs"."""
    rows = x.shape[0]
    # Fast paths: a gspmm over h or its transpose, with no [nnz, F] intermediate.
    if op in ("mul", "dot") and {x_t, o_t} == {"u", "v"}:
        if x_t == "v":
            return gspmm(h, "u_mul_e", "sum", other, grad, rows, "")
        ht = graph_variant(h, "transpose")
        return gspmm(ht, "u_mul_e", "sum", other, grad.index_select(0, _transpose_perm(ht, grad)),
                     rows, "")
    if op in ("add", "copy_lhs", "copy_rhs") or (op == "sub" and side == "lhs"):
        ge = grad
    elif op == "sub":
        ge = -grad
    elif op in ("mul", "dot"):
        ge = grad * _gather_to_edges(h, other, o_t)
    elif side == "lhs":  # div: d(l / r) / dl = 1 / r
        ge = grad / _gather_to_edges(h, other, o_t)
    else:  # div: d(l / r) / dr = -(l / r) / r = -out / r
        ge = -grad * out / _gather_to_edges(h, x, x_t)
    if ge.shape[1] != x.shape[1]:  # a [nnz, 1] gradient of a broadcast side
        ge = ge.expand(-1, x.shape[1])
    return _reduce_from_edges(h, ge.contiguous(), x_t, rows)


def _gsddmm_setup(ctx, inputs, output):
    h, op, lhs, rhs, lt, rt = inputs
    ctx.op, ctx.lt, ctx.rt = op, lt, rt
    ctx.save_for_backward(h, lhs, rhs, output if op == "div" else None)


def _gsddmm_backward(ctx, grad):
    h, lhs, rhs, out = ctx.saved_tensors
    grad = grad.contiguous()
    op = ctx.op
    gl = gr = None
    if ctx.needs_input_grad[2] and lhs is not None and op != "copy_rhs":
        gl = _sddmm_side_grad(h, op, "lhs", lhs, rhs, ctx.lt, ctx.rt, grad, out)
    if ctx.needs_input_grad[3] and rhs is not None and op != "copy_lhs":
        gr = _sddmm_side_grad(h, op, "rhs", rhs, lhs, ctx.rt, ctx.lt, grad, out)
    return None, None, gl, gr, None, None


register_autograd(f"{_lib}::gsddmm", _gsddmm_backward, setup_context=_gsddmm_setup)


# ---- attention -------------------------------------------------------------------------------------

def _edge_softmax_impl(h: Tensor, scores: Tensor) -> Tensor:
    out = torch.empty_like(scores)
    with on_device(scores):
        C.edge_softmax(_addr(h), arr(scores), arr(out), stream_of(scores))
    return out


_edge_softmax_op = custom_op(f"{_lib}::edge_softmax", _edge_softmax_impl, mutates_args=())


@register_fake(f"{_lib}::edge_softmax")
def _(h, scores):
    return torch.empty_like(scores)


def _edge_softmax_backward_impl(h: Tensor, out: Tensor, grad: Tensor) -> Tensor:
    gs = torch.empty_like(out)
    with on_device(out):
        C.edge_softmax_backward(_addr(h), arr(out), arr(grad), arr(gs), stream_of(out))
    return gs


_edge_softmax_backward_op = custom_op(f"{_lib}::edge_softmax_backward",
                                      _edge_softmax_backward_impl, mutates_args=())


@register_fake(f"{_lib}::edge_softmax_backward")
def _(h, out, grad):
    return torch.empty_like(out)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output)


def _softmax_backward(ctx, grad):
    h, out = ctx.saved_tensors
    return None, edge_softmax_backward(h, out, grad.contiguous())


register_autograd(f"{_lib}::edge_softmax", _softmax_backward, setup_context=_softmax_setup)


def _seed(seed: Tensor, x: Tensor) -> Tuple[int, Optional[Tensor]]:
    """(host seed, device seed) for a kernel on ``x``'s device. The seed is one int64 drawn from
    torch's generator by the caller (so torch.manual_seed repeats a run). On the GPU it is drawn
    on the device and the kernel reads it there as it runs: no host read, and a CUDA graph
    captured once draws a new mask on every replay (torch's generator is graph-safe), where a
    host value would be baked into the graph. The kernels take it as the unsigned hash seed."""
    if seed.is_cuda and x.is_cuda:
        if seed.device != x.device:
            raise ValueError(f"dropout seed on {seed.device}, input on {x.device}")
        return 0, seed.reshape(-1)[:1]
    return int(seed.reshape(-1)[0].item()) & 0xFFFFFFFFFFFFFFFF, None


def draw_seed(x: Tensor) -> Tensor:
    """A dropout seed for an op on ``x``: on x's GPU (see _seed), else on the host."""
    return torch.randint(0, 2**62, (1,), dtype=torch.int64,
                         device=x.device if x.is_cuda else "cpu")


def _gat_half_heads(feat: Tensor, heads: int) -> bool:
    """Whether the fused GPU kernels read feat's half rows themselves: heads of F % 4 == 0."""
    return heads > 0 and feat.shape[1] % heads == 0 and (feat.shape[1] // heads) % 4 == 0


def _gat_kept(feat: Tensor, heads: int, strategy: str, sums: bool) -> Tuple[bool, bool, bool]:
    """What the forward returns beside (out, attn) for the fused GPU backward: (the float32 out,
    the rows' softmax state, their negative-logit sums). Half rows that the fused kernels take
    themselves (F % 4 == 0, the gat_fused strategy, which "" and auto are on the GPU) keep the
    float32 out and the state: their backward recomputes the weights in float32. With ``sums``
    (the caller will differentiate), fused rows of either dtype keep the state and the sums:
    the backward then walks the edges once, by source (GatParams::negative_logit_sums), for
    one [N_dst, H*F] float32 tensor more until it runs. Shapes only, so the fake agrees;
    alignment is made sure of in the implementation."""
    fused = feat.is_cuda and strategy.split(":")[0] in ("", "auto", "gat_fused")
    half = fused and feat.dtype in (torch.float16, torch.bfloat16) and _gat_half_heads(feat, heads)
    walk = sums and (half or (fused and feat.dtype == torch.float32))
    return half, half or walk, walk


def gat_will_differentiate(*inputs: Tensor) -> bool:
    """gat_aggregate's ``sums``: whether autograd will record the call (so its backward may run).
    An evaluation forward (torch.no_grad, or no input requiring grad) then skips the sums' cost
    (1-11% of the fused forward, H200) and memory."""
    return torch.is_grad_enabled() and any(t.requires_grad for t in inputs)


def _gat_aggregate_impl(h: Tensor, feat: Tensor, el: Tensor, er: Tensor, heads: int,
                        negative_slope: float, dropout: float, seed: Tensor, n_rows: int,
                        strategy: str, sums: bool = False
                        ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(out, attn, out32, state, neg): the float32 out, the softmax state and the negative-logit
    sums where _gat_kept, else empty (the autograd saves them; callers take the first two).
    ``sums``: whether the caller will differentiate (only then are the sums worth their cost)."""
    k32, kstate, kneg = _gat_kept(feat, heads, strategy, sums)
    out = torch.empty((n_rows, feat.shape[1]), dtype=torch.float32 if k32 else feat.dtype,
                      device=feat.device)
    attn = torch.empty((nnz_of(h), heads), dtype=feat.dtype, device=feat.device)
    state = torch.empty((n_rows, heads, 2) if kstate else (0,), dtype=torch.float32,
                        device=feat.device)
    neg = torch.empty((n_rows, feat.shape[1]) if kneg else (0,), dtype=torch.float32,
                      device=feat.device)
    if k32 and feat.data_ptr() % 16:
        feat = feat.clone()  # (the half kernels' vector loads; a view can start anywhere)
    host_seed, dev_seed = _seed(seed, feat)
    with on_device(feat):
        wrote = C.gat_aggregate(_addr(h), arr(feat), arr(el), arr(er), heads, negative_slope,
                                dropout, host_seed, arr(out), arr(attn), stream_of(feat),
                                strategy, None if dev_seed is None else arr(dev_seed),
                                arr(state) if kstate else None, arr(neg) if kneg else None)
    if tuple(wrote) != (kstate, kneg):
        raise RuntimeError("spgnn internal error: gat_aggregate's fused kernels wrote (softmax "
                           f"state, negative-logit sums) {tuple(wrote)}, expected "
                           f"{(kstate, kneg)}")
    if not k32:
        return out, attn, out.new_empty((0,), dtype=torch.float32), state, neg
    return out.to(feat.dtype), attn, out, state, neg


_gat_aggregate_op = custom_op(f"{_lib}::gat_aggregate", _gat_aggregate_impl, mutates_args=())


@register_fake(f"{_lib}::gat_aggregate")
def _(h, feat, el, er, heads, negative_slope, dropout, seed, n_rows, strategy, sums=False):
    k32, kstate, kneg = _gat_kept(feat, heads, strategy, sums)
    f32 = torch.float32
    return (feat.new_empty((n_rows, feat.shape[1])), feat.new_empty((nnz_of(h), heads)),
            feat.new_empty((n_rows, feat.shape[1]) if k32 else (0,), dtype=f32),
            feat.new_empty((n_rows, heads, 2) if kstate else (0,), dtype=f32),
            feat.new_empty((n_rows, feat.shape[1]) if kneg else (0,), dtype=f32))


def _gat_grads(feat: Tensor, el: Tensor, er: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """The backward's outputs. Half rows with float32 el / er (autocast's way) take every gradient
    in float32, unrounded (the core's rule: all three float32, or all the rows' dtype); autograd
    rounds feat's to its dtype."""
    if feat.dtype != el.dtype or feat.dtype != er.dtype:
        return (torch.empty(feat.shape, dtype=torch.float32, device=feat.device),
                torch.empty(el.shape, dtype=torch.float32, device=el.device),
                torch.empty(er.shape, dtype=torch.float32, device=er.device))
    return torch.empty_like(feat), torch.empty_like(el), torch.empty_like(er)


def _gat_aggregate_backward_impl(h: Tensor, feat: Tensor, el: Tensor, er: Tensor, attn: Tensor,
                                 grad: Tensor, heads: int, negative_slope: float, dropout: float,
                                 seed: Tensor, strategy: str, out: Optional[Tensor] = None,
                                 state: Optional[Tensor] = None, neg: Optional[Tensor] = None
                                 ) -> Tuple[Tensor, Tensor, Tensor]:
    """``out``: the forward's output for these inputs, unmodified (half rows: its float32 out),
    or None; ``state`` and ``neg``: the rows' softmax state and negative-logit sums it wrote, or
    None. The fused GPU backward given out takes each row's sum_e a_e d_a_e as grad[v]·out[v]
    and walks each row's edges once (half rows need the state too); given all three it walks
    the edges once, by source (the core's GatParams::forward_out, softmax_state and
    negative_logit_sums)."""
    gf, gl, gr = _gat_grads(feat, el, er)
    if feat.is_cuda and C.graph_info(_addr(h))["device_built"]:
        # The backward walks the transpose: give it the one built on the GPU (the core would
        # build it through the host, for every new graph; a mini-batch GAT step paid 13 ms).
        ht = _derive(h, "transpose")  # held: its handle's memory must outlive the call
        C.provide_attention_transpose(_addr(h), _addr(ht))
    host_seed, dev_seed = _seed(seed, feat)
    with on_device(feat):
        C.gat_aggregate_backward(_addr(h), arr(feat), arr(el), arr(er), arr(attn), arr(grad),
                                 heads, negative_slope, dropout, host_seed, arr(gf), arr(gl),
                                 arr(gr), stream_of(feat), strategy,
                                 None if dev_seed is None else arr(dev_seed),
                                 None if out is None else arr(out),
                                 None if state is None else arr(state),
                                 None if neg is None else arr(neg))
    return gf, gl, gr


_gat_aggregate_backward_op = custom_op(f"{_lib}::gat_aggregate_backward",
                                       _gat_aggregate_backward_impl, mutates_args=())


@register_fake(f"{_lib}::gat_aggregate_backward")
def _(h, feat, el, er, attn, grad, heads, negative_slope, dropout, seed, strategy, out=None,
      state=None, neg=None):
    return _gat_grads(feat, el, er)


def _gat_setup(ctx, inputs, output):
    h, feat, el, er, heads, slope, dropout, seed, n_rows, strategy, *rest = inputs
    ctx.heads, ctx.slope, ctx.dropout, ctx.strategy = heads, slope, dropout, strategy
    ctx.n_inputs = len(inputs)  # (the eager front passes ``sums`` only where the caller did)
    # The GPU backward reads the forward's out: in float32 the output itself (as torch.softmax's
    # does; modifying it in place then makes autograd raise), for half rows the float32 out;
    # and the softmax state and negative-logit sums where the forward kept them (_gat_kept).
    # The CPU reads none of them, and keeps nothing more.
    k32, kstate, kneg = _gat_kept(feat, heads, strategy, bool(rest and rest[0]))
    out = output[2] if k32 else output[0] if feat.is_cuda and feat.dtype == torch.float32 else None
    kept = [] if out is None else [out]
    if out is not None and kstate:
        kept.append(output[3])
        if kneg:
            kept.append(output[4])
    ctx.save_for_backward(h, feat, el, er, output[1], seed, *kept)
    ctx.mark_non_differentiable(output[1], output[2], output[3], output[4])


def _gat_backward(ctx, grad, _grad_attn, _grad_out32, _grad_state, _grad_neg):
    h, feat, el, er, attn, seed, *kept = ctx.saved_tensors
    kept += [None] * (3 - len(kept))
    gf, gl, gr = gat_aggregate_backward(h, feat, el, er, attn, grad.contiguous(), ctx.heads,
                                        ctx.slope, ctx.dropout, seed, ctx.strategy, *kept)
    return (None, gf, gl, gr) + (None,) * (ctx.n_inputs - 4)


register_autograd(f"{_lib}::gat_aggregate", _gat_backward, setup_context=_gat_setup)


# ---- MaxK and CBSR ---------------------------------------------------------------------------------

def cbsr_index_dtype(F: int):
    return torch.uint8 if F <= 256 else torch.uint16


def _maxk_impl(x: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    data = torch.empty((x.shape[0], k), dtype=x.dtype, device=x.device)
    index = torch.empty((x.shape[0], k), dtype=cbsr_index_dtype(x.shape[1]), device=x.device)
    with on_device(x):
        C.maxk(arr(x), k, arr(data), arr(index), stream_of(x))
    return data, index


_maxk_op = custom_op(f"{_lib}::maxk", _maxk_impl, mutates_args=())


@register_fake(f"{_lib}::maxk")
def _(x, k):
    return (x.new_empty((x.shape[0], k)),
            x.new_empty((x.shape[0], k), dtype=cbsr_index_dtype(x.shape[1])))


def _cbsr_to_dense_impl(data: Tensor, index: Tensor, F: int) -> Tensor:
    """The dense [n, F] matrix of a CBSR pair: data at its columns, zeros elsewhere."""
    out = torch.empty((data.shape[0], F), dtype=data.dtype, device=data.device)
    with on_device(data):
        C.maxk_backward(arr(data), arr(index), F, arr(data), arr(out), stream_of(data))
    return out


_cbsr_to_dense_op = custom_op(f"{_lib}::cbsr_to_dense", _cbsr_to_dense_impl, mutates_args=())


@register_fake(f"{_lib}::cbsr_to_dense")
def _(data, index, F):
    return data.new_empty((data.shape[0], F))


def _cbsr_gather_impl(dense: Tensor, data: Tensor, index: Tensor) -> Tensor:
    """dense sampled at a CBSR pattern: out[i, j] = dense[i, index[i, j]] (the adjoint of
    cbsr_to_dense), as cbsr_sspmm over the identity graph."""
    from .graph import identity_handle
    out = torch.empty_like(data)
    with on_device(dense):
        C.cbsr_sspmm(_addr(identity_handle(dense.shape[0], dense.device)), None, arr(dense),
                     arr(data), arr(index), dense.shape[1], arr(out), stream_of(dense))
    return out


_cbsr_gather_op = custom_op(f"{_lib}::cbsr_gather", _cbsr_gather_impl, mutates_args=())


@register_fake(f"{_lib}::cbsr_gather")
def _(dense, data, index):
    return torch.empty_like(data)


def _maxk_setup(ctx, inputs, output):
    ctx.F = inputs[0].shape[1]
    ctx.save_for_backward(*output)
    ctx.mark_non_differentiable(output[1])


def _maxk_backward(ctx, grad_data, _grad_index):
    data, index = ctx.saved_tensors
    return cbsr_to_dense(grad_data.contiguous(), index, ctx.F), None


register_autograd(f"{_lib}::maxk", _maxk_backward, setup_context=_maxk_setup)


def _dense_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _dense_backward(ctx, grad):
    data, index = ctx.saved_tensors
    return cbsr_gather(grad.contiguous(), data, index), None, None


register_autograd(f"{_lib}::cbsr_to_dense", _dense_backward, setup_context=_dense_setup)


def _gather_setup(ctx, inputs, output):
    ctx.F = inputs[0].shape[1]
    ctx.save_for_backward(inputs[1], inputs[2])


def _gather_backward(ctx, grad):
    data, index = ctx.saved_tensors
    return cbsr_to_dense(grad.contiguous(), index, ctx.F), None, None


register_autograd(f"{_lib}::cbsr_gather", _gather_backward, setup_context=_gather_setup)


def _cbsr_spgemm_impl(h: Tensor, data: Tensor, index: Tensor, F: int, e: Optional[Tensor],
                      n_rows: int) -> Tensor:
    out = torch.empty((n_rows, F), dtype=data.dtype, device=data.device)
    with on_device(data):
        C.cbsr_spgemm(_addr(h), arr(data), arr(index), F, arr(e), arr(out), stream_of(data))
    return out


_cbsr_spgemm_op = custom_op(f"{_lib}::cbsr_spgemm", _cbsr_spgemm_impl, mutates_args=())


@register_fake(f"{_lib}::cbsr_spgemm")
def _(h, data, index, F, e, n_rows):
    return data.new_empty((n_rows, F))


def _cbsr_sspmm_impl(h: Tensor, e: Optional[Tensor], d_out: Tensor, data: Tensor,
                     index: Tensor) -> Tensor:
    out = torch.empty_like(data)
    with on_device(d_out):
        C.cbsr_sspmm(_addr(h), arr(e), arr(d_out), arr(data), arr(index), d_out.shape[1],
                     arr(out),
                     stream_of(d_out))
    return out


_cbsr_sspmm_op = custom_op(f"{_lib}::cbsr_sspmm", _cbsr_sspmm_impl, mutates_args=())


@register_fake(f"{_lib}::cbsr_sspmm")
def _(h, e, d_out, data, index):
    return torch.empty_like(data)


def _spgemm_setup(ctx, inputs, output):
    h, data, index, F, e, n_rows = inputs
    ctx.F = F
    ctx.save_for_backward(h, data, index, e)


def _spgemm_backward(ctx, grad):
    h, data, index, e = ctx.saved_tensors
    grad = grad.contiguous()
    gd = ge = None
    if ctx.needs_input_grad[1]:
        gd = cbsr_sspmm(h, e, grad, data, index)
    if ctx.needs_input_grad[4] and e is not None:
        dense = cbsr_to_dense(data, index, ctx.F)
        ge = gsddmm(h, "dot", dense, grad, "u", "v").reshape(e.shape)
    return None, gd, None, None, ge, None


register_autograd(f"{_lib}::cbsr_spgemm", _spgemm_backward, setup_context=_spgemm_setup)


def _sspmm_setup(ctx, inputs, output):
    h, e, d_out, data, index = inputs
    ctx.n_rows = d_out.shape[0]
    ctx.save_for_backward(h, e, d_out, data, index)


def _sspmm_backward(ctx, grad):
    h, e, d_out, data, index = ctx.saved_tensors
    grad = grad.contiguous()
    g_out = ge = None
    if ctx.needs_input_grad[2]:
        g_out = cbsr_spgemm(h, grad, index, d_out.shape[1], e, ctx.n_rows)
    if ctx.needs_input_grad[1] and e is not None:
        dense = cbsr_to_dense(grad, index, d_out.shape[1])
        ge = gsddmm(h, "dot", dense, d_out, "u", "v").reshape(e.shape)
    return None, ge, g_out, None, None


register_autograd(f"{_lib}::cbsr_sspmm", _sspmm_backward, setup_context=_sspmm_setup)


# ---- dropout ---------------------------------------------------------------------------------------

def _dropout_impl(x: Tensor, p: float, seed: Tensor) -> Tensor:
    out = torch.empty_like(x)
    host_seed, dev_seed = _seed(seed, x)
    with on_device(x):
        C.dropout(arr(x), p, host_seed, arr(out), stream_of(x),
                  None if dev_seed is None else arr(dev_seed))
    return out


_dropout_op = custom_op(f"{_lib}::dropout", _dropout_impl, mutates_args=())


@register_fake(f"{_lib}::dropout")
def _(x, p, seed):
    return torch.empty_like(x)


def _dropout_setup(ctx, inputs, output):
    ctx.p = inputs[1]
    ctx.save_for_backward(inputs[2])


def _dropout_backward(ctx, grad):
    # The mask is a hash of (seed, element index): the gradient goes through the same mask and
    # scale, which is this op applied to it (itself differentiable, so double backward works).
    seed, = ctx.saved_tensors
    return dropout(grad.contiguous(), ctx.p, seed), None, None


register_autograd(f"{_lib}::dropout", _dropout_backward, setup_context=_dropout_setup)


# ---- autocast --------------------------------------------------------------------------------------
# Inside torch.autocast, an op's float operands (float64 excepted, as autocast leaves it) are cast
# to one dtype before it runs, so that a layer may mix an autocast GEMM's half output with float32
# parameters or graph weights: the autocast dtype on the CPU (float16/bfloat16 run there in
# float32 with one rounding per result); on the GPU the autocast dtype for the ops with half
# kernels (gspmm, gsddmm, and the GAT aggregation where each head's width is a multiple of 4:
# the fused kernels' half path), float32 for the others, and for g-SpMMs float32 unless
# C.half_spmm_width_pays(width) (multiples of 8 from 64 to 256, then multiples of 64): elsewhere
# the GPU's half SpMM is slower than float32 on R-MAT graphs (0.86-0.92x at F = 40-56, H200),
# and on the Reddit shape at widths off 8 (0.6-0.7x at F = 68 / 100; docs/STRATEGIES.md).
# Only the width decides (not the graph's degrees, as `spgnn train` does): torch.compile runs
# this on fake tensors, and eager and compiled code must pick the same dtype.
# The dtype is read at each call, so one registration serves bfloat16 and float16 regions.

_AUTOCAST_OPS = ("gspmm", "gspmm_arg", "gsddmm", "edge_softmax",
                 "edge_softmax_backward", "gat_aggregate", "gat_aggregate_backward", "maxk",
                 "cbsr_to_dense", "cbsr_gather", "cbsr_spgemm", "cbsr_sspmm")
_GPU_HALF_OPS = ("gspmm", "gspmm_arg", "gsddmm", "gat_aggregate", "gat_aggregate_backward")
_autocast_lib = torch.library.Library(_lib, "IMPL")


def _cast_floats(value, device_type: str, dtype):
    if isinstance(value, Tensor):
        if (value.is_floating_point() and value.device.type == device_type
                and value.dtype != torch.float64):
            return value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floats(v, device_type, dtype) for v in value)
    return value


def _gpu_half_pays(name: str, args) -> bool:
    """On the GPU, whether the op's half kernel is worth its rounding (see above)."""
    if name in ("gspmm", "gspmm_arg"):
        _h, op, _reduce, u, e = args[:5]
        width = _spmm_width(op, u, e)
        return C.half_spmm_width_pays(int(width))
    if name in ("gat_aggregate", "gat_aggregate_backward"):
        # The fused kernels read half rows of F % 4 == 0 themselves (forward ~1.0-1.2x, backward
        # 1.1-1.45x float32's on the Reddit shape and R-MAT 21, H200); other widths would
        # only add two conversions.
        return _gat_half_heads(args[1], args[4] if name == "gat_aggregate" else args[6])
    return True


# GAT's el and er (arguments 2 and 3) stay float32 under autocast: a logit is their sum, which
# half ones would move by up to |s| * 2^-9 on every edge of their vertex; the kernels read them
# as float32 either way (they are [N, H]), and the forward is faster with them (H200).
_FLOAT32_ARGS = {"gat_aggregate": (2, 3), "gat_aggregate_backward": (2, 3)}


def _autocast_kernel(op, name: str, device_type: str, gpu_half_kernels: bool):
    keep = _FLOAT32_ARGS.get(name, ())

    def kernel(_keyset, *args):
        half = device_type == "cpu" or (gpu_half_kernels and _gpu_half_pays(name, args))
        dtype = torch.get_autocast_dtype(device_type) if half else torch.float32
        with torch.autocast(device_type, enabled=False):
            return op(*(_cast_floats(a, device_type, torch.float32 if i in keep else dtype)
                        for i, a in enumerate(args)))
    return kernel


for _name in _AUTOCAST_OPS:
    _op = getattr(torch.ops.spgnn, _name).default
    for _dev, _key in (("cpu", "AutocastCPU"), ("cuda", "AutocastCUDA")):
        _autocast_lib.impl(_name, _autocast_kernel(_op, _name, _dev, _name in _GPU_HALF_OPS),
                           _key, with_keyset=True)
del _name, _op, _dev, _key


# ---- eager fronts ---------------------------------------------------------------------------------
# The names above (gspmm, gsddmm, ...) are what the rest of the package calls. Outside
# torch.compile, autocast and torch.func transforms, on plain tensors, they skip the dispatcher's
# custom-op machinery (schema parsing, the autograd wrapper's redispatch: ~25 us of host time per
# call, measured on the CPU) and run the same implementation directly, under a
# torch.autograd.Function with the same setup_context/backward when a gradient is needed. A small
# graph's training step is host-bound (a Cora epoch on a GPU is a few milliseconds of Python),
# and a step whose loss syncs on a boolean mask leaves the GPU idle while the host runs; the
# custom ops stay what torch.compile traces.

_PLAIN = (Tensor, torch.nn.Parameter)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def _direct(args) -> bool:
    if torch.compiler.is_compiling() or _functorch_active():
        return False
    for a in args:
        if isinstance(a, Tensor) and type(a) not in _PLAIN:
            return False
    return not (torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"))


def _front(name, op_def, impl, setup=None, backward=None):
    fn = None
    if backward is not None:
        def forward(ctx, *args):
            out = impl(*args)
            setup(ctx, args, out)
            return out
        fn = type(f"_{name}_eager", (torch.autograd.Function,),
                  {"forward": staticmethod(forward), "backward": staticmethod(backward)})

    def call(*args):
        if not _direct(args):
            return op_def(*args)
        if fn is not None and torch.is_grad_enabled() and any(
                isinstance(a, Tensor) and a.requires_grad for a in args):
            return fn.apply(*args)
        return impl(*args)
    call.__name__ = name
    call.__doc__ = impl.__doc__
    return call


graph_tensor = _front("graph_tensor", _graph_tensor_op, _graph_tensor_impl)
gspmm = _front("gspmm", _gspmm_op, _gspmm_impl, _gspmm_setup, _gspmm_backward)
gspmm_arg = _front("gspmm_arg", _gspmm_arg_op, _gspmm_arg_impl, _gspmm_arg_setup,
                   _gspmm_arg_backward)
gsddmm = _front("gsddmm", _gsddmm_op, _gsddmm_impl, _gsddmm_setup, _gsddmm_backward)
edge_softmax = _front("edge_softmax", _edge_softmax_op, _edge_softmax_impl, _softmax_setup,
                      _softmax_backward)
edge_softmax_backward = _front("edge_softmax_backward", _edge_softmax_backward_op,
                               _edge_softmax_backward_impl)
gat_aggregate = _front("gat_aggregate", _gat_aggregate_op, _gat_aggregate_impl, _gat_setup,
                       _gat_backward)
gat_aggregate_backward = _front("gat_aggregate_backward", _gat_aggregate_backward_op,
                                _gat_aggregate_backward_impl)
maxk = _front("maxk", _maxk_op, _maxk_impl, _maxk_setup, _maxk_backward)
cbsr_to_dense = _front("cbsr_to_dense", _cbsr_to_dense_op, _cbsr_to_dense_impl, _dense_setup,
                       _dense_backward)
cbsr_gather = _front("cbsr_gather", _cbsr_gather_op, _cbsr_gather_impl, _gather_setup,
                     _gather_backward)
cbsr_spgemm = _front("cbsr_spgemm", _cbsr_spgemm_op, _cbsr_spgemm_impl, _spgemm_setup,
                     _spgemm_backward)
cbsr_sspmm = _front("cbsr_sspmm", _cbsr_sspmm_op, _cbsr_sspmm_impl, _sspmm_setup,
                    _sspmm_backward)
dropout = _front("dropout", _dropout_op, _dropout_impl, _dropout_setup, _dropout_backward)
