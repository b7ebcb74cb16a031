"""python -m spgnn.train on the real datasets (../shared/data; SKIPPED where absent): training
on the parts of a partition reaches the single graph's accuracy, and bf16 reaches fp32's (means
of 5 seeds). A file of their own, so that pytest-xdist runs these minutes beside test_train.py
instead of after it."""
import json
import os

import pytest

from test_train import CPU, DATA, _need_cli, _run_cli, _single, _torchrun


@pytest.mark.skipif(os.environ.get("SPGNN_ACCURACY_TESTS", "1") == "0",
                    reason="SPGNN_ACCURACY_TESTS=0 (scripts/test.sh runs these once, in the main "
                           "build's pass)")
@pytest.mark.parametrize("dataset,model,dropout,extra", [
    ("cora", "gcn", 0.5, []),
    # PipeGCN's stale halos (seen: 80.16 against 80.46 exact on 2 ranks, 79.90 on one process)
    ("cora", "gcn", 0.5, ["--stale-halos"]),
    # GCN on Amazon Computers' raw features swings by +-12 points from seed to seed (in PyG as
    # well, docs/BENCHMARKS.md), too much for a 5-seed mean to compare dropout draws: without
    # dropout the two runs of a seed compute the same steps. GAT with dropout (stable there) is
    # in docs/BENCHMARKS.md ("Distributed training").
    ("amazon-computers", "gcn", 0.0, [])])
def test_partitioned_training_reaches_single_graph_accuracy(tmp_path, dataset, model, dropout,
                                                            extra):
    path = os.path.join(DATA, dataset)
    if not os.path.isdir(path):
        pytest.skip(f"dataset not found: {path}")
    _need_cli()
    parts = tmp_path / "parts"
    _run_cli("partition", path, "-o", parts, "--parts", "2")
    common = ["--model", model, "--runs", "5", "--epochs", "200", "--eval-every", "5",
              "--dropout", dropout, *CPU]
    one = _single("--dataset", path, *common)
    out = tmp_path / "dist.json"
    r = _torchrun(2, "--dist", parts, *common, *extra, "--json", out)
    assert r.returncode == 0, r.stderr[-3000:]
    two = json.loads(out.read_text())
    print(f"{dataset} {model} {' '.join(extra)}: one process {one['test_acc_mean']:.4f} {one['test_acc']}, "
          f"2 ranks {two['test_acc_mean']:.4f} {two['test_acc']}")
    # Not run by run even without dropout: a run that swings on raw features also amplifies the
    # float32 rounding of sums taken in another order (seen: 74.6 vs 73.9 in one of 5 runs).
    assert two["test_acc_mean"] >= one["test_acc_mean"] - 0.015, (one, two)


@pytest.mark.skipif(os.environ.get("SPGNN_ACCURACY_TESTS", "1") == "0",
                    reason="SPGNN_ACCURACY_TESTS=0 (scripts/test.sh runs these once, in the main "
                           "build's pass)")
def test_bf16_training_reaches_fp32_accuracy():
    """Issue 12's bar on Cora (the other datasets: bench/mixed_precision.py, docs/BENCHMARKS.md):
    bf16's mean test accuracy over 5 seeds within 0.5 points of fp32's."""
    path = os.path.join(DATA, "cora")
    if not os.path.isdir(path):
        pytest.skip(f"dataset not found: {path}")
    common = ["--dataset", path, "--model", "gcn", "--runs", "5", "--eval-every", "5", *CPU]
    fp32 = _single(*common, "--dtype", "fp32")
    bf16 = _single(*common, "--dtype", "bf16")
    print(f"cora gcn: fp32 {fp32['test_acc_mean']:.4f} {fp32['test_acc']}, bf16 "
          f"{bf16['test_acc_mean']:.4f} {bf16['test_acc']}")
    assert bf16["test_acc_mean"] >= fp32["test_acc_mean"] - 0.005, (fp32, bf16)
