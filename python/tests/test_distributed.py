"""spgnn.distributed.HaloExchange on 2 and 3 CPU processes over gloo (and on 2 GPUs over NCCL
when there are two): on every part of a METIS
partition (written by `spgnn partition` from a dataset directory), an aggregation of
[x_owned; halo] over the local graph equals the whole graph's on the owned rows, forward and
backward (the gradient of each owned row sums its own and its peers' contributions); bad
launches are named."""
import os
import subprocess
import sys
import zlib

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import spgnn
from spgnn import nn as snn
from spgnn import ops
from spgnn.distributed import DistGraph, HaloExchange, all_reduce_gradients

CLI = os.environ.get("SPGNN_CLI", os.path.join(os.path.dirname(spgnn.__file__), "..", "..",
                                                "spgnn"))


def _leave():
    """A worker's clean exit: every rank past its last collective before any tears down, and
    no interpreter shutdown after it (torch 2.15's gloo threads aborted the process there now
    and then: "terminate called without an active exception")."""
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _worker(rank, world, init, backend, pdir, x, up, want_out, want_grad, errors):
    try:
        dev = torch.device(f"cuda:{rank}" if backend == "nccl" else "cpu")
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
        p = spgnn.io.read_partition(pdir, rank)
        ex = HaloExchange(p)
        graph = p.graph.to(dev)
        own = p.global_ids[: p.num_owned]
        for reduce in ("sum", "mean"):
            xo = x[own].to(dev).requires_grad_()
            out = ops.gspmm(graph, "copy_u", reduce, ex(xo))
            torch.testing.assert_close(out.cpu(), want_out[reduce][own], rtol=1e-5, atol=1e-6)
            (out * up[own].to(dev)).sum().backward()
            torch.testing.assert_close(xo.grad.cpu(), want_grad[reduce][own], rtol=1e-5,
                                       atol=1e-6)
        # a rank given another rank's part is refused
        wrong = spgnn.io.read_partition(pdir, (rank + 1) % world)
        with pytest.raises(ValueError, match="rank"):
            HaloExchange(wrong)
        _leave()
    except BaseException as e:  # noqa: BLE001 -- reported to the parent
        errors.put(f"rank {rank}: {type(e).__name__}: {e}")


@pytest.mark.parametrize("backend,world", [
    ("gloo", 2), ("gloo", 3),
    pytest.param("nccl", 2, marks=[pytest.mark.gpu, pytest.mark.skipif(
        torch.cuda.device_count() < 2, reason="NCCL test needs 2 GPUs")])])
def test_halo_exchange_matches_whole_graph(tmp_path, backend, world):
    if not os.path.exists(CLI):
        pytest.skip(f"spgnn CLI not found at {CLI} (set SPGNN_CLI)")
    ds = tmp_path / "ds"
    pdir = tmp_path / "parts"
    subprocess.run([CLI, "generate", "planted", "--n", "300", "--classes", "3", "--seed", "5",
                    "-o", str(ds)], check=True, capture_output=True)
    subprocess.run([CLI, "partition", str(ds), "-o", str(pdir), "--parts", str(world)],
                   check=True, capture_output=True)
    d = spgnn.io.read_dataset(str(ds))
    g = spgnn.Graph(d.edge_index, d.num_nodes)
    gen = torch.Generator().manual_seed(world)
    x = torch.randn(d.num_nodes, 5, generator=gen)
    up = torch.randn(d.num_nodes, 5, generator=gen)
    want_out, want_grad = {}, {}
    for reduce in ("sum", "mean"):
        xg = x.clone().requires_grad_()
        out = ops.gspmm(g, "copy_u", reduce, xg)
        (out * up).sum().backward()
        want_out[reduce], want_grad[reduce] = out.detach(), xg.grad
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    init = f"file://{tmp_path}/rendezvous"
    procs = [ctx.Process(target=_worker, args=(r, world, init, backend, str(pdir), x, up,
                                               want_out, want_grad, errors))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
    msgs = []
    while not errors.empty():
        msgs.append(errors.get())
    assert not alive, "a rank hung"
    assert not msgs, "\n".join(msgs)
    assert all(p.exitcode == 0 for p in procs)


def _stale_worker(rank, world, init, pdir, xs, ups, want_out, want_grad, errors):
    try:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        p = spgnn.io.read_partition(pdir, rank)
        ex = HaloExchange(p, stale=True)
        graph = p.graph
        own = p.global_ids[: p.num_owned]
        halo_ids = p.global_ids[p.num_owned:]

        def local(xo, halo, up):
            """out over [xo; halo] and d(out . up)/d xo with the halo held fixed."""
            xo = xo.detach().requires_grad_()
            out = ops.gspmm(graph, "copy_u", "sum", torch.cat([xo, halo]))
            g, = torch.autograd.grad((out * up).sum(), xo)
            return out.detach(), g

        outs, grads = [], []
        for x, up in zip(xs, ups):
            ex.begin_step()
            xo = x[own].clone().requires_grad_()
            out = ops.gspmm(graph, "copy_u", "sum", ex(xo))
            (out * up[own]).sum().backward()
            outs.append(out.detach())
            grads.append(xo.grad)
        # Step 1 is exact.
        torch.testing.assert_close(outs[0], want_out[own], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(grads[0], want_grad[own], rtol=1e-5, atol=1e-6)
        # Step 2 reads step 1's halo rows, and adds the halo gradients peers computed in step 1
        # (the exact step-1 gradient minus its local part) to its own local part.
        out2, local2 = local(xs[1][own], xs[0][halo_ids], ups[1][own])
        _, local1 = local(xs[0][own], xs[0][halo_ids], ups[0][own])
        torch.testing.assert_close(outs[1], out2, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(grads[1], local2 + (want_grad[own] - local1), rtol=1e-5,
                                   atol=1e-5)
        # Without autograd (evaluation) the exchange is exact and leaves the pairing alone.
        with torch.no_grad():
            ev = ops.gspmm(graph, "copy_u", "sum", ex(xs[0][own]))
        torch.testing.assert_close(ev, want_out[own], rtol=1e-5, atol=1e-6)
        ex.wait_all()
        _leave()
    except BaseException as e:  # noqa: BLE001 -- reported to the parent
        errors.put(f"rank {rank}: {type(e).__name__}: {e}")


@pytest.mark.parametrize("world", [2, 3])
def test_stale_halos_use_the_previous_step(tmp_path, world):
    """PipeGCN's stale halos: the first step is exact; the second aggregates the first step's
    halo rows and receives the first step's halo gradients."""
    if not os.path.exists(CLI):
        pytest.skip(f"spgnn CLI not found at {CLI} (set SPGNN_CLI)")
    ds, pdir = tmp_path / "ds", tmp_path / "parts"
    subprocess.run([CLI, "generate", "planted", "--n", "300", "--classes", "3", "--seed", "7",
                    "-o", str(ds)], check=True, capture_output=True)
    subprocess.run([CLI, "partition", str(ds), "-o", str(pdir), "--parts", str(world)],
                   check=True, capture_output=True)
    d = spgnn.io.read_dataset(str(ds))
    g = spgnn.Graph(d.edge_index, d.num_nodes)
    gen = torch.Generator().manual_seed(100 + world)
    xs = [torch.randn(d.num_nodes, 4, generator=gen) for _ in range(2)]
    ups = [torch.randn(d.num_nodes, 4, generator=gen) for _ in range(2)]
    xg = xs[0].clone().requires_grad_()
    out = ops.gspmm(g, "copy_u", "sum", xg)
    (out * ups[0]).sum().backward()
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    init = f"file://{tmp_path}/rendezvous"
    procs = [ctx.Process(target=_stale_worker, args=(r, world, init, str(pdir), xs, ups,
                                                     out.detach(), xg.grad, errors))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
    msgs = []
    while not errors.empty():
        msgs.append(errors.get())
    assert not alive, "a rank hung"
    assert not msgs, "\n".join(msgs)
    assert all(p.exitcode == 0 for p in procs)


def test_needs_an_initialised_group(tmp_path):
    if not os.path.exists(CLI):
        pytest.skip(f"spgnn CLI not found at {CLI} (set SPGNN_CLI)")
    pdir = tmp_path / "parts"
    subprocess.run([CLI, "partition", "rmat:6", "-o", str(pdir), "--parts", "2"], check=True,
                   capture_output=True)
    p = spgnn.io.read_partition(str(pdir), 0)
    assert p.num_local >= p.num_owned > 0
    with pytest.raises(RuntimeError, match="init_process_group"):
        HaloExchange(p)
    with pytest.raises(ValueError, match="part"):
        spgnn.io.read_partition(str(pdir), 2)


# ---- layers on a DistGraph: the whole graph's result on every part ------------------------------

class _Two(torch.nn.Module):
    def __init__(self, conv1, conv2, act=None):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2
        self.act = act or torch.nn.ReLU()

    def forward(self, x, g):
        return self.conv2(self.act(self.conv1(x, g)), g)


def _gin(i, o, **kw):
    return snn.GINConv(torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(),
                                           torch.nn.Linear(o, o)), **kw)


# 12 -> 16 -> 5 features: the first layer aggregates before its transform, the second after it
# (and GIN's MLP narrows first there), so both sides of each layer cross the network.
MODELS = {
    "gcn": lambda: _Two(snn.GCNConv(12, 16), snn.GCNConv(16, 5)),
    "gcn_improved": lambda: _Two(snn.GCNConv(12, 16, improved=True),
                                 snn.GCNConv(16, 5, improved=True)),
    "gcn_noloops": lambda: _Two(snn.GCNConv(12, 16, add_self_loops=False),
                                snn.GCNConv(16, 5, add_self_loops=False)),
    "gcn_unnormalized": lambda: _Two(snn.GCNConv(12, 16, normalize=False),
                                     snn.GCNConv(16, 5, normalize=False)),
    "sage_mean": lambda: _Two(snn.SAGEConv(12, 16), snn.SAGEConv(16, 5)),
    "sage_sum": lambda: _Two(snn.SAGEConv(12, 16, aggr="sum"), snn.SAGEConv(16, 5, aggr="sum")),
    "sage_max": lambda: _Two(snn.SAGEConv(12, 16, aggr="max"),
                             snn.SAGEConv(16, 5, aggr="max", normalize=True)),
    "sage_min": lambda: _Two(snn.SAGEConv(12, 16, aggr="min"), snn.SAGEConv(16, 5, aggr="min")),
    "sage_maxk": lambda: _Two(snn.SAGEConv(12, 16), snn.SAGEConv(16, 5), snn.MaxK(4)),
    "gin": lambda: _Two(_gin(12, 16), _gin(16, 5, train_eps=True)),
    "gat": lambda: _Two(snn.GATConv(12, 8, heads=2), snn.GATConv(16, 5)),
    # one head of 4 -> 5 attends over x itself (its halo exchange carries x)
    "gat_attend_x": lambda: _Two(snn.GATConv(12, 2, heads=2), snn.GATConv(4, 5)),
    "gat_mean_noloops_residual": lambda: _Two(
        snn.GATConv(12, 16, heads=3, concat=False, add_self_loops=False, residual=True),
        snn.GATConv(16, 5, heads=2, concat=False)),
}


def _model_worker(rank, world, init, pdir, x, up, states, want, errors):
    try:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        p = spgnn.io.read_partition(pdir, rank)
        own = p.global_ids[: p.num_owned]
        for name, overlap in [(m, o) for m in MODELS for o in (True, False)]:
            build = MODELS[name]
            g = DistGraph(p, overlap=overlap)
            name = f"{name} (overlap={overlap})"
            model = build()
            model.load_state_dict(states[name.split(" ")[0]])
            xo = x[own].clone().requires_grad_()
            out = model(xo, g)
            w_out, w_gx, w_grads = want[name.split(" ")[0]]
            _close(out.detach(), w_out[own], f"{name} forward")
            (out * up[own]).sum().backward()
            all_reduce_gradients(model)
            _close(xo.grad, w_gx[own], f"{name} d/dx")
            for pname, prm in model.named_parameters():
                _close(prm.grad, w_grads[pname], f"{name} d/d{pname}")
        with pytest.raises(NotImplementedError, match="edge_weight"):
            snn.GCNConv(12, 4)(x[own], DistGraph(p), torch.ones(p.graph.num_edges))
    except BaseException as e:  # noqa: BLE001 -- reported to the parent
        errors.put(f"rank {rank}: {type(e).__name__}: {e}")
        return
    _leave()


def _close(got, want, what):
    # float32 sums in another order: the tolerance scales with the largest value compared.
    scale = max(1.0, float(want.abs().max())) if want.numel() else 1.0
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * scale,
                               msg=lambda m: f"{what}: {m}")


def _spawn(target, world, tmp_path, *args):
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    init = f"file://{tmp_path}/rendezvous"
    procs = [ctx.Process(target=target, args=(r, world, init) + args + (errors,))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
    msgs = []
    while not errors.empty():
        msgs.append(errors.get())
    assert not alive, "a rank hung"
    assert not msgs, "\n".join(msgs)
    assert [p.exitcode for p in procs] == [0] * world


def _check_parts_against_whole(world, tmp_path, pdir, graph, n, gen):
    """Every model of MODELS on the whole graph (initial state, forward, input and weight
    gradients), then _model_worker on each part of pdir checks its rank's share against them."""
    x = torch.randn(n, 12, generator=gen)
    up = torch.randn(n, 5, generator=gen)
    states, want = {}, {}
    for name, build in MODELS.items():
        torch.manual_seed(zlib.crc32(name.encode()))
        model = build()
        states[name] = {k: v.clone() for k, v in model.state_dict().items()}
        xg = x.clone().requires_grad_()
        out = model(xg, graph)
        (out * up).sum().backward()
        want[name] = (out.detach(), xg.grad,
                      {k: v.grad.clone() for k, v in model.named_parameters()})
    _spawn(_model_worker, world, tmp_path, str(pdir), x, up, states, want)


@pytest.mark.parametrize("world", [2, 3])
def test_layers_on_parts_match_whole_graph(tmp_path, world):
    """Every layer kind, through DistGraph on every part: forward, input gradient and (summed
    over the ranks) weight gradients equal the whole graph's."""
    if not os.path.exists(CLI):
        pytest.skip(f"spgnn CLI not found at {CLI} (set SPGNN_CLI)")
    ds, pdir = tmp_path / "ds", tmp_path / "parts"
    subprocess.run([CLI, "generate", "planted", "--n", "240", "--classes", "3", "--seed", "7",
                    "-o", str(ds)], check=True, capture_output=True)
    subprocess.run([CLI, "partition", str(ds), "-o", str(pdir), "--parts", str(world),
                    "--method", "random"], check=True, capture_output=True)
    d = spgnn.io.read_dataset(str(ds))
    gen = torch.Generator().manual_seed(world)
    _check_parts_against_whole(world, tmp_path, pdir, d.edge_index, d.num_nodes, gen)


def test_layers_on_weighted_parts_match_whole_graph(tmp_path):
    """A weighted graph's parts (`spgnn partition` keeps a graph file's edge values): every
    layer weights the messages as on the whole weighted Graph. SAGEConv and GINConv did not
    with the exchange overlapped (the default): their sum/mean/max/min ran over the pattern."""
    if not os.path.exists(CLI):
        pytest.skip(f"spgnn CLI not found at {CLI} (set SPGNN_CLI)")
    world, n = 2, 240
    gen = torch.Generator().manual_seed(11)
    pairs = torch.unique(torch.randint(0, n, (2, 5 * n), generator=gen), dim=1)
    weights = 0.5 + 1.5 * torch.rand(pairs.shape[1], generator=gen)
    mtx, pdir = tmp_path / "g.mtx", tmp_path / "parts"
    mtx.write_text("%%MatrixMarket matrix coordinate real general\n"
                   f"{n} {n} {pairs.shape[1]}\n" + "".join(
                       f"{int(r) + 1} {int(c) + 1} {float(w):.6f}\n"
                       for (r, c), w in zip(pairs.t().tolist(), weights)))
    subprocess.run([CLI, "partition", str(mtx), "-o", str(pdir), "--parts", str(world),
                    "--method", "random"], check=True, capture_output=True)
    # The whole graph, as the parts hold it (global ids)
    parts = [spgnn.io.read_partition(str(pdir), r) for r in range(world)]
    assert all(p.edge_weight is not None for p in parts)
    ei = torch.cat([p.global_ids[p.edge_index] for p in parts], 1)
    graph = spgnn.Graph(ei, n, torch.cat([p.edge_weight for p in parts]))
    _check_parts_against_whole(world, tmp_path, pdir, graph, n, gen)
