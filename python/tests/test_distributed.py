"""spgnn.distributed.HaloExchange on 2 and 3 CPU processes over gloo (and on 2 GPUs over NCCL
when there are two): on every part of a METIS
partition (written by `spgnn partition` from a dataset directory), an aggregation of
[x_owned; halo] over the local graph equals the whole graph's on the owned rows, forward and
backward (the gradient of each owned row sums its own and its peers' contributions); bad
launches are named."""
import os
import subprocess

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import spgnn
from spgnn import ops
from spgnn.distributed import HaloExchange

CLI = os.environ.get("SPGNN_CLI", os.path.join(os.path.dirname(spgnn.__file__), "..", "..",
                                                "spgnn"))


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
        dist.destroy_process_group()
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
