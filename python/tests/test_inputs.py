"""Zero copy (spgnn reads the caller's memory in place and writes where it is told) and bad
input (every entry point answers with an exception that names the argument and the problem)."""
import numpy as np
import pytest
import torch

import spgnn
from spgnn import _C, ops
from spgnn import nn as snn

from conftest import DEVICES, make_edge_index, randn, ref_gspmm, rel_err


# ---- zero copy -----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_arrays_are_viewed_not_copied(gen, device):
    x = randn(gen, 50, 7, device=device)
    addr, shape, dtype, dev, external = _C.view_info(x)
    assert addr == x.data_ptr() and shape == [50, 7] and dtype == "float32" and external
    assert dev == ("cpu" if device == "cpu" else f"cuda:{x.device.index}")
    # a view that starts inside another tensor's storage is read at its own address
    assert _C.view_info(x[3:])[0] == x[3:].data_ptr()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert _C.view_info(a)[0] == a.ctypes.data


@pytest.mark.parametrize("device", DEVICES)
def test_ops_read_inputs_in_place_and_write_outputs_where_told(gen, device):
    ei, n = make_edge_index("skewed", gen)
    g = spgnn.Graph(ei.to(device), n)
    x = randn(gen, n, 6, device=device)
    a = ops.copy_u_sum(g, x)
    x.mul_(2)  # the next call must see the new values: nothing was cached or copied
    # Compared to float rounding, not bit for bit: on the GPU a split row's partial sums meet
    # in atomics, whose order varies between runs (a cancelling row then differs in its last
    # bits, which allclose's absolute floor of 1e-8 does not forgive). A stale input would be
    # off by a factor of 2.
    assert rel_err(ops.copy_u_sum(g, x), 2 * a) < 1e-5
    # the extension writes into the output it is given, every element of it
    out = torch.full((n, 6), float("nan"), device=device)
    ptr = out.data_ptr()
    _C.gspmm(g.handle().untyped_storage().data_ptr(), "copy_u", "sum", x, None, out, None, None,
             spgnn._runtime.stream_of(x), "")
    assert out.data_ptr() == ptr and not torch.isnan(out).any()
    assert rel_err(out, 2 * a) < 1e-5


@pytest.mark.gpu
def test_gpu_op_allocates_only_its_output(gen):
    n, F = 4096, 1024  # x is 16 MiB: a copy of it would show in the peak
    ei = torch.randint(0, n, (2, 8 * n), generator=gen).cuda()
    g = spgnn.Graph(ei, n)
    x = torch.randn(n, F, device="cuda")
    ops.copy_u_sum(g, x)  # warm-up: graph statistics and schedules are cached on first use
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = ops.copy_u_sum(g, x)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - base <= out.numel() * 4 + 2**20


@pytest.mark.gpu
def test_ops_run_on_the_callers_stream(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei.cuda(), n)
    x = torch.randn(n, 64, device="cuda")
    ref = ops.copy_u_sum(g, x)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        # queued behind a long kernel on s: only correct if spgnn runs on s as well
        y = torch.randn(2048, 2048, device="cuda")
        for _ in range(10):
            y = y @ y / 2048
        x2 = x * 1.0
        out = ops.copy_u_sum(g, x2)
    s.synchronize()
    assert torch.allclose(out, ref)


# ---- bad input -----------------------------------------------------------------------------------

def test_bad_edge_index_is_named():
    with pytest.raises(TypeError, match="edge_index must have dtype int64"):
        spgnn.Graph(torch.zeros(2, 3), 4)
    with pytest.raises(ValueError, match=r"shape \[2, E\]"):
        spgnn.Graph(torch.zeros(3, 4, dtype=torch.int64), 4)
    with pytest.raises(ValueError, match=r"edge_index\[1\]\[2\] = 9 is out of range.*\[0, 4\)"):
        spgnn.Graph(torch.tensor([[0, 1, 2], [1, 2, 9]]), 4)
    with pytest.raises(ValueError, match=r"edge_index\[0\]\[1\] = -1"):
        spgnn.Graph(torch.tensor([[0, -1], [1, 2]]), 4)
    with pytest.raises(ValueError, match="num_nodes must be a non-negative int"):
        spgnn.Graph(torch.tensor([[0], [1]]), -3)
    with pytest.raises(TypeError, match="edge_weight must have dtype float32"):
        spgnn.Graph(torch.tensor([[0], [1]]), 2, edge_weight=torch.ones(1, dtype=torch.int64))
    with pytest.raises(ValueError, match="edge_weight has 2 rows"):
        spgnn.Graph(torch.tensor([[0], [1]]), 2, edge_weight=torch.ones(2))


def test_bad_op_arguments_are_named(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 4)
    E = ei.shape[1]
    cases = [
        (lambda: ops.gspmm(g, "u_pow_e", "sum", x, None), ValueError, "op must be one of"),
        (lambda: ops.gspmm(g, "copy_u", "median", x), ValueError, "reduce_op must be one of"),
        (lambda: ops.copy_u_sum(g, x[:-1]), ValueError, "lhs_data has .* rows, expected "
                                                         "num_src_nodes"),
        (lambda: ops.copy_u_sum(g, x.int()), TypeError, "lhs_data must have dtype float32"),
        (lambda: ops.edge_softmax(g, torch.ones(E, 1).double()), TypeError, "got float64"),
        (lambda: ops.u_mul_e_sum(g, x.half(), torch.ones(E).bfloat16()), TypeError,
         "lhs_data is torch.float16 but rhs_data is torch.bfloat16"),
        (lambda: ops.copy_u_sum(g, x.t().contiguous().t()), ValueError, "not contiguous"),
        (lambda: ops.copy_u_sum(g, x[:, 0]), ValueError, "lhs_data must be"),
        (lambda: ops.u_mul_e_sum(g, x, torch.ones(E, 3)), ValueError, "rhs_data has shape"),
        (lambda: ops.u_mul_e_sum(g, x, torch.ones(E + 1)), ValueError, "rhs_data has"),
        (lambda: ops.u_mul_e_sum(g, x, None), ValueError, "needs rhs_data"),
        (lambda: ops.u_mul_e_sum(g, x, torch.ones(E, dtype=torch.float64)), TypeError,
         "float32 but rhs_data is torch.float64|lhs_data is torch.float32"),
        (lambda: ops.gsddmm(g, "dot", x, x, "u", "w"), ValueError, "rhs_target must be"),
        (lambda: ops.gsddmm(g, "add", x, randn(gen, n, 5)), ValueError, "same feature shape"),
        (lambda: ops.gsddmm(g, "pow", x, x), ValueError, "op must be one of"),
        (lambda: ops.edge_softmax(g, torch.ones(E + 2)), ValueError, "logits has"),
        (lambda: ops.edge_softmax(g, torch.ones(E), norm_by="both"), ValueError, "norm_by"),
        (lambda: ops.maxk(x, 0), ValueError, "k must be an int"),
        (lambda: ops.maxk(x, 5), ValueError, "k must be an int"),
        (lambda: ops.gspmm(x, "copy_u", "sum", x), TypeError, "g must be a spgnn.Graph"),
        (lambda: ops.gat_aggregate(g, x, torch.ones(n, 2), torch.ones(n, 3)), ValueError,
         "heads disagree"),
        (lambda: ops.copy_u_sum(g, x, ), None, None),
    ]
    for fn, exc, msg in cases:
        if exc is None:
            fn()
            continue
        with pytest.raises(exc, match=msg):
            fn()


def test_bad_layer_inputs_are_named(gen):
    ei, n = make_edge_index("uniform", gen)
    x = randn(gen, n, 4)
    conv = snn.GCNConv(4, 3)
    with pytest.raises(ValueError, match=r"edge_index\[.\]\[\d+\] = \d+ is out of range"):
        conv(x[: n // 2], ei)  # ids beyond the rows of x
    with pytest.raises(ValueError, match="x must have 2 dimensions"):
        conv(x[:, 0], ei)
    with pytest.raises(TypeError, match="x must have dtype"):
        conv(x.long(), ei)
    with pytest.raises(ValueError, match="target nodes but x has"):
        conv(x[:-1], spgnn.Graph(ei, n))
    with pytest.raises(TypeError, match="edge_index must be"):
        conv(x, ei.tolist())
    with pytest.raises(ValueError, match="x has 5 features but in_channels is"):
        conv(randn(gen, n, 5), ei)  # wrong feature width, named (PyG fails inside torch.mm)


def test_tensors_an_op_cannot_read_are_named(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 4)
    with pytest.raises(ValueError, match="lhs_data is on meta"):
        ops.copy_u_sum(g, torch.empty(n, 4, device="meta"))
    with pytest.raises(ValueError, match="lhs_data is a torch.sparse_coo tensor"):
        ops.copy_u_sum(g, x.to_sparse())
    with pytest.raises(ValueError, match="x is on meta"):
        ops.maxk(torch.empty(n, 4, device="meta"), 2)
    # Layers hand x to torch's Linear first, which takes a sparse x, as PyG's layers do.
    conv = snn.GCNConv(4, 3)
    assert torch.allclose(conv(x.to_sparse(), ei), conv(x, ei), atol=1e-6)


def test_a_graph_too_large_to_allocate_is_named():
    # 2^50 rows of offsets cannot be allocated anywhere (2^53 bytes); the error says what to check.
    with pytest.raises(MemoryError, match=r"graph of 1125899906842624 target .*check num_nodes"):
        spgnn.Graph(torch.tensor([[0, 1], [1, 2]]), 2**50)
    # 2^40 (8 TiB of offsets) fits a 64-bit address space: a machine that overcommits memory
    # handed it out and the build's fill ran until the OOM killer ended the process (the GPU
    # machine, with and without edges). It is refused before anything is written.
    for ei in (torch.empty(2, 0, dtype=torch.int64), torch.tensor([[0], [1]], dtype=torch.int32)):
        with pytest.raises(MemoryError, match=r"graph of 1099511627776 target .*check num_nodes"):
            spgnn.Graph(ei, num_nodes=2**40)
    # Three targets over 2^40 sources build (nothing is stored per source), but a softmax over
    # each source's edges needs the transpose, with 2^40 rows: refused, named.
    g = spgnn.Graph(torch.tensor([[0, 5], [1, 2]]), size=(2**40, 3))
    with pytest.raises(MemoryError, match=r"transpose variant of a graph of 3 target and "
                                          r"1099511627776 source nodes"):
        ops.edge_softmax(g, torch.randn(2), norm_by="src")


def test_read_dataset_names_nonfinite_features_unless_allowed(tmp_path):
    n = 6
    np.save(tmp_path / "edge_index.npy", np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]], np.int64))
    x = np.ones((n, 3), np.float32)
    x[4, 2] = np.nan
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.array([0, 1, 0, 1, 0, 1], np.int64))
    for name, ids in (("train", [0, 1]), ("val", [2, 3]), ("test", [4, 5])):
        np.save(tmp_path / f"{name}_idx.npy", np.array(ids, np.int64))
    with pytest.raises(Exception, match=r"x\.npy.*feature x\[4, 2\] is NaN"):
        spgnn.io.read_dataset(str(tmp_path))
    d = spgnn.io.read_dataset(str(tmp_path), allow_nonfinite=True)
    assert torch.isnan(d.x[4, 2]) and int(torch.isnan(d.x).sum()) == 1
    # paths may be pathlib.Path; anything else, and a non-string row order, is named
    assert spgnn.io.read_dataset(tmp_path, allow_nonfinite=True).num_nodes == n
    assert spgnn.io.read_npy(tmp_path / "y.npy").tolist() == [0, 1, 0, 1, 0, 1]
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got NoneType"):
        spgnn.io.read_npy(None)
    with pytest.raises(TypeError, match="edge_index_rows must be"):
        spgnn.io.read_dataset(tmp_path, 1)


def test_node_counts_are_checked_not_truncated():
    ei = torch.tensor([[0, 1], [1, 2]])
    for bad in (torch.tensor(5.9), torch.tensor([5, 5]), torch.tensor(True), 5.0, True, "5"):
        with pytest.raises(ValueError, match="num_nodes must be a non-negative int"):
            spgnn.Graph(ei, bad)
    for bad in ((5.9, 5.9), ("5", "5"), (True, True), (np.float64(5), 5)):
        with pytest.raises(ValueError, match=r"size\[0\] must be a non-negative int"):
            spgnn.Graph(ei, size=bad)
    for bad in (5, (5, 5, 5), [5]):
        with pytest.raises(ValueError, match="size must be a pair"):
            spgnn.Graph(ei, size=bad)
    with pytest.raises(ValueError, match="too large"):
        spgnn.Graph(ei, 2 ** 64)
    # numpy's integers and one-element integer tensors are counts
    assert spgnn.Graph(ei, np.int64(5)).num_nodes == 5
    assert spgnn.Graph(ei, torch.tensor(5)).num_nodes == 5
    assert spgnn.Graph(ei, size=(np.int32(3), 4)).num_src_nodes == 3


def test_graphs_pickle_by_value(gen):
    """torch.save / pickle / deepcopy carry the edges, not the process-local handle: a graph
    loaded where another graph is live is still itself, with its edge order and weights."""
    import copy
    import io
    import pickle
    ei, n = make_edge_index("skewed", gen)
    ei = torch.cat([ei, ei[:, :7]], 1)  # duplicate edges, unsorted
    w = torch.rand(ei.shape[1], generator=gen) + 0.5
    g = spgnn.Graph(ei, n + 3, w)
    assert g.edge_order() is not None
    # the graph's edges and weights come back in the order they were given, the order the
    # ops read edge tensors in
    assert torch.equal(g.edge_index, ei) and torch.equal(g.edge_weight, w)
    x = randn(gen, n + 3, 5)
    want = ops.u_mul_e_sum(g, x, g.edge_weight)
    assert rel_err(want, ref_gspmm(ei, n + 3, "u_mul_e", "sum", x, w)) < 1e-6
    buf = io.BytesIO()
    torch.save(g, buf)
    blob = pickle.dumps(g)
    clone = copy.deepcopy(g)
    del g
    others = [spgnn.Graph(torch.tensor([[0, 0], [0, 1]]), 2) for _ in range(3)]  # reuse ids
    buf.seek(0)
    for h in (torch.load(buf, weights_only=False), pickle.loads(blob), clone):
        assert (h.num_src_nodes, h.num_dst_nodes, h.num_edges) == (n + 3, n + 3, ei.shape[1])
        assert torch.equal(h.edge_order(), spgnn.Graph(ei, n + 3, w).edge_order())
        assert torch.equal(h.edge_weight, spgnn.Graph(ei, n + 3, w).edge_weight)
        assert torch.allclose(ops.u_mul_e_sum(h, x, h.edge_weight), want)
    assert others[0].num_edges == 2


def test_read_npy_names_paths_it_cannot_read(tmp_path):
    p = tmp_path / "a.npy"
    np.save(p, np.arange(3, dtype=np.int64))
    with pytest.raises(ValueError, match="path contains a NUL character"):
        spgnn.io.read_npy(str(p) + "\0junk")
    with pytest.raises(ValueError, match="not a regular file"):
        spgnn.io.read_npy(tmp_path)
    if __import__("os").path.exists("/dev/zero"):
        with pytest.raises(ValueError, match="not a regular file"):
            spgnn.io.read_npy("/dev/zero")
    assert spgnn.io.read_npy(p).tolist() == [0, 1, 2]


def test_handles_cannot_be_forged():
    with pytest.raises((ValueError, TypeError), match="graph handle"):
        torch.ops.spgnn.gspmm(torch.arange(5), "copy_u", "sum", torch.ones(5, 2), None, 5, "")
    with pytest.raises((ValueError, TypeError), match="graph handle"):
        torch.ops.spgnn.gspmm(torch.ones(5), "copy_u", "sum", torch.ones(5, 2), None, 5, "")


@pytest.mark.gpu
def test_device_mismatch_is_named(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)  # on the CPU
    with pytest.raises(ValueError, match="lhs_data is on cuda"):
        ops.copy_u_sum(g, torch.ones(n, 3, device="cuda"))
    with pytest.raises(TypeError, match="float64 on cuda"):
        ops.copy_u_sum(g.to("cuda"), torch.ones(n, 3, device="cuda", dtype=torch.float64))
    with pytest.raises(ValueError, match="is on cuda:0 but the graph is on cpu|on cpu"):
        snn.GCNConv(3, 2).cuda()(torch.ones(n, 3, device="cuda"), ei)


def _no_signature_dump(excinfo):
    # nanobind's answer to an int past int64: a dump of the signature, naming no argument
    assert "incompatible function arguments" not in str(excinfo.value)


def test_ints_past_int64_are_named_before_the_core_sees_them(gen, tmp_path):
    """Every public entry point that hands a Python int to the compiled core (or to torch's
    shapes) names an int past int64 instead of failing inside nanobind or torch.empty."""
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 8)
    values, columns = ops.maxk(x, 3)
    huge = 2**70
    cases = [
        (lambda: spgnn.Graph(ei, huge), ValueError, "num_nodes = .* is too large"),
        (lambda: spgnn.Graph(ei, size=(n, huge)), ValueError, r"size\[1\] = .* is too large"),
        (lambda: spgnn.partition(ei, huge, num_nodes=n), ValueError, "parts must be a positive"),
        (lambda: spgnn.partition(ei, 2, seed=huge, num_nodes=n), ValueError, "seed must be"),
        (lambda: spgnn.io.read_partition(tmp_path, huge), ValueError, "part must be a non-neg"),
        (lambda: ops.maxk(x, huge), ValueError, r"k must be an int in \[1, F = 8\]"),
        (lambda: ops.maxk(x, True), ValueError, r"k must be an int in \[1, F = 8\]"),
        (lambda: ops.cbsr_to_dense(values, columns, huge), ValueError,
         r"num_features must be an int in \[1, 65536\]"),
        (lambda: ops.cbsr_spgemm(g, values, columns, huge), ValueError, "num_features must be"),
        (lambda: ops.gat_aggregate(g, x, torch.ones(n, 1), torch.ones(n, 1), strategy=3),
         TypeError, "strategy must be a string"),
        (lambda: g.cuda(huge), ValueError, "device must be a CUDA device index"),
        (lambda: g.cuda(300), ValueError, "device must be a CUDA device index"),  # not GPU 44
        (lambda: snn.GCNConv(huge, 3), ValueError, "GCNConv: in_channels = .* is too large"),
        (lambda: snn.SAGEConv(4, huge), ValueError, "SAGEConv: out_channels = .* is too large"),
        (lambda: snn.GATConv(4, 3, heads=huge), ValueError, "GATConv: heads must be a positive"),
        (lambda: snn.MaxK(huge), ValueError, "MaxK: k must be a positive int"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg) as e:
            fn()
        _no_signature_dump(e)
    # numpy's integers are ints
    assert ops.maxk(x, np.int64(3))[0].shape == (n, 3)
    assert spgnn.partition(ei, np.int64(2), num_nodes=n).owner.shape == (n,)
    assert snn.GATConv(8, 2, heads=np.int64(2))(x, ei).shape == (n, 4)


def test_cbsr_errors_name_the_python_arguments(gen):
    """The CBSR ops check their operands in Python: the core's messages name its own operands
    ('kept.index', 'x.index', 'kept.k')."""
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 8)
    values, columns = ops.maxk(x, 3)
    bad = columns.clone()
    bad[2, 1] = 9
    cases = [
        (lambda: ops.cbsr_to_dense(values, bad, 8), r"columns\[2, 1\] = 9 is outside "
                                                    r"\[0, num_features = 8\)"),
        (lambda: ops.cbsr_spgemm(g, values, bad, 8), r"columns\[2, 1\] = 9 is outside "
                                                     r"\[0, num_features = 8\)"),
        (lambda: ops.cbsr_sspmm(g, randn(gen, n, 8), values, bad),
         r"columns\[2, 1\] = 9 is outside \[0, d_out's width F = 8\)"),
        (lambda: ops.cbsr_to_dense(values, columns, 2), "values has k = 3 columns but "
                                                        "num_features = 2"),
        (lambda: ops.cbsr_sspmm(g, randn(gen, n, 2), values, columns),
         "values has k = 3 columns but d_out's width F = 2"),
        (lambda: ops.cbsr_to_dense(values, columns, 0), "num_features must be an int"),
        (lambda: ops.cbsr_to_dense(values, columns, 8.0), "num_features must be an int"),
        (lambda: ops.cbsr_spgemm(g, values, columns, -1), "num_features must be an int"),
    ]
    for fn, msg in cases:
        with pytest.raises(ValueError, match=msg) as e:
            fn()
        assert "kept." not in str(e.value) and "x.index" not in str(e.value)
    with pytest.raises(TypeError, match=r"columns must have dtype uint16 for num_features = 300"):
        ops.cbsr_to_dense(values, columns, 300)
    # uint16 columns (no max or comparison in torch): values past 32767 read right
    v = torch.ones(4, 2)
    c = torch.tensor([[1, 35000], [0, 39999], [2, 3], [5, 6]], dtype=torch.int32).to(torch.uint16)
    dense = ops.cbsr_to_dense(v, c, 40000)
    assert dense.shape == (4, 40000) and float(dense[1, 39999]) == 1.0
    c[3, 1] = 45000
    with pytest.raises(ValueError, match=r"columns\[3, 1\] = 45000 is outside"):
        ops.cbsr_to_dense(v, c, 40000)
    with pytest.raises(ValueError, match=r"columns\[0, 1\] = 35000 is outside"):
        ops.cbsr_to_dense(v, c, 30000)


def test_scalar_edge_data_is_named(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 4)
    with pytest.raises(ValueError, match=r"logits must be \[E\] or \[E, H\].*0-d tensor"):
        ops.edge_softmax(g, torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"rhs_data must be \[E\] or \[E, D\].*0-d tensor"):
        ops.u_mul_e_sum(g, x, torch.tensor(2.0))
    with pytest.raises(ValueError, match=r"rhs_data must be \[E\].*0-d tensor"):
        ops.copy_e_sum(g, torch.tensor(2.0))
    with pytest.raises(ValueError, match=r"e must be \[E\].*0-d tensor"):
        ops.cbsr_spgemm(g, *ops.maxk(x, 2), 4, torch.tensor(1.0))


def test_float_hyperparameters_are_checked_and_named(gen):
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)
    x = randn(gen, n, 4)
    cases = [
        (lambda: snn.GATConv(4, 3, dropout="0.5"), r"GATConv: dropout must be a real number in "
                                                   r"\[0.0, 1.0\), got '0.5'"),
        (lambda: snn.GATConv(4, 3, dropout=1.0), "GATConv: dropout must be"),
        (lambda: snn.GATConv(4, 3, dropout=None), "GATConv: dropout must be"),
        (lambda: snn.GATConv(4, 3, negative_slope="0.2"), "GATConv: negative_slope must be a "
                                                          "finite real number, got '0.2'"),
        (lambda: snn.GATConv(4, 3, negative_slope=float("nan")), "GATConv: negative_slope"),
        (lambda: snn.GATConv(4, 3, heads=True), "GATConv: heads must be"),
        (lambda: snn.GINConv(torch.nn.Linear(4, 4), eps="0"), "GINConv: eps must be a finite"),
        (lambda: snn.GINConv(torch.nn.Linear(4, 4), eps=float("inf")), "GINConv: eps must be"),
        (lambda: ops.gat_aggregate(g, x, torch.ones(n, 1), torch.ones(n, 1), attn_dropout="0.5"),
         r"attn_dropout must be a real number in \[0.0, 1.0\)"),
        (lambda: ops.gat_aggregate(g, x, torch.ones(n, 1), torch.ones(n, 1), negative_slope="a"),
         "negative_slope must be a finite real number"),
        (lambda: spgnn.partition(ei, 2, imbalance=True, num_nodes=n), "imbalance must be"),
    ]
    for fn, msg in cases:
        with pytest.raises(ValueError, match=msg):
            fn()
    # numpy's floats and a one-element eps tensor are numbers
    assert snn.GATConv(4, 3, dropout=np.float32(0.25), negative_slope=np.float64(0.1)).dropout \
        == 0.25
    assert snn.GINConv(torch.nn.Linear(4, 4), eps=torch.tensor(0.5)).initial_eps == 0.5


def test_input_dtype_must_match_the_layer_weights(gen):
    """A float64 (or half) x into a float32 layer is named, as PyG refuses it too (inside
    torch's matmul); a float64 layer takes float64 x, and torch.autocast casts itself."""
    ei, n = make_edge_index("uniform", gen)
    x = randn(gen, n, 4)
    layers = {"GCNConv": lambda: snn.GCNConv(4, 3), "SAGEConv": lambda: snn.SAGEConv(4, 3),
              "SAGEConv ": lambda: snn.SAGEConv(4, 3, aggr="max"),
              "GINConv": lambda: snn.GINConv(torch.nn.Linear(4, 3)),
              "GINConv  ": lambda: snn.GINConv(torch.nn.Sequential(torch.nn.Linear(4, 2)))}
    for name, make in layers.items():
        cls = name.strip()
        for dt in (torch.float64, torch.float16):
            with pytest.raises(TypeError, match=f"{cls}: x is {str(dt)[6:]} but the layer's "
                                                "weights are float32"):
                make()(x.to(dt), ei)
        assert make().double()(x.double(), ei).dtype == torch.float64
        with torch.autocast("cpu", dtype=torch.bfloat16):
            make()(x.bfloat16(), ei)
    with pytest.raises(TypeError, match="GATConv: x is float64, but spgnn's attention kernels "
                                        "take float32"):
        snn.GATConv(4, 3)(x.double(), ei)


def test_sparse_x_is_taken_or_named(gen):
    """A sparse x works where a Linear reads it first (torch's and PyG's layers take one), also
    in a widening layer, whose aggregation otherwise comes first; an aggregation that reads x
    itself names it."""
    ei, n = make_edge_index("uniform", gen)
    x = randn(gen, n, 3)
    for layer in (snn.GCNConv(3, 8), snn.SAGEConv(3, 8), snn.SAGEConv(3, 8, aggr="sum")):
        for sx in (x.to_sparse(), x.to_sparse_csr()):
            assert torch.allclose(layer(sx, ei), layer(x, ei), atol=1e-5)
    with pytest.raises(ValueError, match="SAGEConv: x is a torch.sparse_coo tensor, but "
                                         "aggr='max' reads x itself"):
        snn.SAGEConv(3, 8, aggr="max")(x.to_sparse(), ei)
    with pytest.raises(ValueError, match="GINConv: x is a torch.sparse_csr tensor"):
        snn.GINConv(torch.nn.Linear(3, 3))(x.to_sparse_csr(), ei)
    with pytest.raises(ValueError, match="MaxK: x is a torch.sparse_coo tensor"):
        snn.MaxK(2)(x.to_sparse())
    for fn in (lambda t: ops.dropout(t, 0.5), snn.Dropout(0.5)):
        with pytest.raises(ValueError, match="dropout: input is a torch.sparse_coo tensor"):
            fn(x.to_sparse())
    # meta tensors (a model built on the meta device) get torch's dropout, as torch.nn.Dropout
    y = ops.dropout(torch.empty(n, 3, device="meta"), 0.5)
    assert y.device.type == "meta" and y.shape == (n, 3)
    # GINConv's narrowing Linear runs first: a sparse x is taken there
    gin = snn.GINConv(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
    assert torch.allclose(gin(x.to_sparse(), ei), gin(x, ei), atol=1e-5)


def test_argument_checks_trace_under_torch_compile(gen):
    """The Python-side checks read sizes, not data, under torch.compile: with dynamic shapes
    num_features is symbolic, and CBSR columns are range-checked in eager mode only (fake
    tensors hold no values)."""
    ei, n = make_edge_index("uniform", gen)
    g = spgnn.Graph(ei, n)

    def f(x, d_out):
        values, columns = ops.maxk(x, 3)
        out = ops.cbsr_spgemm(g, values, columns, x.shape[1])
        out = out.sum() + ops.cbsr_sspmm(g, d_out, values, columns).sum()
        out = out + ops.cbsr_to_dense(values, columns, x.shape[1]).sum()
        return out + ops.edge_softmax(g, ops.u_dot_v(g, x, x)).sum()

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for F in (8, 12):
        x, d_out = randn(gen, n, F), randn(gen, n, F)
        assert torch.allclose(compiled(x, d_out), f(x, d_out), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_device_seed_is_checked(gen, device):
    """The seed a kernel reads on the device (what makes a captured dropout draw a new mask per
    replay) must be one int64 on the input's CUDA device; anything else is named, not read."""
    x = randn(gen, 8, 4, device=device)
    out = torch.empty_like(x)
    st = spgnn._runtime.stream_of(x)
    bad = [torch.zeros(2, dtype=torch.int64, device=device),
           torch.zeros(1, dtype=torch.float32, device=device)]
    if device == "cpu":  # a CPU input has no device to read a seed on
        bad.append(torch.zeros(1, dtype=torch.int64))
    else:
        bad.append(torch.zeros(1, dtype=torch.int64))  # on the host, for a GPU input
    for seed in bad:
        with pytest.raises(ValueError, match="device_seed"):
            _C.dropout(x, 0.5, 1, out, st, seed)
    ei, n = make_edge_index("uniform", gen, n=8)
    g = spgnn.Graph(ei.to(device), n)
    feat, el, er = randn(gen, n, 4, device=device), randn(gen, n, 1, device=device), \
        randn(gen, n, 1, device=device)
    o, attn = torch.empty(n, 4, device=device), torch.empty(g.num_edges, 1, device=device)
    for seed in bad:
        with pytest.raises(ValueError, match="device_seed"):
            _C.gat_aggregate(g.handle().untyped_storage().data_ptr(), feat, el, er, 1, 0.2, 0.5,
                             1, o, attn, st, "", seed)
