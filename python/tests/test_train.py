"""python -m spgnn.train: on one process and, launched by torchrun on gloo, on the parts of a
partition -- the same training (with no dropout, the same trajectory), the same accuracy on the
real datasets (mean of 5 seeds), and clear errors for a bad launch."""
import json
import os
import socket
import subprocess
import sys

import pytest
import torch

import spgnn
from spgnn import train

CLI = os.environ.get("SPGNN_CLI", os.path.join(os.path.dirname(spgnn.__file__), "..", "..",
                                                "spgnn"))
DATA = os.environ.get("SPGNN_DATA") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data"))


def _need_cli():
    if not os.path.exists(CLI):
        pytest.skip(f"spgnn CLI not found at {CLI} (set SPGNN_CLI)")


def _run_cli(*args):
    subprocess.run([CLI, *map(str, args)], check=True, capture_output=True)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(nproc, *args, timeout=900):
    # A free port per launch, so launches from two pytest-xdist workers (this file and
    # test_cuda_graph.py) do not meet on torchrun's default one. (--standalone does the same
    # through a c10d rendezvous, 2.6 s slower per launch here.)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--master-port",
                           str(_free_port()), "--nproc-per-node", str(nproc), "-m", "spgnn.train",
                           *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=timeout)


def _single(*args):
    return train.run(train.parse_args([str(a) for a in args]), log=lambda *a: None)


# Two ranks over gloo on the CPU, in every test (a GPU machine may have only one GPU); so is the
# single process they are compared with.
CPU = ["--device", "cpu"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    _need_cli()
    root = tmp_path_factory.mktemp("planted")
    ds, parts = root / "ds", root / "parts"
    _run_cli("generate", "planted", "--n", "600", "--classes", "4", "--seed", "3", "-o", ds)
    _run_cli("partition", ds, "-o", parts, "--parts", "2")
    return ds, parts


@pytest.mark.parametrize("model", ["gcn", "sage", "gin", "gat"])
def test_two_ranks_train_as_one(planted, tmp_path, model):
    """Without dropout a step on 2 ranks is the single-process step (same initial weights, the
    loss split by rank and the gradients summed): the accuracies agree, run by run."""
    ds, parts = planted
    common = ["--model", model, "--epochs", "30", "--dropout", "0", "--runs", "2",
              "--hidden", "8", "--heads", "2", *CPU]
    one = _single("--dataset", ds, *common)
    out = tmp_path / "dist.json"
    r = _torchrun(2, "--dist", parts, *common, "--json", out, "--report-every", "10")
    assert r.returncode == 0, r.stderr[-3000:]
    two = json.loads(out.read_text())
    assert two["ranks"] == 2 and len(two["halo_fraction"]) == 2
    assert all(0 < f < 1 for f in two["halo_fraction"])
    assert all(s > 0 for s in two["sent_mib_per_epoch"]) and all(m > 0 for m in two["memory_mib"])
    for a, b in zip(one["test_acc"], two["test_acc"]):
        assert abs(a - b) <= 0.01, (one["test_acc"], two["test_acc"])
    # the per-epoch report: time, communication and bytes, memory
    assert "comm" in r.stdout and "sent" in r.stdout and "mem" in r.stdout, r.stdout


def test_bad_launches_are_named(planted, capsys):
    ds, parts = planted
    # A rank past the partition's parts, and a dataset directory given as a partition: what a
    # rank's _load_part says (in-process: a torchrun launch costs CI seconds per process).
    with pytest.raises(SystemExit, match="part 2 requested"):
        train._load_part(train.parse_args(["--dist", str(parts), *CPU]), torch.device("cpu"), 2)
    with pytest.raises(SystemExit, match="meta.json"):
        train._load_part(train.parse_args(["--dist", str(ds), *CPU]), torch.device("cpu"), 0)
    # A process group smaller than the partition: only a real launch has one.
    r = _torchrun(1, "--dist", parts, "--epochs", "1", *CPU, timeout=300)
    assert r.returncode != 0 and "2 parts but the process group has 1" in r.stderr, \
        r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-m", "spgnn.train", "--dist", str(parts)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "torchrun" in r.stderr
    for bad, what in ((["--epochs", "0"], "--epochs"), (["--dropout", "1.5"], "--dropout"),
                      (["--model", "mlp"], "--model"), (["--lr", "nan"], "--lr must be a finite"),
                      (["--lr", "inf"], "--lr must be a finite"),
                      (["--weight-decay", "inf"], "--weight-decay must be a finite"),
                      (["--maxk", "17"], "--maxk 17 exceeds the hidden width 16"),
                      (["--maxk", "4", "--layers", "1"], "--maxk acts between layers"),
                      (["--model", "gat", "--heads", "2", "--hidden", "4", "--maxk", "9"],
                       "hidden width 8 (--hidden x --heads)"),
                      (["--device", "tpu"], "--device must be auto, cpu, cuda or cuda:N"),
                      (["--json", "/nonexistent-dir/r.json"], "no directory /nonexistent-dir"),
                      (["--cuda-graph", "--device", "cpu"], "--device cpu has none"),
                      (["--cuda-graph", "--dtype", "fp16"], "loss scaler checks the gradients")):
        with pytest.raises(SystemExit):
            train.parse_args(["--dataset", str(ds), *bad])
        assert what in capsys.readouterr().err, bad
    with pytest.raises(SystemExit):
        train.parse_args(["--dist", str(parts), "--cuda-graph", "--stale-halos"])
    assert "--cuda-graph with --stale-halos" in capsys.readouterr().err
    if not torch.cuda.is_available():  # --device auto lands on the CPU: named, not a traceback
        with pytest.raises(SystemExit, match="--cuda-graph needs a CUDA device"):
            _single("--dataset", str(ds), "--cuda-graph", "--epochs", "1")
    with pytest.raises(SystemExit, match="no directory"):
        _single("--dataset", str(ds) + "-missing")


def _small_dataset(root, y, train, val, test):
    import numpy as np
    root.mkdir(exist_ok=True)
    n = len(y)
    rng = np.random.default_rng(0)
    src = rng.integers(0, n, 4 * n)
    dst = rng.integers(0, n, 4 * n)
    np.save(root / "edge_index.npy", np.stack([src, dst]).astype(np.int64))
    np.save(root / "x.npy", rng.standard_normal((n, 6)).astype(np.float32))
    np.save(root / "y.npy", np.asarray(y, dtype=np.int64))
    for name, idx in (("train", train), ("val", val), ("test", test)):
        np.save(root / f"{name}_idx.npy", np.asarray(idx, dtype=np.int64))
    return root


def test_splits_are_checked_and_unlabelled_vertices_left_out(tmp_path):
    """As `spgnn train`: a vertex twice in a split or in two splits is refused, naming it;
    unlabelled vertices (y = -1) count in neither the loss nor the accuracy (before, they
    stopped the loss with an IndexError), and a train split of only those is refused."""
    y = [0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2, -1]
    common = ["--epochs", "5", "--hidden", "4", "--runs", "2", *CPU]
    ds = _small_dataset(tmp_path / "a", y, [0, 1, 2, 3, 4], [5, 6, 7], [8, 9, 10, 11])
    # the same splits without their unlabelled vertices: the same runs, exactly
    clean = _small_dataset(tmp_path / "b", y, [0, 1, 2, 4], [5, 6], [8, 9, 10])
    with_unlabelled = _single("--dataset", ds, *common)
    without = _single("--dataset", clean, *common)
    assert with_unlabelled["test_acc"] == without["test_acc"]
    for train_, val, test, what in (
            ([0, 1, 2], [5, 6, 1], [8], "vertex 1 is in both the train and the val split"),
            ([0, 1, 0], [5], [8], "vertex 0 is listed twice in the train split"),
            ([3, 7], [5], [8], "every vertex of the train split is unlabelled")):
        bad = _small_dataset(tmp_path / "c", y, train_, val, test)
        with pytest.raises(SystemExit, match=what):
            _single("--dataset", bad, *common)
    # a file the reader refuses: its message, not a traceback
    import numpy as np
    np.save(bad / "edge_index.npy", np.array([[0, 99], [1, 0]], dtype=np.int64))
    with pytest.raises(SystemExit, match="edge_index references vertex 99"):
        _single("--dataset", bad, *common)


def test_cli_numbers_out_of_range_are_argparse_errors(tmp_path, capsys):
    """Ints past torch's ranges and a --json that cannot be written are argparse errors (exit 2,
    naming the flag) before training, not tracebacks from torch.manual_seed or at the end."""
    ds = _small_dataset(tmp_path / "d", [0, 1, 0, 1, 0, 1], [0, 1], [2, 3], [4, 5])
    for bad, what in ((["--seed", str(2**70)], "--seed must be at most 2^64 - 1"),
                      (["--seed", str(2**64 - 1), "--runs", "2"],
                       "--seed must be at most 2^64 - 2"),
                      (["--seed", "-1"], "--seed must be >= 0, got -1"),
                      (["--hidden", str(2**70)], "--hidden must be at most 2^63 - 1"),
                      (["--model", "gat", "--heads", str(2**64)], "--heads must be at most"),
                      (["--epochs", str(2**63)], "--epochs must be at most"),
                      (["--json", str(tmp_path)], f"--json {tmp_path}: is a directory"),
                      (["--json", str(tmp_path / "new") + "/"], "is a directory")):
        with pytest.raises(SystemExit) as e:
            train.parse_args(["--dataset", str(ds), *bad])
        assert e.value.code == 2
        assert what in capsys.readouterr().err, bad
    # the largest seed trains: the per-rank dropout seed derived from it wraps into torch's range
    assert _single("--dataset", ds, "--epochs", "1", "--seed", str(2**64 - 1), *CPU)["ranks"] == 1
    r = subprocess.run([sys.executable, "-m", "spgnn.train", "--dataset", str(ds), "--seed",
                        str(2**70)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "error: --seed" in r.stderr and "Traceback" not in r.stderr, \
        r.stderr[-3000:]


def test_a_model_too_large_for_memory_is_a_clear_error(tmp_path):
    """--hidden within int64 but past memory (or past what a tensor can hold): a message naming
    the flags, not torch's allocator traceback."""
    ds = _small_dataset(tmp_path / "d", [0, 1, 0, 1, 0, 1], [0, 1], [2, 3], [4, 5])
    for hidden in (2**40, 2**61):
        with pytest.raises(SystemExit) as e:
            _single("--dataset", ds, "--epochs", "1", "--hidden", hidden, *CPU)
        msg = str(e.value.code)
        assert msg.startswith("out of memory on cpu training gcn with --hidden "
                              f"{hidden}, --layers 2 on "), msg
        assert "lower --hidden or --layers" in msg


def test_an_empty_test_split_reports_no_accuracy(tmp_path):
    """No test vertex (or only unlabelled ones): the accuracy is "n/a", and null in the JSON,
    not 0 (a model that got every vertex wrong)."""
    y = [0, 1, 2, -1, 0, 1, 2, -1]
    for name, test in (("empty", []), ("unlabelled", [3, 7])):
        ds = _small_dataset(tmp_path / name, y, [0, 1, 2], [4, 5], test)
        out = tmp_path / f"{name}.json"
        lines = []
        res = train.run(train.parse_args(["--dataset", str(ds), "--epochs", "3", "--runs", "2",
                                          "--report-every", "1", "--json", str(out), *CPU]),
                        log=lines.append)
        assert res["test_acc"] == [None, None] and res["test_acc_mean"] is None
        saved = json.loads(out.read_text())
        assert saved["test_acc"] == [None, None] and saved["test_acc_mean"] is None
        assert "test accuracy n/a (empty test split)" in lines[-1], lines[-1]
        epoch = next(line for line in lines if line.startswith("epoch"))
        assert "test n/a" in epoch and "val 0." in epoch, epoch


def test_dist_checks_partition_features_and_labels(tmp_path):
    """--dist refuses what --dataset refuses: NaN/Inf features, and labels outside meta.json's
    class count (cross_entropy's IndexError, or a device-side assert on a GPU), naming the
    file."""
    import numpy as np
    import torch
    _need_cli()
    ds = _small_dataset(tmp_path / "ds", [0, 1, 2] * 4, [0, 1, 2, 3], [4, 5, 6], [7, 8, 9])
    parts = tmp_path / "parts"
    _run_cli("partition", ds, "-o", parts, "--parts", "1")
    args = train.parse_args(["--dist", str(parts), *CPU])
    meta_path = parts / "meta.json"
    meta = meta_path.read_text()
    meta_path.write_text(json.dumps(dict(json.loads(meta), num_classes=2)))
    want = (r"part-0/y\.npy: label y\[\d+\] = 2 \(vertex \d+\) is outside \[0, num_classes = 2\) "
            r"of .*meta\.json")
    with pytest.raises(ValueError, match=want):
        spgnn.io.read_partition(str(parts), 0)
    with pytest.raises(SystemExit, match="--dist .*" + want):
        train._load_part(args, torch.device("cpu"), 0)
    meta_path.write_text(meta)
    xp = parts / "part-0" / "x.npy"
    x = np.load(xp)
    x[3, 1] = np.inf
    np.save(xp, x)
    want = r"part-0/x\.npy: feature x\[3, 1\] \(vertex \d+\) is infinite"
    with pytest.raises(ValueError, match=want):
        spgnn.io.read_partition(str(parts), 0)
    with pytest.raises(SystemExit, match="--dist .*" + want):
        train._load_part(args, torch.device("cpu"), 0)
    assert spgnn.io.read_partition(str(parts), 0, allow_nonfinite=True).x.isinf().any()


def test_dist_and_dataset_train_on_one_graph_when_edges_repeat(tmp_path):
    """`spgnn partition` reads a dataset directory as `spgnn train` does, each repeated edge
    (same source and target) once; --dataset trains on that graph too (and says so), or the
    two modes would train on different graphs."""
    import numpy as np
    import torch
    _need_cli()
    ds = _small_dataset(tmp_path / "ds", [0, 1, 2] * 4, [0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10])
    ei = np.load(ds / "edge_index.npy")
    ei = np.concatenate([ei, ei[:, :10], ei[:, :3]], 1)
    np.save(ds / "edge_index.npy", ei)
    pairs = set(map(tuple, ei.T.tolist()))
    parts = tmp_path / "parts"
    _run_cli("partition", ds, "-o", parts, "--parts", "2")
    lines = []
    d = train._load_single(train.parse_args(["--dataset", str(ds), *CPU]), torch.device("cpu"),
                           lines.append)
    assert d.graph.shape[1] == len(pairs) and set(map(tuple, d.graph.t().tolist())) == pairs
    assert f"{ei.shape[1] - len(pairs)} repeated edges" in lines[0], lines
    got, total = set(), 0
    for p in range(2):
        part = spgnn.io.read_partition(str(parts), p)
        gid = part.global_ids
        src, dst = part.edge_index
        got |= set(zip(gid[src].tolist(), gid[dst].tolist()))
        total += src.numel()
        assert part.edge_weight is None  # repeats dropped, not merged into weights
    assert got == pairs and total == len(pairs)
    common = ["--epochs", "20", "--dropout", "0", "--runs", "2", "--hidden", "8", *CPU]
    one = _single("--dataset", ds, *common)
    out = tmp_path / "dist.json"
    r = _torchrun(2, "--dist", parts, *common, "--json", out)
    assert r.returncode == 0, r.stderr[-3000:]
    for a, b in zip(one["test_acc"], json.loads(out.read_text())["test_acc"]):
        assert abs(a - b) <= 0.01, (one["test_acc"], b)


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_two_ranks_without_overlap_train_as_one(planted, tmp_path, model):
    """--no-overlap (the halo fetched before each aggregation, one product instead of the
    owned- and halo-source pair) trains as the single process does."""
    ds, parts = planted
    common = ["--model", model, "--epochs", "30", "--dropout", "0", "--runs", "2",
              "--hidden", "8", *CPU]
    one = _single("--dataset", ds, *common)
    out = tmp_path / "dist.json"
    r = _torchrun(2, "--dist", parts, *common, "--no-overlap", "--json", out)
    assert r.returncode == 0, r.stderr[-3000:]
    two = json.loads(out.read_text())
    assert two["overlap"] is False and two["ranks"] == 2
    for a, b in zip(one["test_acc"], two["test_acc"]):
        assert abs(a - b) <= 0.01, (one["test_acc"], two["test_acc"])
    with pytest.raises(SystemExit):
        train.parse_args(["--dataset", str(ds), "--no-overlap"])


@pytest.mark.parametrize("model", ["gcn", "gat"])
def test_stale_halos_train(planted, tmp_path, model):
    """--stale-halos (PipeGCN): the exchange of a step serves the next one; training still
    learns what the exact exchange learns, i.e. what one process learns
    (test_two_ranks_train_as_one)."""
    ds, parts = planted
    common = ["--model", model, "--epochs", "40", "--dropout", "0", "--hidden", "8",
              "--heads", "2", "--runs", "2", *CPU]
    exact = _single("--dataset", ds, *common)
    out = tmp_path / f"{model}.json"
    r = _torchrun(2, "--dist", parts, *common, "--stale-halos", "--json", out)
    assert r.returncode == 0, r.stderr[-3000:]
    stale = json.loads(out.read_text())
    assert stale["stale_halos"] is True, stale
    assert stale["test_acc_mean"] >= exact["test_acc_mean"] - 0.03, (exact, stale)
    with pytest.raises(SystemExit):
        train.parse_args(["--dataset", str(ds), "--stale-halos"])


def test_mixed_precision_trains_on_one_process_and_on_two_ranks(planted, tmp_path):
    """--dtype bf16/fp16 (torch.autocast, float32 weights, fp16 loss scaling) learns what fp32
    learns; on two ranks the halo rows cross in the half dtype, half the bytes."""
    ds, parts = planted
    common = ["--model", "gcn", "--epochs", "40", "--dropout", "0", "--hidden", "16", *CPU]
    sent = {}
    for dt in ("fp32", "bf16", "fp16"):
        one = _single("--dataset", ds, *common, "--dtype", dt)
        assert one["dtype"] == dt
        out = tmp_path / f"{dt}.json"
        r = _torchrun(2, "--dist", parts, *common, "--dtype", dt, "--json", out)
        assert r.returncode == 0, r.stderr[-3000:]
        two = json.loads(out.read_text())
        if dt == "fp32":
            base = one["test_acc_mean"]
        assert one["test_acc_mean"] >= base - 0.03, (dt, one["test_acc"], base)
        assert two["test_acc_mean"] >= base - 0.03, (dt, two["test_acc"], base)
        sent[dt] = max(two["sent_mib_per_epoch"])
    # Halo rows in 2 bytes instead of 4; the weight gradients' all-reduce stays float32.
    assert sent["bf16"] < 0.8 * sent["fp32"] and sent["fp16"] < 0.8 * sent["fp32"], sent
    with pytest.raises(SystemExit):
        train.parse_args(["--dataset", str(ds), "--dtype", "fp8"])
