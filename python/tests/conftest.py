"""Shared fixtures: fresh random graphs of every awkward shape, devices, and pure-torch
references of each op (computed in float64)."""
import os
import random
import zlib

import pytest
import torch

import spgnn

SEED = int(os.environ.get("SPGNN_TEST_SEED", random.randrange(2**31)))
# pytest-xdist's workers (scripts/test.sh) start after this runs in the controller and inherit
# its environment: one session seed for all of them, the one the header prints.
os.environ["SPGNN_TEST_SEED"] = str(SEED)


def pytest_report_header(config):
    cuda = torch.cuda.is_available() and spgnn.with_cuda
    return [f"spgnn test seed: {SEED} (replay with SPGNN_TEST_SEED={SEED})",
            f"torch {torch.__version__}, spgnn built with CUDA: {spgnn.with_cuda}, "
            f"GPU tests: {'run' if cuda else 'SKIPPED (no GPU)'}"]


HAS_GPU = torch.cuda.is_available() and spgnn.with_cuda
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="no GPU (or spgnn built without CUDA)")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
    config.addinivalue_line("markers", "slow: long-running (accuracy) tests")


@pytest.fixture
def gen(request):
    """A generator seeded from the session seed and the test's name (printed on failure)."""
    g = torch.Generator().manual_seed(SEED ^ zlib.crc32(request.node.nodeid.encode()))
    return g


GRAPH_KINDS = ["uniform", "skewed", "empty_rows", "loops_dups", "single", "no_edges",
               "sorted_by_dst"]


def make_edge_index(kind: str, gen: torch.Generator, n: int = 60):
    """(edge_index [2, E] int64 in PyG's orientation, n) for a graph kind."""
    if kind == "uniform":
        E = 4 * n
        return torch.randint(0, n, (2, E), generator=gen), n
    if kind == "skewed":
        # a power law on targets and one hub receiving a third of all edges
        E = 6 * n
        p = 1.0 / torch.arange(1, n + 1, dtype=torch.float64) ** 1.5
        dst = torch.multinomial(p, E, replacement=True, generator=gen)
        dst[: E // 3] = 3
        src = torch.randint(0, n, (E,), generator=gen)
        return torch.stack([src, dst]), n
    if kind == "empty_rows":
        # edges only into even targets: half the rows are empty
        E = 3 * n
        dst = 2 * torch.randint(0, n // 2, (E,), generator=gen)
        src = torch.randint(0, n, (E,), generator=gen)
        return torch.stack([src, dst]), n
    if kind == "loops_dups":
        base = torch.randint(0, n, (2, 2 * n), generator=gen)
        loops = torch.arange(0, n, 3).repeat(2, 1)
        return torch.cat([base, base[:, :n // 2], loops, loops[:, :5]], dim=1), n
    if kind == "single":
        return torch.zeros(2, 3, dtype=torch.int64), 1
    if kind == "no_edges":
        return torch.zeros(2, 0, dtype=torch.int64), 7
    if kind == "sorted_by_dst":
        ei = torch.randint(0, n, (2, 3 * n), generator=gen)
        key = ei[1] * n + ei[0]
        return ei[:, torch.argsort(key)], n
    raise ValueError(kind)


def randn(gen, *shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype).to(device)


# ---- pure-torch references (float64) -------------------------------------------------------------

def ref_messages(ei, op, u, e):
    """The float64 message of every edge, [E, F]."""
    src = ei[0]
    if u is not None:
        u = u.double()
    if e is not None:
        e = e.double()
        if e.dim() == 1:
            e = e.unsqueeze(1)
    if op == "copy_u":
        return u[src]
    if op == "copy_e":
        return e
    x = u[src]
    return {"u_add_e": x + e, "u_sub_e": x - e, "u_mul_e": x * e, "u_div_e": x / e}[op]


def ref_gspmm(ei, n_dst, op, reduce, u, e):
    msg = ref_messages(ei, op, u, e)
    dst = ei[1]
    E, F = msg.shape
    out = torch.zeros(n_dst, F, dtype=torch.float64, device=msg.device)
    deg = torch.zeros(n_dst, dtype=torch.float64, device=msg.device).index_add_(
        0, dst, torch.ones(E, dtype=torch.float64, device=msg.device))
    if reduce in ("sum", "mean"):
        out = out.index_add(0, dst, msg)
        if reduce == "mean":
            out = out / deg.clamp(min=1).unsqueeze(1)
        return out
    red = "amax" if reduce == "max" else "amin"
    out = out.scatter_reduce(0, dst.unsqueeze(1).expand(-1, F), msg, red, include_self=False)
    return torch.where(deg.unsqueeze(1) > 0, out, torch.zeros_like(out))


def ref_selected_sum(ei, n_dst, op, reduce, u, e):
    """For max/min: a function of (u, e) that sums, per output, the messages that the reduction
    selects at (u, e), with that selection held fixed. Its gradient at |u|, |e| and |upstream| is
    the sum of the |terms| that make up the max/min gradient, the scale its error is held to."""
    msg = ref_messages(ei, op, u, e)
    out = ref_gspmm(ei, n_dst, op, reduce, u, e)
    mask = (msg == out[ei[1]]).double()

    def fn(uu, ee):
        m = ref_messages(ei, op, uu, ee) * mask
        return torch.zeros_like(out).index_add(0, ei[1], m)
    return fn


def ref_gsddmm(ei, op, lhs, rhs, lt, rt):
    def pick(x, t):
        if x is None:
            return None
        x = x.double()
        return x if t == "e" else x[ei[0] if t == "u" else ei[1]]
    a, b = pick(lhs, lt), pick(rhs, rt)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "div": lambda: a / b, "dot": lambda: (a * b).sum(1, keepdim=True),
            "copy_lhs": lambda: a, "copy_rhs": lambda: b}[op]()


def ref_edge_softmax(ei, n_dst, s):
    s = s.double()
    s2 = s.reshape(s.shape[0], s[0].numel() if s.shape[0] else (s.shape[1] if s.dim() > 1 else 1))
    dst = ei[1].unsqueeze(1).expand(-1, s2.shape[1])
    mx = torch.full((n_dst, s2.shape[1]), -float("inf"), dtype=torch.float64,
                    device=s.device).scatter_reduce(0, dst, s2, "amax", include_self=True)
    ex = torch.exp(s2 - mx.gather(0, dst))
    den = torch.zeros(n_dst, s2.shape[1], dtype=torch.float64, device=s.device).scatter_add(
        0, dst, ex)
    return (ex / den.gather(0, dst)).reshape(s.shape)


def rel_err(a, b, scale=None):
    """||a - b|| / ||b||, or over ``scale`` when that is larger: a result that cancels (a
    softmax gradient, a sum of terms of both signs) is only as accurate as the size of the
    terms that produced it, so its error is measured against their norm."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    if a.shape != b.shape:
        raise AssertionError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.numel() == 0:
        return 0.0
    if torch.isnan(a).any() or torch.isnan(b).any():
        return float("inf")
    den = float(b.norm())
    if scale is not None:
        den = max(den, float(scale.detach().double().norm()) if torch.is_tensor(scale) else scale)
    return float((a - b).norm()) / den if den > 0 else float(a.norm())
