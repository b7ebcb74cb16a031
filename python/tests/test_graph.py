"""spgnn.Graph: PyG's orientation, every edge kept, the caller's edge order, other inputs
(scipy, torch sparse), devices, lifetime of the compiled graphs, and the edge_index cache."""
import gc

import numpy as np
import pytest
import torch

import spgnn
from spgnn import ops

from conftest import DEVICES, make_edge_index, randn, ref_gspmm, rel_err


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
