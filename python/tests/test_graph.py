"""spgnn.Graph: PyG's orientation, every edge kept, the caller's edge order, other inputs
(scipy, torch sparse), devices, lifetime of the compiled graphs, and the edge_index cache."""
import gc

import numpy as np
import pytest
import torch

import spgnn
from spgnn import _device_graph, _ops, ops
from spgnn._runtime import C

from conftest import DEVICES, GRAPH_KINDS, make_edge_index, randn, ref_gspmm, rel_err


def test_orientation_is_pyg(gen):
    # 0 -> 1, 0 -> 2, 1 -> 2: node 2 receives from 0 and 1, node 0 from nobody
    ei = torch.tensor([[0, 0, 1], [1, 2, 2]])
    g = spgnn.Graph(ei, 3)
    x = torch.tensor([[1.0], [10.0], [100.0]])
    assert torch.equal(ops.copy_u_sum(g, x), torch.tensor([[0.0], [1.0], [11.0]]))
    assert g.num_nodes == 3 and g.num_edges == 3


def test_parallel_edges_and_loops_are_kept(gen):
    ei = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0]])
    g = spgnn.Graph(ei, 2)
    x = torch.tensor([[1.0], [2.0]])
    assert g.num_edges == 4
    assert torch.equal(ops.copy_u_sum(g, x), torch.tensor([[2.0], [4.0]]))


@pytest.mark.parametrize("device", DEVICES)
def test_edge_tensors_follow_the_callers_order(gen, device):
    ei, n = make_edge_index("uniform", gen)
    ei = ei.to(device)
    g = spgnn.Graph(ei, n)
    order = g.edge_order()
    assert order is not None and sorted(order.tolist()) == list(range(ei.shape[1]))
    # edge_index answers in the caller's order; spgnn's own is sorted by target, then source
    assert torch.equal(g.edge_index, ei)
    e2 = g.edge_index[:, order]
    assert torch.equal(e2, ei[:, order])
    key = e2[1] * n + e2[0]
    assert torch.all(key[1:] >= key[:-1])
    x = randn(gen, n, 3, device=device)
    w = randn(gen, ei.shape[1], device=device)
    # gsddmm answers in the caller's order, gspmm reads e in it
    assert rel_err(ops.u_mul_v(g, x, x), x[ei[0]] * x[ei[1]]) < 1e-6
    assert rel_err(ops.u_mul_e_sum(g, x, w), ref_gspmm(ei, n, "u_mul_e", "sum", x, w)) < 1e-6


def test_sorted_input_needs_no_reordering(gen):
    ei, n = make_edge_index("sorted_by_dst", gen)
    assert spgnn.Graph(ei, n).edge_order() is None


def test_num_nodes_defaults_to_max_id_plus_one():
    g = spgnn.Graph(torch.tensor([[0, 4], [2, 1]]))
    assert g.num_nodes == 5
    assert spgnn.Graph(torch.zeros(2, 0, dtype=torch.int64)).num_nodes == 0


def test_non_contiguous_and_int32_edge_index(gen):
    pairs = torch.randint(0, 10, (30, 2), generator=gen)
    ei = pairs.t()  # a PyG habit: not contiguous
    assert not ei.is_contiguous()
    a = spgnn.Graph(ei, 10)
    b = spgnn.Graph(ei.contiguous().int(), 10)
    x = randn(gen, 10, 2)
    assert torch.equal(ops.copy_u_sum(a, x), ops.copy_u_sum(b, x))


def test_from_scipy_and_torch_sparse(gen):
    sp = pytest.importorskip("scipy.sparse")
    n = 12
    ei = torch.randint(0, n, (2, 40), generator=gen)
    w = torch.rand(40, generator=gen)
    # scipy: A[i, j] is the edge i -> j (duplicates summed by scipy's conversion)
    A = sp.coo_matrix((w.numpy(), (ei[0].numpy(), ei[1].numpy())), shape=(n, n)).tocsr()
    g1 = spgnn.Graph.from_scipy(A)
    x = randn(gen, n, 3)
    ref = ref_gspmm(ei, n, "u_mul_e", "sum", x, w)
    assert rel_err(ops.u_mul_e_sum(g1, x), ref) < 1e-6
    # torch sparse adj_t (rows = targets), COO and CSR
    adj_t = torch.sparse_coo_tensor(ei.flip(0), w, (n, n)).coalesce()
    for t in (adj_t, adj_t.to_sparse_csr()):
        g2 = spgnn.Graph.from_sparse_tensor(t)
        assert rel_err(ops.u_mul_e_sum(g2, x), ref) < 1e-6
    # The graph's own weights, passed to an op as edge data, pair with their edges: scipy's
    # row-major order is not spgnn's target-sorted one (a bipartite matrix here, so that no
    # symmetry can hide a mismatch).
    B = sp.random(9, 13, density=0.3, format="csr", dtype=np.float32,
                  random_state=int(torch.randint(0, 2**31, (1,), generator=gen)))
    g3 = spgnn.Graph.from_scipy(B)
    assert g3.edge_order() is not None
    xb = randn(gen, 9, 3)
    want = torch.from_numpy(B.toarray().T.astype(np.float64)) @ xb.double()
    for g in (g1, g3):
        xs = x if g is g1 else xb
        r = ref if g is g1 else want
        assert rel_err(ops.u_mul_e_sum(g, xs, g.edge_weight), r) < 1e-6
        ei_g, w_g = g.edge_index, g.edge_weight
        assert rel_err(ops.u_mul_e_sum(g, xs, w_g),
                       ref_gspmm(ei_g, g.num_dst_nodes, "u_mul_e", "sum", xs, w_g)) < 1e-6
    with pytest.raises(TypeError, match="scipy sparse"):
        spgnn.Graph.from_scipy(np.eye(3))
    with pytest.raises(TypeError, match="sparse COO or CSR"):
        spgnn.Graph.from_sparse_tensor(torch.eye(3))


def test_a_graph_without_edges_keeps_its_weights():
    # Weights given for no edges still make a weighted graph: its weighted ops sum nothing.
    g = spgnn.Graph(torch.empty(2, 0, dtype=torch.int64), 5, edge_weight=torch.empty(0))
    assert g.has_weights and g.edge_weight.shape == (0,)
    x = torch.randn(5, 3, requires_grad=True)
    out = ops.gspmm(g, "u_mul_e", "sum", x)
    assert torch.equal(out, torch.zeros(5, 3))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(5, 3))
    assert spgnn.Graph(torch.empty(2, 0, dtype=torch.int64), 5).has_weights is False


def test_bipartite_graph(gen):
    ei = torch.stack([torch.randint(0, 7, (20,), generator=gen),
                      torch.randint(0, 4, (20,), generator=gen)])
    g = spgnn.Graph(ei, size=(7, 4))
    assert (g.num_src_nodes, g.num_dst_nodes) == (7, 4)
    x = randn(gen, 7, 3)
    assert rel_err(ops.copy_u_sum(g, x), ref_gspmm(ei, 4, "copy_u", "sum", x, None)) < 1e-6
    with pytest.raises(ValueError, match="bipartite"):
        g.num_nodes


@pytest.mark.gpu
def test_to_device_and_back(gen):
    ei, n = make_edge_index("skewed", gen)
    g = spgnn.Graph(ei, n)
    gc_ = g.to("cuda")
    assert gc_.device.type == "cuda" and g.to("cuda").device == gc_.device
    x = randn(gen, n, 5)
    assert rel_err(ops.copy_u_sum(gc_, x.cuda()), ops.copy_u_sum(g, x)) < 1e-6
    assert gc_.to("cpu").device.type == "cpu"


def test_compiled_graphs_are_freed_with_their_handles(gen):
    spgnn.clear_cache()
    gc.collect()
    before = spgnn._C.live_graphs()
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 2)
    ops.copy_u_mean(g, x)
    spgnn.nn.GCNConv(2, 2)(x, g)  # derives the GCN variant and keeps it with g
    assert spgnn._C.live_graphs() > before
    del g
    gc.collect()
    assert spgnn._C.live_graphs() == before


def test_edge_index_cache_notices_in_place_changes(gen):
    spgnn.clear_cache()
    ei, n = make_edge_index("uniform", gen)
    conv = spgnn.nn.SAGEConv(3, 2, aggr="sum", root_weight=False, bias=False)
    x = randn(gen, n, 3)
    a = conv(x, ei)
    assert torch.equal(conv(x, ei), a)  # cached
    ei[1] = (ei[1] + 1) % n             # in place: a new graph
    ref = torch.zeros(n, 3).index_add(0, ei[1], x[ei[0]]) @ conv.lin_l.weight.t()
    assert rel_err(conv(x, ei), ref) < 1e-6


# ---- graphs built on the GPU with torch (_device_graph) ------------------------------------------
# A CUDA edge_index's graph and its variants are built by torch on the GPU; they must equal the
# host build's arrays exactly (GCN weights to float32 rounding: the degree sums run in another
# order). The builder's torch code runs on any device, so the CPU tests below hold it to the
# host build in CI; the GPU test runs the real path (views registered with the core).


def _capture(row, col, rowptr, val, source, n_rows, n_cols, kind, idx, parent=0,
             summaries=(None, None)):
    return dict(row=row.to(idx), col=col.to(idx), rowptr=rowptr.to(idx), val=val, source=source,
                n_rows=n_rows, n_cols=n_cols, summaries=summaries)


def _degree_summary(deg):
    """(max degree, empty rows, sum of squared degrees) of an int64 degree tensor."""
    deg = deg.cpu().long()
    return (int(deg.max()) if deg.numel() else 0, int((deg == 0).sum()),
            float(deg.double().square().sum()))


def _summaries_of(arrays):
    """The degree summaries of a graph's rows and of its columns, from its arrays."""
    rp = arrays["rowptr"].cpu().long()
    cols = torch.bincount(arrays["col"].cpu().long(), minlength=arrays["n_cols"])
    return _degree_summary(rp[1:] - rp[:-1]), _degree_summary(cols)


def _assert_same_summaries(got, arrays, what):
    """Summaries handed to the core (None: not handed in) equal the ones of the arrays."""
    for name, g, w in zip(("rows", "columns"), got, _summaries_of(arrays)):
        if g is not None:
            assert tuple(g) == w, (what, name, tuple(g), w)


def _host_arrays(addr):
    row, col, rowptr, val, src = C.graph_arrays(addr)
    info = C.graph_info(addr)
    return dict(row=row, col=col, rowptr=rowptr, val=val, source=src, n_rows=info["n_rows"],
                n_cols=info["n_cols"])


def _assert_same_arrays(got, want, what):
    for k in ("n_rows", "n_cols"):
        assert got[k] == want[k], (what, k)
    for k in ("row", "col", "rowptr"):
        a, b = got[k].cpu(), want[k].cpu()
        assert a.dtype == b.dtype and torch.equal(a, b), (what, k)
    assert (got["val"] is None) == (want["val"] is None), (what, "values")
    if want["val"] is not None:
        a, b = got["val"].cpu(), want["val"].cpu()
        assert a.dtype == b.dtype == torch.float32 and a.shape == b.shape, (what, "values")
        torch.testing.assert_close(a, b, rtol=2e-7, atol=0, msg=what)
    nnz = want["row"].numel()
    src_g = got["source"].cpu() if got["source"] is not None else torch.arange(nnz)
    src_w = want["source"].cpu() if want["source"] is not None else torch.arange(nnz)
    assert torch.equal(src_g, src_w), (what, "edge source")


BUILD_CASES = GRAPH_KINDS + ["bipartite", "int32", "weighted"]


def _build_case(kind, gen):
    """(edge_index, weights or None, n_src, n_dst) of a BUILD_CASES kind."""
    if kind == "bipartite":
        ei = torch.stack([torch.randint(0, 40, (150,), generator=gen),
                          torch.randint(0, 25, (150,), generator=gen)])
        return ei, None, 40, 25
    ei, n = make_edge_index("uniform" if kind in ("int32", "weighted") else kind, gen)
    weights = torch.rand(ei.shape[1], generator=gen) + 0.1 if kind == "weighted" else None
    return (ei.int() if kind == "int32" else ei), weights, n, n


@pytest.mark.parametrize("kind", BUILD_CASES)
def test_torch_build_equals_host_build(gen, kind):
    ei, weights, n_src, n_dst = _build_case(kind, gen)
    host = spgnn.Graph(ei, edge_weight=weights, size=(n_src, n_dst))
    addr = host.handle().untyped_storage().data_ptr()
    got = _device_graph.build(ei[1], ei[0], weights, n_dst, n_src, "edge_index[1]",
                              "edge_index[0]", register=_capture)
    _assert_same_arrays(got, _host_arrays(addr), f"{kind} base")
    assert None not in got["summaries"]
    _assert_same_summaries(got["summaries"], _host_arrays(addr), f"{kind} base")
    info = C.graph_info(addr)
    for variant in _device_graph.KINDS:
        if variant.startswith("gcn") and n_src != n_dst:
            with pytest.raises(ValueError, match="GCN normalisation needs a square graph"):
                _device_graph.derive(addr, variant, info, register=_capture)
            continue
        if variant == "loops" and n_dst > n_src:
            continue
        mine = _device_graph.derive(addr, variant, info, register=_capture)
        theirs = C.derive(addr, variant)
        if mine is None:  # the pattern of a graph without values: the graph itself
            assert variant == "pattern" and not info["has_values"]
            continue
        hv = _ops.wrap_handle(theirs)
        _assert_same_arrays(mine, _host_arrays(_ops._addr(hv)), f"{kind} {variant}")
        if variant in ("loops", "gcn", "gcn_improved"):  # the others take their parent's
            assert None not in mine["summaries"]
        _assert_same_summaries(mine["summaries"], _host_arrays(_ops._addr(hv)),
                               f"{kind} {variant}")


@pytest.mark.parametrize("kind", ["skewed", "empty_rows", "no_edges", "weighted"])
def test_torch_graph_tensors_equal_the_cores(gen, kind):
    """graph_tensor's torch path (what GPU-built graphs answer with) against the core's, on
    the CPU: every name, on a graph and its variants."""
    ei, n = make_edge_index("uniform" if kind == "weighted" else kind, gen)
    w = torch.rand(ei.shape[1], generator=gen) if kind == "weighted" else None
    g = spgnn.Graph(ei, n, edge_weight=w)
    like = torch.empty(0)
    for variant in ("base",) + _device_graph.KINDS:
        h = g.handle() if variant == "base" else _ops.graph_variant(g.handle(), variant)
        for name in ("row", "col", "edge_source", "values", "inv_degree"):
            want = _ops.graph_tensor(h, name, like, n)
            got = _device_graph.tensor(_ops._addr(h), name)
            assert got.dtype == want.dtype and torch.equal(got, want), (variant, name)
    with pytest.raises(ValueError, match="unknown name 'nope'"):
        _device_graph.tensor(_ops._addr(g.handle()), "nope")


def test_torch_build_names_out_of_range_ids_as_the_host_build_does(gen):
    ei = torch.randint(0, 10, (2, 50), generator=gen)
    ei[0, 17] = 10
    ei[1, 30] = -1
    for rows, cols, msg in ((ei[1], ei[0], r"edge_index\[1\]\[30\] = -1 is out of range"),
                            (ei[0].clamp(0, 9), ei[0], r"edge_index\[0\]\[17\] = 10 is out")):
        with pytest.raises(ValueError, match=msg):
            _device_graph.build(rows, cols, None, 10, 10, "edge_index[1]", "edge_index[0]",
                                register=_capture)
        with pytest.raises(ValueError, match=msg):
            spgnn.Graph(torch.stack([cols, rows]), 10)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", BUILD_CASES)
def test_graphs_of_cuda_edge_index_are_built_on_the_gpu(gen, kind):
    """A CUDA edge_index's graph (and every variant) is built on the GPU, equal to the host
    build's; ops and layers over it equal the host graph's, edge tensors in the caller's order."""
    ei, weights, n_src, n_dst = _build_case(kind, gen)
    host = spgnn.Graph(ei, edge_weight=weights, size=(n_src, n_dst))
    g = spgnn.Graph(ei.cuda(), edge_weight=None if weights is None else weights.cuda(),
                    size=(n_src, n_dst))
    assert g._info["device_built"] and not host._info["device_built"]
    _assert_same_arrays(_host_arrays(_ops._addr(g.handle())),
                        _host_arrays(_ops._addr(host.handle())), f"{kind} base")

    def same_summaries(hd, hh, what):
        """The GPU build handed the core every graph's degree statistics: `auto` reads those,
        equal to the ones the core computes from the host graph."""
        got = C.degree_summaries(_ops._addr(hd))
        assert None not in got, what
        _assert_same_summaries(got, _host_arrays(_ops._addr(hh)), what)
        assert C.auto_degree_summary(_ops._addr(hd)) == C.auto_degree_summary(_ops._addr(hh))
    same_summaries(g.handle(), host.handle(), f"{kind} base")
    assert torch.equal(g.edge_index.cpu(), host.edge_index)
    assert torch.equal(g.edge_index.cpu(), ei.long())
    if weights is not None:
        assert torch.equal(g.edge_weight.cpu(), weights)
    for variant in _device_graph.KINDS:
        if (variant.startswith("gcn") and n_src != n_dst) or (variant == "loops" and
                                                               n_dst > n_src):
            continue
        hd = _ops.graph_variant(g.handle(), variant)
        hh = _ops.graph_variant(host.handle(), variant)
        assert _ops.graph_variant(g.handle(), variant).shape == hd.shape  # cached
        _assert_same_arrays(_host_arrays(_ops._addr(hd)), _host_arrays(_ops._addr(hh)),
                            f"{kind} {variant}")
        same_summaries(hd, hh, f"{kind} {variant}")
        for name in ("row", "col", "edge_source", "values", "inv_degree"):
            like = torch.empty(0, device="cuda")
            a = _ops.graph_tensor(hd, name, like, n_dst if variant != "transpose" else n_src)
            b = _ops.graph_tensor(hh, name, torch.empty(0), n_dst if variant != "transpose"
                                  else n_src)
            assert a.device.type == "cuda" and a.dtype == b.dtype, (variant, name)
            torch.testing.assert_close(a.cpu(), b, rtol=2e-7, atol=0)
    # ops and their gradients over the two graphs
    x = torch.randn(n_src, 5, generator=gen)
    for op in ("copy_u", "u_mul_e"):
        e = torch.rand(ei.shape[1], generator=gen) if op == "u_mul_e" else None
        xs = [x.clone().requires_grad_(), x.cuda().requires_grad_()]
        outs = [ops.gspmm(gr, op, "mean", xi, None if e is None else e.to(xi.device))
                for gr, xi in ((host, xs[0]), (g, xs[1]))]
        torch.testing.assert_close(outs[1].cpu(), outs[0], rtol=1e-5, atol=1e-5)
        outs[0].square().sum().backward()
        outs[1].square().sum().backward()
        torch.testing.assert_close(xs[1].grad.cpu(), xs[0].grad, rtol=1e-5, atol=1e-5)
    # the fused GAT over both graphs, forward and backward (the GPU-built graph hands the
    # backward its GPU-built transpose), against the host graph on the GPU
    H, Fh = 2, 5
    gh = host.to("cuda")
    leaves = [t.cuda() for t in (torch.randn(n_src, H * Fh, generator=gen),
                                 torch.randn(n_src, H, generator=gen),
                                 torch.randn(n_dst, H, generator=gen))]
    res = []
    for gr in (gh, g):
        ins = [t.clone().requires_grad_() for t in leaves]
        out, attn = ops.gat_aggregate(gr, *ins)
        (out.square().sum() + attn.square().sum()).backward()
        res.append([out, attn] + [t.grad for t in ins])
    for a, b in zip(res[1], res[0]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert torch.equal(g.cpu().edge_index, ei.long())  # the host copy of a GPU-built graph


@pytest.mark.gpu
def test_gpu_build_names_out_of_range_ids():
    ei = torch.tensor([[0, 1, 5], [1, 2, 0]], device="cuda")
    with pytest.raises(ValueError, match=r"edge_index\[0\]\[2\] = 5 is out of range: node ids "
                                         r"must lie in \[0, 3\)"):
        spgnn.Graph(ei, 3)
