"""spgnn's ops inside a captured CUDA graph (torch.cuda.graph): after one eager step, a whole
training step -- every layer, its backward, Adam -- is captured once and replayed, and each replay
computes what an eager step computes; dropout seeds are read on the device, so every replay
draws a new mask and the backward reuses the forward's. GPU only."""
import copy
import json

import pytest
import torch
import torch.nn.functional as F

import spgnn
from spgnn import _ops, ops
from spgnn import train

from conftest import HAS_GPU, make_edge_index, randn, rel_err
from test_train import _torchrun, planted  # noqa: F401 -- the fixture (its 2-part partition too)

pytestmark = pytest.mark.gpu

MODELS = ["gcn", "sage", "gin", "gat"]


def _side(fn):
    """Runs fn on a side stream, as torch's capture recipe warms up (and as a user's code may
    call spgnn from any stream)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        r = fn()
    torch.cuda.current_stream().wait_stream(s)
    return r


def _capture(fn):
    """Warms fn up on a side stream, then captures one call of it: (graph, what it returned)."""
    _side(fn)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        r = fn()
    return graph, r


def _train_eager_and_replayed(gen, model, kind, steps, compile_=False):
    """Two copies of a model train on the same inputs: one eagerly, one (torch.compile'd with
    ``compile_``) by replaying a step captured after 2 eager warm-up steps on a side stream. New
    feature values are written into the captured input before each replay, so the graph must
    read them. The losses and parameters agree after every step."""
    ei, n = make_edge_index(kind, gen, n=80)
    ei = ei.cuda()
    torch.manual_seed(0)
    eager = train.Net(model, 12, 8, 5, layers=2, heads=2, dropout=0.0).cuda()
    twin = copy.deepcopy(eager)
    run = torch.compile(twin, fullgraph=True) if compile_ else twin
    opt_e = torch.optim.Adam(eager.parameters(), lr=0.01, capturable=True)
    opt_g = torch.optim.Adam(twin.parameters(), lr=0.01, capturable=True)
    x = torch.empty(n, 12, device="cuda")
    y = torch.randint(0, 5, (n,), generator=gen).cuda()

    def step(m, opt):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x, ei), y)
        loss.backward()
        opt.step()
        return loss

    graph, loss_g = None, None
    for i in range(steps):
        x.copy_(randn(gen, n, 12, device="cuda"))
        loss_e = step(eager, opt_e)
        if i < 2:
            loss_g = _side(lambda: step(run, opt_g))
        else:
            if graph is None:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    loss_g = step(run, opt_g)
            graph.replay()
        torch.cuda.synchronize()
        assert rel_err(loss_g.detach(), loss_e.detach()) < 1e-5, (i, float(loss_g), float(loss_e))
        for a, b in zip(twin.parameters(), eager.parameters()):
            assert rel_err(a.detach(), b.detach()) < 1e-4, i


@pytest.mark.parametrize("kind", ["skewed", "empty_rows"])
@pytest.mark.parametrize("model", MODELS)
def test_replayed_training_steps_equal_eager(gen, model, kind):
    """A replayed training step equals an eager one (_train_eager_and_replayed)."""
    _train_eager_and_replayed(gen, model, kind, steps=6)


@pytest.mark.parametrize("model", ["gcn", "gat", "sage"])
def test_compiled_model_can_be_captured(gen, model):
    """torch.compile'd spgnn.nn models (the ops run between inductor's kernels) are captured
    the same way, after the warm-up steps that compile them; replays equal eager steps."""
    torch._dynamo.reset()
    _train_eager_and_replayed(gen, model, "skewed", steps=5, compile_=True)
    torch._dynamo.reset()


def test_dropout_reads_its_seed_on_the_device(gen):
    """A captured dropout (forward and backward) reads the seed tensor as it runs: replayed with
    seed s written into it, it gives exactly the eager op's result for the host seed s."""
    x = randn(gen, 1000, 7, device="cuda").requires_grad_()
    up = randn(gen, 1000, 7, device="cuda")
    seed = torch.zeros(1, dtype=torch.int64, device="cuda")

    def run():
        x.grad = None
        y = _ops.dropout(x, 0.3, seed)
        (y * up).sum().backward()
        return y

    graph, y_g = _capture(run)
    grads = []
    for s in (5, 123456789, 2**61 + 7):
        seed.fill_(s)
        graph.replay()
        torch.cuda.synchronize()
        xe = x.detach().clone().requires_grad_()
        ye = _ops.dropout(xe, 0.3, torch.tensor([s]))
        (ye * up).sum().backward()
        assert torch.equal(y_g, ye.detach()), s
        assert torch.equal(x.grad, xe.grad), s
        grads.append(x.grad.clone())
    assert not torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("heads", [1, 3])
def test_gat_attention_dropout_reads_its_seed_on_the_device(gen, heads):
    """The same for the fused GAT aggregation's attention dropout, forward and backward."""
    ei, n = make_edge_index("skewed", gen, n=70)
    hd = spgnn.Graph(ei.cuda(), n).handle()
    C = 5
    feat = randn(gen, n, heads * C, device="cuda").requires_grad_()
    el = randn(gen, n, heads, device="cuda").requires_grad_()
    er = randn(gen, n, heads, device="cuda").requires_grad_()
    up = randn(gen, n, heads * C, device="cuda")
    seed = torch.zeros(1, dtype=torch.int64, device="cuda")

    def run(sd, f, l, r):
        for t in (f, l, r):
            t.grad = None
        out = _ops.gat_aggregate(hd, f, l, r, heads, 0.2, 0.4, sd, n, "")[0]
        (out * up).sum().backward()
        return out

    graph, out_g = _capture(lambda: run(seed, feat, el, er))
    outs = []
    for s in (11, 987654321):
        seed.fill_(s)
        graph.replay()
        torch.cuda.synchronize()
        f2, l2, r2 = (t.detach().clone().requires_grad_() for t in (feat, el, er))
        out_e = run(torch.tensor([s]), f2, l2, r2)
        assert rel_err(out_g, out_e.detach()) < 1e-6, s
        for a, b in ((feat, f2), (el, l2), (er, r2)):
            assert rel_err(a.grad, b.grad) < 1e-5, s
        outs.append(out_g.clone())
    assert not torch.equal(outs[0], outs[1])


def test_replays_draw_new_dropout_masks(gen):
    """Through the public ops (seeds drawn from torch's generator on the GPU, inside the graph):
    each replay drops a different ~p of the elements, and the backward uses the forward's mask."""
    x = (randn(gen, 4000, 16, device="cuda").abs() + 0.5).requires_grad_()
    up = randn(gen, 4000, 16, device="cuda").abs() + 0.5

    def run():
        x.grad = None
        y = ops.dropout(x, 0.5, True)
        (y * up).sum().backward()
        return y

    graph, y = _capture(run)
    masks = []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        kept = y != 0
        assert torch.equal(kept, x.grad != 0)
        assert 0.47 < float(kept.float().mean()) < 0.53
        assert torch.allclose(y[kept], 2 * x.detach()[kept])
        masks.append(kept.clone())
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])


@pytest.mark.parametrize("model", MODELS)
def test_train_cuda_graph_trains_as_eager(planted, model):
    """python -m spgnn.train --cuda-graph: without dropout the same trajectory as eager (the same
    accuracies, run by run); with dropout it trains (accuracy well above chance)."""
    ds, _ = planted
    common = ["--dataset", ds, "--model", model, "--epochs", "30", "--runs", "2", "--hidden",
              "8", "--heads", "2", "--device", "cuda"]
    run = lambda *a: train.run(train.parse_args([str(v) for v in (*common, *a)]),  # noqa: E731
                               log=lambda *m: None)
    eager, graphed = run("--dropout", "0"), run("--dropout", "0", "--cuda-graph")
    assert graphed["cuda_graph"] and not eager["cuda_graph"]
    for a, b in zip(eager["test_acc"], graphed["test_acc"]):
        assert abs(a - b) <= 0.01, (eager["test_acc"], graphed["test_acc"])
    dropped = run("--dropout", "0.5", "--cuda-graph", "--epochs", "60")
    assert dropped["test_acc_mean"] > 0.5, dropped


@pytest.mark.skipif(not HAS_GPU or torch.cuda.device_count() < 2,
                    reason="needs 2 GPUs (NCCL)")
@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_two_gpus_cuda_graph_train_as_one(planted, tmp_path, model):
    """--dist on 2 GPUs with --cuda-graph: the halo exchanges and the gradient all-reduce are
    captured with the step; without dropout the run matches one process's."""
    ds, parts = planted
    common = ["--model", model, "--epochs", "30", "--dropout", "0", "--runs", "2", "--hidden",
              "8", "--device", "cuda"]
    one = train.run(train.parse_args([str(v) for v in ("--dataset", ds, *common)]),
                    log=lambda *m: None)
    out = tmp_path / "dist.json"
    r = _torchrun(2, "--dist", parts, *common, "--cuda-graph", "--json", out)
    assert r.returncode == 0, r.stderr[-3000:]
    two = json.loads(out.read_text())
    assert two["cuda_graph"] and two["ranks"] == 2 and two["comm_ms"] == [None, None]
    for a, b in zip(one["test_acc"], two["test_acc"]):
        assert abs(a - b) <= 0.01, (one["test_acc"], two["test_acc"])
