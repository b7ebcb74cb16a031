"""Every op of spgnn.ops, forward and backward, against a pure-torch float64 reference on fresh
random graphs of every awkward shape (skewed degrees, empty rows, self loops and parallel
edges, one node, no edges, already-sorted input), widths that are not multiples of 4, on the
CPU and (when there is one) the GPU; torch.autograd.gradcheck in float64 on the CPU."""
import warnings

import pytest
import torch

import spgnn
from spgnn import ops

from conftest import (DEVICES, GRAPH_KINDS, make_edge_index, randn, ref_edge_softmax,
                      ref_gsddmm, ref_gspmm, ref_selected_sum, rel_err)

WIDTHS = [1, 3, 5, 33]
# float32 against float64: a sum of d terms of relative rounding 2^-24 each stays within
# ~d * 6e-8 of the exact value; rows here have at most a few hundred terms, and errors are
# measured as a norm over all outputs (they average out), so 1e-5 leaves a margin of >10x.
TOL = 1e-5
# Backward passes chain two such sums (and a gather), hence twice the bound. A gradient that
# is a sum of terms of both signs can cancel far below the size of its terms, and float32 keeps
# only the terms' precision: such errors are measured against the same gradient computed from
# the absolute values of every input and of the upstream gradient (the sum of |terms|).
GRAD_TOL = 2e-5


def _abs_grads(ref_fn, leaves, up):
    leaves = [t.detach().abs().double().requires_grad_() for t in leaves]
    return torch.autograd.grad(ref_fn(*leaves), leaves, up.detach().abs().double())


def _positive(gen, *shape, device):
    # edge operands of u_div_e stay away from 0 so that the quotients are well conditioned
    return (0.5 + torch.rand(*shape, generator=gen)).to(device)


def _tie_free(gen, shape, device, positive=False):
    """float32 values distinct within every column (a random permutation of evenly spaced bins,
    each value inside its bin), in [0.5, 1.5) when positive, else in [-2, 2). For max/min: where
    two messages tie, torch's reference splits the gradient between them and spgnn gives it to
    one edge; float32 randn tied on about one seed in 3,000 of this file's gspmm test (seed 1746,
    sorted_by_dst, copy_e min, F = 33: two edges of row 6 at -1.1073825)."""
    rows = shape[0]
    cols = 1
    for d in shape[1:]:
        cols *= d
    perm = torch.stack([torch.randperm(rows, generator=gen) for _ in range(cols)], 1).double()
    v = (perm + 0.1 + 0.8 * torch.rand(rows, cols, generator=gen, dtype=torch.float64)) / rows
    v = 0.5 + v if positive else 4.0 * v - 2.0
    return v.reshape(shape).float().to(device)


def _edge_data(gen, op, E, F, shape, device, tie_free=False):
    if shape == "scalar":
        s = (E,)
    elif shape == "col":
        s = (E, 1)
    else:
        s = (E, F)
    if tie_free:
        return _tie_free(gen, s, device, positive=op == "u_div_e")
    return _positive(gen, *s, device=device) if op == "u_div_e" else randn(gen, *s, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", GRAPH_KINDS)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("op", ["copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e"])
def test_gspmm_forward_and_grad(gen, device, kind, reduce, op):
    ei, n = make_edge_index(kind, gen)
    E = ei.shape[1]
    ei = ei.to(device)
    g = spgnn.Graph(ei, n)
    for F in WIDTHS:
        for eshape in (["full"] if op == "copy_e" else ["scalar", "col", "full"]):
            ties = reduce in ("max", "min")  # their inputs are drawn tie-free (_tie_free)
            u = None if op == "copy_e" else (_tie_free(gen, (n, F), device) if ties else
                                             randn(gen, n, F, device=device)).requires_grad_()
            e = None if op == "copy_u" else _edge_data(gen, op, E, F, eshape, device, ties)
            if e is not None:
                e.requires_grad_()
            out = ops.gspmm(g, op, reduce, u, e)
            ref = ref_gspmm(ei, n, op, reduce, u, e)
            assert out.shape == ref.shape
            assert out.device.type == device
            # a sum of terms of both signs is measured against the sum of their magnitudes
            scale = (ref_gspmm(ei, n, op.replace("sub", "add"), reduce,
                               *(None if t is None else t.detach().abs() for t in (u, e)))
                     if reduce in ("sum", "mean") else None)
            assert rel_err(out, ref, scale) < TOL, (kind, op, reduce, F, eshape)
            if E == 0:
                continue
            up = randn(gen, *out.shape, device=device)
            leaves = [t for t in (u, e) if t is not None]
            got = torch.autograd.grad(out, leaves, up)
            want = torch.autograd.grad(ref, leaves, up.double())

            if reduce in ("sum", "mean"):
                sum_fn = lambda uu, ee: ref_gspmm(ei, n, op, reduce, uu, ee)  # noqa: E731
            else:
                sum_fn = ref_selected_sum(ei, n, op, reduce, u, e)

            def ref_fn(*ts):
                it = iter(ts)
                uu = next(it) if u is not None else None
                ee = next(it) if e is not None else None
                return sum_fn(uu, ee)
            scales = _abs_grads(ref_fn, leaves, up)
            for a, b, sc, name in zip(got, want, scales, ["u", "e"] if u is not None else ["e"]):
                assert a.shape == b.shape
                assert rel_err(a, b, sc) < GRAD_TOL, (kind, op, reduce, F, eshape, "grad " + name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_gspmm_max_min_propagate_nan_like_torch(gen, device, reduce):
    """NaN wins a max/min as in torch.scatter_reduce (and so PyG's max aggregation): a plain
    comparison would drop it and hide a diverging model. Infinities are ordinary values; each
    output's gradient goes to one message, also where that message is NaN or infinite."""
    ei, n = make_edge_index("skewed", gen)
    ei = ei.to(device)
    g = spgnn.Graph(ei, n)
    F = 5
    u = randn(gen, n, F, device=device)
    flat = u.view(-1)
    flat[3::7] = float("nan")
    flat[1::5] = float("-inf")
    flat[4::11] = float("inf")
    u.requires_grad_()
    out = ops.gspmm(g, "copy_u", reduce, u)
    src, dst = ei
    ref = torch.zeros(n, F, device=device).scatter_reduce(
        0, dst[:, None].expand(-1, F), u.detach()[src], "a" + reduce, include_self=False)
    torch.testing.assert_close(out, ref, equal_nan=True, rtol=0, atol=0)
    assert out.isnan().any() and (out == float("-inf")).any()
    up = randn(gen, n, F, device=device)
    (grad,) = torch.autograd.grad(out, u, up)
    has_edges = torch.zeros(n, dtype=torch.bool, device=device)
    has_edges[dst] = True
    torch.testing.assert_close(grad.sum(0), up[has_edges].sum(0), rtol=1e-5, atol=1e-5)


SDDMM_CASES = [(op, lt, rt) for op in ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
               for lt in ("u", "v", "e") for rt in ("u", "v", "e")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", GRAPH_KINDS)
@pytest.mark.parametrize("op,lt,rt", SDDMM_CASES)
def test_gsddmm_forward_and_grad(gen, device, kind, op, lt, rt):
    ei, n = make_edge_index(kind, gen)
    E = ei.shape[1]
    ei = ei.to(device)
    g = spgnn.Graph(ei, n)
    rows = {"u": n, "v": n, "e": E}
    for F in (1, 3, 33):
        lhs = randn(gen, rows[lt], F, device=device).requires_grad_()
        rhs = (_positive(gen, rows[rt], F, device=device) if op == "div"
               else randn(gen, rows[rt], F, device=device)).requires_grad_()
        out = ops.gsddmm(g, op, lhs, rhs, lt, rt)
        ref = ref_gsddmm(ei, op, lhs, rhs, lt, rt)
        assert out.shape == ref.shape
        assert rel_err(out, ref) < TOL, (kind, op, lt, rt, F)
        if E == 0:
            continue
        up = randn(gen, *out.shape, device=device)
        uses = [op != "copy_rhs", op != "copy_lhs"]
        used = [t for t, u in zip((lhs, rhs), uses) if u]
        got = torch.autograd.grad(out, used, up)
        want = torch.autograd.grad(ref, used, up.double())

        def ref_fn(*ts):
            it = iter(ts)
            a = next(it) if uses[0] else None
            b = next(it) if uses[1] else None
            return ref_gsddmm(ei, op, a, b, lt, rt)
        for a, b, sc in zip(got, want, _abs_grads(ref_fn, used, up)):
            assert rel_err(a, b, sc) < GRAD_TOL, (kind, op, lt, rt, F)


def test_dgl_names_and_shortcuts(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x, w = randn(gen, n, 4), randn(gen, ei.shape[1])
    a = ops.gspmm(g, "mul", "sum", x, w)          # DGL's op name
    b = ops.u_mul_e_sum(g, x, w)                  # DGL's shortcut
    c = ops.gspmm(g, "u_mul_e", "sum", x, w)
    assert torch.equal(a, b) and torch.equal(b, c)
    assert torch.equal(ops.copy_u_mean(g, x), ops.gspmm(g, "copy_lhs", "mean", x, None))
    assert torch.equal(ops.copy_e_max(g, w.unsqueeze(1)), ops.gspmm(g, "copy_rhs", "max", None,
                                                                    w.unsqueeze(1)))
    assert torch.equal(ops.u_dot_v(g, x, x), ops.gsddmm(g, "dot", x, x, "u", "v"))
    assert torch.equal(ops.e_mul_v(g, randn(gen, ei.shape[1], 4).abs(), x).abs() >= 0,
                       torch.ones(ei.shape[1], 4, dtype=torch.bool))
    assert torch.equal(ops.copy_u(g, x), x[ei[0]])
    assert torch.equal(ops.copy_v(g, x), x[ei[1]])


def test_multidim_features_flatten_and_restore(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 2, 3)
    w = randn(gen, ei.shape[1], 2, 3)
    out = ops.u_mul_e_sum(g, x, w)
    assert out.shape == (n, 2, 3)
    ref = ref_gspmm(ei, n, "u_mul_e", "sum", x.reshape(n, 6), w.reshape(-1, 6)).reshape(n, 2, 3)
    assert rel_err(out, ref) < TOL
    w1 = randn(gen, ei.shape[1], 1, 1)  # one weight per edge, broadcast
    assert ops.u_mul_e_sum(g, x, w1).shape == (n, 2, 3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", GRAPH_KINDS)
@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_edge_softmax(gen, device, kind, norm_by):
    ei, n = make_edge_index(kind, gen)
    E = ei.shape[1]
    ei = ei.to(device)
    g = spgnn.Graph(ei, n)
    for shape in ((E,), (E, 1), (E, 3)):
        s = (3 * randn(gen, *shape, device=device)).requires_grad_()
        out = ops.edge_softmax(g, s, norm_by=norm_by)
        ref_ei = ei if norm_by == "dst" else ei.flip(0)
        ref = ref_edge_softmax(ref_ei, n, s)
        assert out.shape == s.shape
        assert rel_err(out, ref) < TOL
        if E:
            up = randn(gen, *shape, device=device)
            a, = torch.autograd.grad(out, s, up)
            b, = torch.autograd.grad(ref, s, up.double())
            # grad = a * (up - sum(a * up)) cancels where a row's up values agree
            assert rel_err(a, b, scale=up) < GRAD_TOL


def ref_gat(ei, n, feat, el, er, slope):
    H = el.shape[1]
    f = feat.double().reshape(feat.shape[0], H, -1)
    s = torch.nn.functional.leaky_relu(el.double()[ei[0]] + er.double()[ei[1]], slope)
    a = ref_edge_softmax(ei, n, s)
    out = torch.zeros(n, H, f.shape[2], dtype=torch.float64, device=feat.device)
    out = out.index_add(0, ei[1], a.unsqueeze(2) * f[ei[0]])
    return out, a


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", GRAPH_KINDS)
@pytest.mark.parametrize("heads,F", [(1, 5), (2, 4), (3, 1)])
def test_gat_aggregate(gen, device, kind, heads, F):
    ei, n = make_edge_index(kind, gen)
    ei = ei.to(device)
    g = spgnn.Graph(ei, n)
    feat = randn(gen, n, heads, F, device=device).requires_grad_()
    el = randn(gen, n, heads, device=device).requires_grad_()
    er = randn(gen, n, heads, device=device).requires_grad_()
    out, attn = ops.gat_aggregate(g, feat, el, er, 0.2)
    ref, ref_attn = ref_gat(ei, n, feat, el, er, 0.2)
    assert out.shape == (n, heads, F) and attn.shape == (ei.shape[1], heads)
    assert rel_err(out, ref) < TOL
    assert rel_err(attn, ref_attn) < TOL
    if ei.shape[1]:
        up = randn(gen, n, heads, F, device=device)
        got = torch.autograd.grad(out, (feat, el, er), up)
        want = torch.autograd.grad(ref, (feat, el, er), up.double())
        # the logit gradients are softmax gradients: they cancel to the size of |a * up . feat|
        scale = (up.double().abs() * feat.detach().double().abs().mean()).norm()
        for a, b in zip(got, want):
            assert rel_err(a, b, scale) < GRAD_TOL


@pytest.mark.parametrize("device", DEVICES)
def test_gat_dropout_is_seeded_by_torch(gen, device):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei.to(device), n)
    feat, el, er = (randn(gen, n, 4, device=device), randn(gen, n, 1, device=device),
                    randn(gen, n, 1, device=device))
    torch.manual_seed(5)
    a, _ = ops.gat_aggregate(g, feat, el, er, attn_dropout=0.5)
    torch.manual_seed(5)
    b, _ = ops.gat_aggregate(g, feat, el, er, attn_dropout=0.5)
    c, _ = ops.gat_aggregate(g, feat, el, er, attn_dropout=0.5)
    full, _ = ops.gat_aggregate(g, feat, el, er, attn_dropout=0.5, training=False)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert not torch.equal(a, full)


@pytest.mark.parametrize("device", DEVICES)
def test_gat_backward_given_the_forward_output(gen, device):
    """The backward op given the forward's out: the same gradients (the float32 GPU kernel takes
    each row's sum_e a_e d_a_e from it, the CPU ignores it); an out of the wrong shape is named."""
    from spgnn import _ops
    ei, n = make_edge_index("skewed", gen)
    h = spgnn.Graph(ei.to(device), n).handle()
    H, C = 2, 8
    feat = randn(gen, n, H * C, device=device)
    el, er = randn(gen, n, H, device=device), randn(gen, n, H, device=device)
    up = randn(gen, n, H * C, device=device)
    seed = torch.tensor([7])
    out, attn = _ops.gat_aggregate(h, feat, el, er, H, 0.2, 0.3, seed, n, "")[:2]
    args = (h, feat, el, er, attn, up, H, 0.2, 0.3, seed, "")
    without = _ops.gat_aggregate_backward(*args)
    given = _ops.gat_aggregate_backward(*args, out)
    scale = (up.abs() * feat.abs().mean()).norm()
    for a, b in zip(given, without):
        assert rel_err(a, b, scale) < 1e-5
    with pytest.raises(ValueError, match="forward_out"):
        _ops.gat_aggregate_backward(*args, out[:-1])
    # Asked for the sums (a caller that will differentiate), the fused GPU forward also returns
    # each row's softmax state and negative-logit sums, its out and attn unchanged bit for bit;
    # the backward given all three walks the edges once, by source (GatParams::
    # negative_logit_sums). The CPU keeps neither.
    out2, attn2, out32, state, neg = _ops.gat_aggregate(h, feat, el, er, H, 0.2, 0.3, seed, n, "",
                                                        True)
    assert torch.equal(out2, out) and torch.equal(attn2, attn) and out32.numel() == 0
    if device == "cpu":
        assert state.numel() == 0 and neg.numel() == 0
        return
    assert state.shape == (n, H, 2) and neg.shape == (n, H * C)
    assert state.dtype == neg.dtype == torch.float32
    walked = _ops.gat_aggregate_backward(*args, out, state, neg)
    for a, b in zip(walked, without):
        assert rel_err(a, b, scale) < 1e-5
    with pytest.raises(ValueError, match="negative_logit_sums"):
        _ops.gat_aggregate_backward(*args, out, state, neg[:-1])
    # autograd takes the same path when the inputs require grad, and not under no_grad
    leaves = [t.clone().requires_grad_() for t in (feat, el, er)]
    y, _ = ops.gat_aggregate(spgnn.Graph(ei.to(device), n), leaves[0].view(n, H, C), *leaves[1:],
                             attn_dropout=0.3)
    assert all(g is not None for g in torch.autograd.grad(y.sum(), leaves))
    with torch.no_grad():
        assert _ops.gat_will_differentiate(*leaves) is False


def _distinct_rows(gen, n, F, device):
    # a random permutation per row: no ties, so top-k is unambiguous
    return torch.argsort(torch.rand(n, F, generator=gen), dim=1).float().to(device) / F - 0.5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("F,k", [(7, 3), (33, 32), (256, 16), (300, 5)])
def test_maxk_and_cbsr_products(gen, device, F, k):
    ei, n = make_edge_index("skewed", gen)
    ei = ei.to(device)
    g = spgnn.Graph(ei, n)
    x = _distinct_rows(gen, n, F, device).requires_grad_()
    values, columns = ops.maxk(x, k)
    assert columns.dtype == (torch.uint8 if F <= 256 else torch.uint16)
    top = torch.topk(x.detach(), k, dim=1)
    order = torch.argsort(top.indices, dim=1)
    assert torch.equal(columns.long(), top.indices.gather(1, order))
    assert torch.equal(values, top.values.gather(1, order))
    dense = ops.cbsr_to_dense(values, columns, F)
    ref_dense = torch.zeros_like(x).scatter(1, top.indices, top.values)
    assert torch.equal(dense, ref_dense)
    w = randn(gen, ei.shape[1], device=device).requires_grad_()
    out = ops.cbsr_spgemm(g, values, columns, F, w)
    ref = ref_gspmm(ei, n, "u_mul_e", "sum", ref_dense, w)
    assert rel_err(out, ref) < TOL
    up = randn(gen, n, F, device=device)
    gx, gw = torch.autograd.grad(out, (x, w), up)
    mask = torch.zeros_like(x).scatter(1, top.indices, 1.0)
    rx, rw = torch.autograd.grad(ref_gspmm(ei, n, "u_mul_e", "sum", x * mask, w), (x, w),
                                 up.double())
    assert rel_err(gx, rx) < GRAD_TOL and rel_err(gw, rw) < GRAD_TOL
    d = ops.cbsr_sspmm(g, up, values, columns, w)
    ref_d = ref_gspmm(ei.flip(0), n, "u_mul_e", "sum", up, w).gather(1, columns.long())
    assert rel_err(d, ref_d) < TOL


@pytest.mark.parametrize("device", DEVICES)
def test_maxk_module_is_relu_like(gen, device):
    x = _distinct_rows(gen, 40, 10, device).requires_grad_()
    y = spgnn.nn.MaxK(3)(x)
    assert ((y != 0).sum(1) <= 3).all()
    top = torch.topk(x.detach(), 3, dim=1)
    assert torch.equal(y, torch.zeros_like(x).scatter(1, top.indices, top.values))
    up = randn(gen, 40, 10, device=device)
    gx, = torch.autograd.grad(y, x, up)
    mask = torch.zeros_like(x).scatter(1, top.indices, 1.0)
    assert torch.equal(gx, up * mask)


# ---- float64 gradcheck (the CPU path takes float64 through the float64 reference kernels) --------

@pytest.mark.parametrize("op,reduce", [(o, r) for o in ("copy_u", "copy_e", "u_add_e", "u_sub_e",
                                                        "u_mul_e", "u_div_e")
                                       for r in ("sum", "mean", "max", "min")])
def test_gspmm_gradcheck_float64(gen, op, reduce):
    ei, n = make_edge_index("loops_dups", gen, n=9)
    g = spgnn.Graph(ei, n)
    E = ei.shape[1]
    u = torch.randn(n, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    for eshape in ((E,), (E, 3)):
        e = (0.5 + torch.rand(*eshape, generator=gen, dtype=torch.float64)).requires_grad_()
        if op == "copy_u":
            fn, inputs = (lambda a: ops.gspmm(g, op, reduce, a, None)), (u,)
        elif op == "copy_e":
            fn, inputs = (lambda b: ops.gspmm(g, op, reduce, None, b)), (e,)
        else:
            fn, inputs = (lambda a, b: ops.gspmm(g, op, reduce, a, b)), (u, e)
        # max/min are piecewise: random data keeps every winner strictly ahead (no kinks)
        assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("op,lt,rt", [c for c in SDDMM_CASES if c[1] != c[2] or c[0] == "dot"])
def test_gsddmm_gradcheck_float64(gen, op, lt, rt):
    ei, n = make_edge_index("skewed", gen, n=8)
    g = spgnn.Graph(ei, n)
    rows = {"u": n, "v": n, "e": ei.shape[1]}
    lhs = torch.randn(rows[lt], 2, generator=gen, dtype=torch.float64, requires_grad=True)
    rhs = (0.5 + torch.rand(rows[rt], 2, generator=gen, dtype=torch.float64)).requires_grad_()
    if op == "copy_lhs":
        fn, inputs = (lambda a: ops.gsddmm(g, op, a, None, lt, rt)), (lhs,)
    elif op == "copy_rhs":
        fn, inputs = (lambda b: ops.gsddmm(g, op, None, b, lt, rt)), (rhs,)
    else:
        fn, inputs = (lambda a, b: ops.gsddmm(g, op, a, b, lt, rt)), (lhs, rhs)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


# ---- the eager fronts: the same ops without the dispatcher's custom-op machinery ----------------

def _both_paths(monkeypatch, fn):
    """fn() with the eager fronts, then with every call routed through the custom ops."""
    from spgnn import _ops
    fast = fn()
    with monkeypatch.context() as m:
        m.setattr(_ops, "_direct", lambda args: False)
        slow = fn()
    return fast, slow


def test_eager_fronts_equal_the_custom_ops(gen, monkeypatch):
    ei, n = make_edge_index("skewed", gen, n=40)
    g = spgnn.Graph(ei, n)
    E = ei.shape[1]
    u0 = randn(gen, n, 5)
    e0 = _positive(gen, E, device="cpu")
    s0 = randn(gen, E, 2)
    x0 = randn(gen, n, 12)

    def run():
        u, e, s, x = (t.clone().requires_grad_() for t in (u0, e0, s0, x0))
        outs = [ops.gspmm(g, "u_mul_e", "mean", u, e), ops.gspmm(g, "copy_u", "max", u, None),
                ops.gsddmm(g, "dot", u, u, "u", "v"), ops.edge_softmax(g, s),
                ops.cbsr_to_dense(*ops.maxk(x, 4), 12)]
        loss = sum((o * torch.linspace(-1, 1, o.numel()).reshape(o.shape)).sum() for o in outs)
        return [o.detach() for o in outs] + list(torch.autograd.grad(loss, (u, e, s, x)))

    fast, slow = _both_paths(monkeypatch, run)
    for a, b in zip(fast, slow):
        assert torch.equal(a, b)


def test_eager_fronts_double_backward_and_no_grad(gen, monkeypatch):
    from spgnn import _ops
    ei, n = make_edge_index("loops_dups", gen, n=9)
    g = spgnn.Graph(ei, n)
    u = torch.randn(n, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    e = (0.5 + torch.rand(ei.shape[1], generator=gen, dtype=torch.float64)).requires_grad_()
    # the fronts' autograd.Function is differentiable twice, as the custom op is
    assert torch.autograd.gradgradcheck(lambda a, b: ops.gspmm(g, "u_mul_e", "sum", a, b), (u, e),
                                        eps=1e-6, atol=1e-7)
    # without a gradient to record, the implementation runs bare: no grad_fn
    with torch.no_grad():
        assert ops.gspmm(g, "u_mul_e", "sum", u, e).grad_fn is None
    assert ops.gspmm(g, "u_mul_e", "sum", u.detach(), e.detach()).grad_fn is None
    # under autocast the custom ops run (they carry the autocast casts), and so they do inside
    # torch.compile and for tensor subclasses
    seen = []
    real = _ops._direct
    monkeypatch.setattr(_ops, "_direct", lambda args: seen.append(real(args)) or seen[-1])
    x = torch.randn(n, 4, generator=gen)
    assert ops.gspmm(g, "copy_u", "sum", x, None).dtype == torch.float32
    assert seen == [True]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert ops.gspmm(g, "copy_u", "sum", x, None).dtype == torch.bfloat16  # the op's cast
    assert seen == [True, False]


def test_graph_weights_are_the_default_edge_values(gen):
    ei, n = make_edge_index("uniform", gen)
    w = torch.rand(ei.shape[1], generator=gen)
    g = spgnn.Graph(ei, n, edge_weight=w)
    x = randn(gen, n, 5)
    assert rel_err(ops.u_mul_e_sum(g, x), ref_gspmm(ei, n, "u_mul_e", "sum", x, w)) < TOL
    assert rel_err(ops.copy_e_sum(g, w), ref_gspmm(ei, n, "copy_e", "sum", None, w)) < TOL


def test_strategies_are_selectable(gen):
    ei, n = make_edge_index("skewed", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 8)
    ref = ref_gspmm(ei, n, "copy_u", "sum", x, None)
    for s in ("cpu_ref", "cpu_mergepath"):
        assert rel_err(ops.gspmm(g, "copy_u", "sum", x, strategy=s), ref) < TOL
    with pytest.raises(ValueError, match="nosuch"):
        ops.gspmm(g, "copy_u", "sum", x, strategy="nosuch")


# float16/bfloat16 on the CPU: computed in float32 and rounded once, so a result is within the
# half dtype's unit roundoff (2^-11, 2^-8) of the exact value on the same (rounded) inputs;
# gradients chain two such roundings.
HALF_TOL = {torch.float16: 2.0 / 2048, torch.bfloat16: 2.0 / 256}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op,reduce", [("copy_u", "sum"), ("u_mul_e", "sum"), ("u_mul_e", "mean"),
                                       ("u_add_e", "max"), ("copy_e", "min"),
                                       ("u_div_e", "sum")])
def test_gspmm_half_precision_on_the_cpu(gen, dtype, op, reduce):
    ei, n = make_edge_index("skewed", gen)
    E = ei.shape[1]
    g = spgnn.Graph(ei, n)
    u = None if op == "copy_e" else randn(gen, n, 5).to(dtype).requires_grad_()
    e = None if op == "copy_u" else _edge_data(gen, op, E, 5, "full", "cpu").to(dtype)
    if reduce in ("max", "min"):
        # Few half values tie often, and a tie lets spgnn's choice (the first edge) differ from
        # the reference's (shared): messages made distinct per target and feature instead, e
        # distinct per column and >= 2^-10 apart, u too small to close any gap.
        base = 0x3F80 if dtype == torch.bfloat16 else 0x3C00  # 1.0
        bits = torch.stack([torch.randperm(E, generator=gen) for _ in range(5)], 1) + base
        e = bits.to(torch.int16).view(dtype)
        if u is not None:
            u = (randn(gen, n, 5) * 2.0**-14).to(dtype).requires_grad_()
    if e is not None:
        e.requires_grad_()
    out = ops.gspmm(g, op, reduce, u, e)
    assert out.dtype == dtype
    exact = [None if t is None else t.detach().double().requires_grad_() for t in (u, e)]
    ref = ref_gspmm(ei, n, op, reduce, *exact)
    scale = (ref_gspmm(ei, n, op.replace("sub", "add"), reduce,
                       *(None if t is None else t.detach().abs() for t in exact))
             if reduce in ("sum", "mean") else None)
    assert rel_err(out, ref, scale) < HALF_TOL[dtype]
    up = randn(gen, *out.shape).to(dtype)
    leaves = [t for t in (u, e) if t is not None]
    got = torch.autograd.grad(out, leaves, up)
    want = torch.autograd.grad(ref, [t for t in exact if t is not None], up.double())
    for a, b in zip(got, want):
        assert a.dtype == dtype
        assert rel_err(a, b) < 2 * HALF_TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gsddmm_half_precision_on_the_cpu(gen, dtype):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    a = randn(gen, n, 6).to(dtype)
    b = randn(gen, n, 6).to(dtype)
    for op in ("dot", "mul", "add"):
        out = ops.gsddmm(g, op, a, b, "u", "v")
        assert out.dtype == dtype
        ref = ref_gsddmm(ei, op, a.double(), b.double(), "u", "v")
        assert rel_err(out, ref) < HALF_TOL[dtype], op
    if torch.cuda.is_available() and spgnn.with_cuda:
        # An op without half kernels takes half operands on the GPU too (converted on the
        # device), with the CPU's answer.
        s = randn(gen, ei.shape[1], 2).to(dtype)
        want = ops.edge_softmax(g, s)
        got = ops.edge_softmax(g.to("cuda"), s.cuda())
        assert got.dtype == dtype and got.is_cuda
        assert rel_err(got.cpu(), want.double()) < HALF_TOL[dtype]


def test_autocast_picks_float32_for_narrow_gpu_aggregations():
    """The GPU autocast rule (the half g-SpMM runs at multiples of 8 features from 64 to 256,
    then at multiples of 64), checked on its inputs: it reads only widths, so fake tensors under
    torch.compile get the same pick."""
    from spgnn._ops import _gpu_half_pays
    h = torch.zeros(1, dtype=torch.int64)
    for F, want in ((0, False), (1, False), (16, False), (48, False), (63, False), (64, True),
                    (68, False), (72, True), (120, True), (128, True), (130, False),
                    (136, True), (192, True), (200, True), (248, True), (256, True),
                    (260, False), (264, False), (320, True)):
        u = torch.empty(5, F)
        assert _gpu_half_pays("gspmm", (h, "copy_u", "sum", u, None, 5, "")) is want, F
        assert _gpu_half_pays("gspmm_arg", (h, "u_mul_e", "max", u, torch.empty(7), 5, "")) is want
    # copy_e: the edge tensor's width
    assert not _gpu_half_pays("gspmm", (h, "copy_e", "sum", None, torch.empty(7), 5, ""))
    assert _gpu_half_pays("gspmm", (h, "copy_e", "sum", None, torch.empty(7, 64), 5, ""))
    assert _gpu_half_pays("gsddmm", (h, "dot", torch.empty(5, 4), torch.empty(5, 4), "u", "v"))
    # The GAT aggregation: in half where each head's width is a multiple of 4 (forward and
    # backward alike, from the same feat).
    el, s = torch.empty(5, 2), torch.empty(0)
    for W, want in ((8, True), (16, True), (12, False), (6, False), (24, True), (2, False)):
        feat = torch.empty(5, W)
        assert _gpu_half_pays("gat_aggregate", (h, feat, el, el, 2, 0.2, 0.0, s, 5, "")) is want
        assert _gpu_half_pays("gat_aggregate_backward",
                              (h, feat, el, el, s, feat, 2, 0.2, 0.0, s, "")) is want


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gspmm_gsddmm_half_precision_on_the_gpu(gen, dtype):
    """The GPU half kernels compute what the CPU path does: float32 arithmetic, one rounding per
    result."""
    ei, n = make_edge_index("skewed", gen)
    g, gc = spgnn.Graph(ei, n), spgnn.Graph(ei.cuda(), n)
    for F in (1, 5, 8, 64, 130):
        u = randn(gen, n, F).to(dtype)
        w = torch.rand(ei.shape[1], generator=gen).to(dtype) + 0.5
        for op, reduce, e in (("copy_u", "sum", None), ("u_mul_e", "mean", w),
                              ("u_mul_e", "sum", w), ("copy_u", "max", None)):
            want = ops.gspmm(g, op, reduce, u, e)
            got = ops.gspmm(gc, op, reduce, u.cuda(), None if e is None else e.cuda())
            assert got.dtype == dtype and got.is_cuda
            assert rel_err(got, want) < HALF_TOL[dtype], (op, reduce, F)
        for op in ("dot", "mul"):
            want = ops.gsddmm(g, op, u, u, "u", "v")
            got = ops.gsddmm(gc, op, u.cuda(), u.cuda(), "u", "v")
            assert got.dtype == dtype and rel_err(got, want) < 2 * HALF_TOL[dtype], (op, F)
    # Under autocast on the GPU a g-SpMM runs in the half dtype where
    # C.half_spmm_width_pays(F), in float32 elsewhere (where the half kernel may be slower);
    # g-SDDMM always in half.
    for F in (16, 64, 72, 100):
        xa = randn(gen, n, F, device="cuda")
        with torch.autocast("cuda", dtype=dtype):
            agg = ops.gspmm(gc, "copy_u", "sum", xa)
            dots = ops.gsddmm(gc, "dot", xa, xa, "u", "v")
        assert agg.dtype == (dtype if F in (64, 72) else torch.float32), F
        assert dots.dtype == dtype
        assert rel_err(agg, ops.gspmm(gc, "copy_u", "sum", xa)) < HALF_TOL[dtype], F
    # A layer's output has its last op's dtype, as with torch's own float32-policy ops:
    # SAGEConv(16, 8) aggregates its 8 transformed columns in float32 (narrow) and adds the root
    # term's half GEMM, so float32; SAGEConv(64, 96) aggregates 64 input columns in half, then
    # both GEMMs run in half.
    for F_in, F_out, want in ((16, 8, torch.float32), (64, 96, dtype)):
        x = randn(gen, n, F_in, device="cuda")
        layer = spgnn.nn.SAGEConv(F_in, F_out).cuda()
        with torch.autocast("cuda", dtype=dtype):
            y = layer(x, ei.cuda())
        assert y.dtype == want, (F_in, F_out)
        assert rel_err(y, layer(x, ei.cuda())) < 4 * HALF_TOL[dtype], (F_in, F_out)
    # The GAT aggregation reads half rows itself (the fused kernels' half path) where a head is a
    # multiple of 4 wide, forward and backward, and answers as the CPU's half path does (float32
    # arithmetic, one rounding per result); narrower heads stay float32 under autocast.
    for H, F in ((2, 8), (1, 16), (3, 12), (2, 6)):
        feat = randn(gen, n, H * F).to(dtype)
        el, er = randn(gen, n, H).to(dtype), randn(gen, n, H).to(dtype)
        up = randn(gen, n, H * F).to(dtype)
        leaves = [t.clone().requires_grad_() for t in (feat, el, er)]
        out, attn = ops.gat_aggregate(g, *leaves)
        grads = torch.autograd.grad(out.reshape(n, -1), leaves, up)
        dleaves = [t.cuda().requires_grad_() for t in (feat, el, er)]
        dout, dattn = ops.gat_aggregate(gc, *dleaves)
        dgrads = torch.autograd.grad(dout.reshape(n, -1), dleaves, up.cuda())
        assert dout.dtype == dattn.dtype == dtype and dout.is_cuda
        assert rel_err(dout.cpu(), out) < 2 * HALF_TOL[dtype], (H, F)
        assert rel_err(dattn.cpu(), attn) < 2 * HALF_TOL[dtype], (H, F)
        for a, b, name in zip(dgrads, grads, ("feat", "el", "er")):
            assert a.dtype == dtype and rel_err(a.cpu(), b) < 4 * HALF_TOL[dtype], (H, F, name)
        x32 = [t.float().cuda() for t in (feat, el, er)]
        with torch.autocast("cuda", dtype=dtype):
            aout, _ = ops.gat_aggregate(gc, *x32)
        assert aout.dtype == (dtype if F % 4 == 0 else torch.float32), (H, F)
        if F % 4 == 0:  # el / er stay float32 under autocast: the kernels read them unrounded
            direct, _ = ops.gat_aggregate(gc, x32[0].to(dtype), *x32[1:])
            assert torch.equal(aout, direct), (H, F)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_attention_half_precision_on_the_cpu(gen, dtype):
    ei, n = make_edge_index("skewed", gen)
    E = ei.shape[1]
    g = spgnn.Graph(ei, n)
    tol = HALF_TOL[dtype]
    s = (3 * randn(gen, E, 2)).to(dtype).requires_grad_()
    out = ops.edge_softmax(g, s)
    assert out.dtype == dtype
    exact = s.detach().double().requires_grad_()
    ref = ref_edge_softmax(ei, n, exact)
    assert rel_err(out, ref) < tol
    up = randn(gen, E, 2).to(dtype)
    a, = torch.autograd.grad(out, s, up)
    b, = torch.autograd.grad(ref, exact, up.double())
    assert a.dtype == dtype and rel_err(a, b, scale=up) < 2 * tol
    feat, el, er = (randn(gen, n, 2, 4).to(dtype).requires_grad_(),
                    randn(gen, n, 2).to(dtype).requires_grad_(),
                    randn(gen, n, 2).to(dtype).requires_grad_())
    out, attn = ops.gat_aggregate(g, feat, el, er, 0.2)
    assert out.dtype == dtype and attn.dtype == dtype
    leaves = [t.detach().double().requires_grad_() for t in (feat, el, er)]
    ref, ref_attn = ref_gat(ei, n, *leaves, 0.2)
    assert rel_err(out, ref) < tol and rel_err(attn, ref_attn) < tol
    up = randn(gen, n, 2, 4).to(dtype)
    got = torch.autograd.grad(out, (feat, el, er), up)
    want = torch.autograd.grad(ref, leaves, up.double())
    scale = (up.double().abs() * feat.detach().double().abs().mean()).norm()
    for x, y in zip(got, want):
        assert x.dtype == dtype and rel_err(x, y, scale) < 2 * tol
    # float32 el / er beside half rows (what autocast passes): used unrounded; their gradients
    # come back in float32, feat's in its dtype.
    el32 = randn(gen, n, 2).requires_grad_()
    er32 = randn(gen, n, 2).requires_grad_()
    out, attn = ops.gat_aggregate(g, feat, el32, er32, 0.2)
    assert out.dtype == dtype and attn.dtype == dtype
    leaves = [t.detach().double().requires_grad_() for t in (feat, el32, er32)]
    ref, ref_attn = ref_gat(ei, n, *leaves, 0.2)
    assert rel_err(out, ref) < tol and rel_err(attn, ref_attn) < tol
    got = torch.autograd.grad(out, (feat, el32, er32), up)
    want = torch.autograd.grad(ref, leaves, up.double())
    assert [x.dtype for x in got] == [dtype, torch.float32, torch.float32]
    for x, y in zip(got, want):
        assert rel_err(x, y, scale) < 2 * tol
    # autocast casts feat and keeps el / er float32
    f32_args = (feat.detach().float(), el32.detach(), er32.detach())
    with torch.autocast("cpu", dtype=dtype):
        aout, _ = ops.gat_aggregate(g, *f32_args, 0.2)
    direct, _ = ops.gat_aggregate(g, f32_args[0].to(dtype), *f32_args[1:], 0.2)
    assert aout.dtype == dtype and torch.equal(aout, direct)
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    with pytest.raises(TypeError, match="el is .* but feat is .*: el and er must be float32"):
        ops.gat_aggregate(g, feat, el.to(other), er)
    with pytest.raises(TypeError, match="one op takes one float dtype"):
        ops.gat_aggregate(g, feat.detach().float(), el, er)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_maxk_and_cbsr_half_precision_on_the_cpu(gen, dtype):
    ei, n = make_edge_index("skewed", gen)
    g = spgnn.Graph(ei, n)
    F, k = 40, 6
    # Values exact in both half dtypes (multiples of 1/8 below 8), with ties: the same selection
    # as in float32, ties to the lower column.
    xf = torch.round(randn(gen, n, F) * 16) / 8
    x = xf.to(dtype).requires_grad_()
    values, columns = ops.maxk(x, k)
    v32, c32 = ops.maxk(xf, k)
    assert values.dtype == dtype and torch.equal(columns, c32) and torch.equal(values.float(), v32)
    w = randn(gen, ei.shape[1]).to(dtype).requires_grad_()
    out = ops.cbsr_spgemm(g, values, columns, F, w)
    dense = torch.zeros(n, F, dtype=torch.float64).scatter(1, c32.long(), v32.double())
    wd = w.detach().double().requires_grad_()
    ref = ref_gspmm(ei, n, "u_mul_e", "sum", dense, wd)
    scale = ref_gspmm(ei, n, "u_mul_e", "sum", dense.abs(), wd.detach().abs())
    assert out.dtype == dtype and rel_err(out, ref, scale) < HALF_TOL[dtype]
    up = randn(gen, n, F).to(dtype)
    gx, gw = torch.autograd.grad(out, (x, w), up)
    assert gx.dtype == dtype and gw.dtype == dtype
    d = ops.cbsr_sspmm(g, up, values, columns, w)
    ref_d = ref_gspmm(ei.flip(0), n, "u_mul_e", "sum", up.double(), wd.detach()).gather(
        1, c32.long())
    assert d.dtype == dtype and rel_err(d, ref_d) < 2 * HALF_TOL[dtype]
    assert rel_err(gx, torch.zeros(n, F, dtype=torch.float64).scatter(1, c32.long(), ref_d)) \
        < 2 * HALF_TOL[dtype]
    with pytest.raises(TypeError, match="values is .*16 but d_out is float32"):
        ops.cbsr_sspmm(g, up.float(), values, columns, w)


def test_custom_ops_carry_real_type_annotations():
    """torch < 2.5's custom_op infers an op's schema from its function's annotations and rejects
    strings (what `from __future__ import annotations` makes of them): `import spgnn` failed on
    torch 2.4.1 that way. The package promises every torch >= 2.4, and CI installs the newest,
    so this checks the condition itself on every op the package registers."""
    import inspect

    from torch._library.custom_ops import CustomOpDef

    from spgnn import _ops
    defs = [v for v in vars(_ops).values() if isinstance(v, CustomOpDef)]
    assert len(defs) >= 10, "spgnn._ops registers its ops through torch.library.custom_op"
    for d in defs:
        sig = inspect.signature(d._init_fn)
        for name, p in sig.parameters.items():
            assert not isinstance(p.annotation, str), (d._name, name, p.annotation)
        assert not isinstance(sig.return_annotation, str), (d._name, sig.return_annotation)


def test_graph_handle_ops_never_track_gradients():
    """The graph-handle ops skip custom_op's Python autograd layer (an Autograd fallthrough):
    their outputs must not require grad even when `like` does, and must not carry a grad_fn that
    warns or fails in a backward."""
    ei = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    g = spgnn.Graph(ei, num_nodes=3, edge_weight=torch.tensor([1.0, 2.0, 3.0, 4.0]))
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    h = torch.ops.spgnn.graph_from_edge_index.default(ei, 3, -1)
    hv = torch.ops.spgnn.graph_variant.default(h, "gcn")
    w = torch.ops.spgnn.graph_tensor.default(g.handle(), "values", x, 0)
    for t in (h, hv, w):
        assert not t.requires_grad and t.grad_fn is None
    assert sorted(w.tolist()) == [1.0, 2.0, 3.0, 4.0] and w.dtype == torch.float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (w.sum() * x).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 10.0))


# ---- dropout (a hashed mask, recomputed in the backward) ------------------------------------------

def _nonzero(gen, *shape, device, dtype=torch.float32):
    # away from 0: a zero input gives a zero output whether it is dropped or kept
    x = 0.5 + torch.rand(*shape, generator=gen, dtype=torch.float64)
    sign = torch.randint(0, 2, shape, generator=gen) * 2 - 1
    return (x * sign).to(dtype).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_is_inverted_dropout_with_a_recomputed_mask(gen, device, p):
    n = 300 * 67  # an odd width; large enough for the kept fraction's test below
    x = _nonzero(gen, 300, 67, device=device).requires_grad_()
    y = ops.dropout(x, p)
    kept = y != 0
    # each element kept independently with probability 1 - p: 6 standard deviations
    frac = kept.double().mean().item()
    assert abs(frac - (1 - p)) < 6 * ((p * (1 - p) / n) ** 0.5), frac
    assert rel_err(y[kept], x.detach()[kept].double() / (1 - p)) < 1e-7
    # the gradient goes through the same mask and scale
    up = randn(gen, 300, 67, device=device)
    gx, = torch.autograd.grad(y, x, up)
    assert torch.equal(gx != 0, kept)
    assert rel_err(gx[kept], up[kept].double() / (1 - p)) < 1e-7
    # zeros stay zeros, non-contiguous inputs are read as their values
    z = x.detach().clone()
    z[::2] = 0
    assert (ops.dropout(z, p)[::2] == 0).all()
    t = x.detach().t()
    yt = ops.dropout(t, p)
    assert yt.shape == t.shape and rel_err(yt[yt != 0], t[yt != 0].double() / (1 - p)) < 1e-7


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_mask_depends_on_the_seed_and_index_only(gen, device):
    """The CPU loop takes another path through mostly-zero stretches (bag-of-words inputs):
    masking a dense input afterwards equals dropping the masked input, exactly."""
    from spgnn import _ops
    xd = _nonzero(gen, 211, 173, device=device)
    for density in (0.01, 0.1, 0.5):
        m = (torch.rand(211, 173, generator=gen) < density).float().to(device)
        seed = torch.randint(0, 2**62, (1,), generator=gen)
        for p in (0.2, 0.7):
            assert torch.equal(_ops.dropout(xd * m, p, seed), _ops.dropout(xd, p, seed) * m)


def test_dropout_follows_torch_seed_and_arguments(gen):
    x = _nonzero(gen, 50, 9, device="cpu")
    torch.manual_seed(3)
    a = ops.dropout(x, 0.5)
    b = ops.dropout(x, 0.5)
    torch.manual_seed(3)
    assert torch.equal(ops.dropout(x, 0.5), a)  # torch.manual_seed repeats a run
    assert not torch.equal(a, b)                 # each call draws a fresh mask
    # F.dropout's semantics at the edges: identity when not training or p = 0, zeros at p = 1
    assert ops.dropout(x, 0.5, training=False) is x and ops.dropout(x, 0.0) is x
    assert torch.equal(ops.dropout(x, 1.0), torch.zeros_like(x))
    xi = x.clone()
    out = ops.dropout(xi, 0.5, inplace=True)
    assert out is xi and torch.equal(xi == 0, (out == 0)) and (xi == 0).any() and (xi != 0).any()
    # float16/bfloat16 go to torch's dropout: a dropout all the same
    for dt in (torch.float16, torch.bfloat16):
        h = x.to(dt)
        yh = ops.dropout(h, 0.5)
        assert yh.dtype == dt and torch.equal(yh[yh != 0], (h[yh != 0].float() * 2).to(dt))
    # the module is torch.nn.Dropout's drop-in
    m = spgnn.nn.Dropout(0.25)
    assert repr(m) == "Dropout(p=0.25, inplace=False)"
    y = m(x)
    assert rel_err(y[y != 0], x[y != 0].double() / 0.75) < 1e-7
    assert m.eval()(x) is x


def test_dropout_rejects_bad_arguments():
    x = torch.ones(4, 3)
    for p in (-0.1, 1.5, "0.5", True, None):
        with pytest.raises(ValueError, match="p must be a probability in"):
            ops.dropout(x, p)
        with pytest.raises(ValueError, match="p must be a probability in"):
            spgnn.nn.Dropout(p)
    with pytest.raises(TypeError, match="input must be a float tensor, got torch.int64"):
        ops.dropout(torch.ones(4, 3, dtype=torch.int64), 0.5)
    with pytest.raises(TypeError, match="input must be a torch.Tensor, got list"):
        ops.dropout([1.0, 2.0], 0.5)


def test_dropout_gradcheck_float64_and_compiles(gen):
    from spgnn import _ops
    x = _nonzero(gen, 7, 5, device="cpu", dtype=torch.float64).requires_grad_()
    seed = torch.tensor([12345])  # one mask for every call gradcheck makes
    assert torch.autograd.gradcheck(lambda a: _ops.dropout(a, 0.3, seed), (x,))
    assert torch.autograd.gradgradcheck(lambda a: _ops.dropout(a, 0.3, seed), (x,))

    torch._dynamo.reset()
    w = torch.linspace(-1, 1, 35).reshape(7, 5)

    @torch.compile(fullgraph=True)
    def f(a):
        return (ops.dropout(a, 0.4) * w).sum()

    xf = x.detach().float().requires_grad_()
    for _ in range(2):
        loss = f(xf)
        gx, = torch.autograd.grad(loss, xf)
        # the compiled backward drops what the compiled forward dropped: grad = mask * w / 0.6
        kept = gx != 0
        terms = (xf.detach() * w)[kept].double() / 0.6
        # a float32 sum of terms of both signs is exact only to the size of its terms
        assert rel_err(loss, terms.sum(), scale=terms.abs().sum()) < 1e-6
        assert rel_err(gx[kept], w[kept].double() / 0.6) < 1e-7


@pytest.mark.gpu
def test_dropout_drops_the_same_elements_on_cpu_and_gpu(gen):
    """The hash is compiled identically for host and device: one seed, one mask, on the caller's
    current stream."""
    from spgnn import _ops
    x = _nonzero(gen, 1000, 37, device="cpu")
    seed = torch.tensor([987654321])
    ref = _ops.dropout(x, 0.5, seed)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        xd = x.cuda()
        yd = _ops.dropout(xd, 0.5, seed)
    s.synchronize()
    assert torch.equal(yd.cpu(), ref)
