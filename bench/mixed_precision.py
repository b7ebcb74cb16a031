"""Mixed precision (issue 12): test accuracy with --dtype fp32, bf16 (and fp16) on the real
datasets, mean of RUNS seeds each, and the time per epoch; a Markdown table on stdout, each
run's JSON in OUT. --runner python: python -m spgnn.train (torch.autocast); --runner cli:
`spgnn train` (bf16/f16 aggregations, f16 with loss scaling; dtypes f32/bf16/f16).

    PYTHONPATH=build/python python bench/mixed_precision.py [--runner python|cli]
        [--datasets cora citeseer ...] [--models gcn gat sage] [--dtypes fp32 bf16 fp16]
        [--runs 5] [--first-seed 1] [--hidden N] [--device cpu] [--out DIR] [--spgnn build/spgnn]

Each row also gives every further dtype's paired difference to the first (same seeds: the
runs differ only in precision), mean +- standard error over the seeds: per-seed swings of a
few points on the unstable datasets hide a 0.5-point difference in the means, not in the pairs.
"""
import argparse
import json
import math
import os
import subprocess
import sys

# PyG's example hyper-parameters per model (GAT: 8 heads of 8, lr 0.005, dropout 0.6).
MODEL_ARGS = {
    "gcn": ["--model", "gcn", "--hidden", "16"],
    "sage": ["--model", "sage", "--hidden", "16"],
    "gin": ["--model", "gin", "--hidden", "16"],
    "gat": ["--model", "gat", "--hidden", "8", "--heads", "8", "--lr", "0.005",
            "--dropout", "0.6"],
}


def model_args(args, model):
    a = list(MODEL_ARGS[model])
    if args.hidden:
        a[a.index("--hidden") + 1] = str(args.hidden)
    return a


def paired(base, other):
    """Mean and standard error of other - base, seed by seed (points)."""
    d = [o - b for b, o in zip(base, other)]
    m = sum(d) / len(d)
    se = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d)) if len(d) > 1 else 0.0
    return m, se


def cli_runs(args, ds, model, dt):
    """`spgnn train`, seeds FIRST_SEED.. (RUNS of them): (test accuracies in %, min of the median
    ms/epoch); each seed's accuracy also goes to OUT/<ds>-<model>-<dt>.json."""
    accs, times = [], []
    dtype = {"fp32": "f32", "f32": "f32", "bf16": "bf16", "fp16": "f16", "f16": "f16"}[dt]
    seeds = list(range(args.first_seed, args.first_seed + args.runs))
    for seed in seeds:
        cmd = [args.spgnn, "train", "--dataset", os.path.join(args.data, ds),
               *model_args(args, model), "--dtype", dtype, "--epochs", str(args.epochs),
               "--seed", str(seed), "--eval-every", "5", "--device", args.device,
               "--format", "json"]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        accs.append(100 * r["test_acc"])
        times.append(r["ms_per_epoch"])
    out = os.path.join(args.out, f"{ds}-{model}-{dt}.json")
    with open(out + ".tmp", "w") as f:
        json.dump({"seeds": seeds, "test_acc": accs, "ms_per_epoch": times}, f)
    os.replace(out + ".tmp", out)
    return accs, min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+",
                    default=["cora", "citeseer", "amazon-computers", "coauthor-cs"])
    ap.add_argument("--models", nargs="+", default=["gcn", "sage", "gat"], choices=MODEL_ARGS)
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16", "fp16"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=1,
                    help="seeds FIRST_SEED..FIRST_SEED+RUNS-1 (--runner cli)")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=0,
                    help="hidden width of every model (GAT: per head); 0: PyG's example's")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="/tmp/spgnn-mixed-precision")
    ap.add_argument("--runner", choices=("python", "cli"), default="python")
    ap.add_argument("--spgnn", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                    "spgnn"))
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", "..", "shared", "data"))
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be >= 1, got {args.runs}")
    if args.runner != "cli" and args.first_seed != 1:
        ap.error("--first-seed applies to --runner cli (python -m spgnn.train numbers its runs)")
    os.makedirs(args.out, exist_ok=True)
    others = args.dtypes[1:]
    print("| dataset | model | " + " | ".join(f"{d} acc" for d in args.dtypes) + " | " +
          "".join(f"{d} - {args.dtypes[0]} (paired) | " for d in others) +
          " | ".join(f"{d} ms/epoch" for d in args.dtypes) + " |")
    print("|---|---|" + "---:|" * (2 * len(args.dtypes) + len(others)))
    for ds in args.datasets:
        for model in args.models:
            accs, times = [], []
            for dt in args.dtypes:
                if args.runner == "cli":
                    acc, ms = cli_runs(args, ds, model, dt)
                    accs.append(acc)
                    times.append(ms)
                    continue
                out = os.path.join(args.out, f"{ds}-{model}-{dt}.json")
                cmd = [sys.executable, "-m", "spgnn.train", "--dataset", ds, *model_args(args, model),
                       "--dtype", dt, "--runs", str(args.runs), "--epochs", str(args.epochs),
                       "--eval-every", "5", "--device", args.device, "--json", out]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                r = json.load(open(out))
                accs.append([100 * a for a in r["test_acc"]])
                times.append(min(r["epoch_ms"]))
            means = [sum(a) / len(a) for a in accs]
            diffs = ["{:+.2f} ± {:.2f}".format(*paired(accs[0], a)) for a in accs[1:]]
            print(f"| {ds} | {model} | " + " | ".join(f"{m:.2f}" for m in means) + " | " +
                  "".join(f"{d} | " for d in diffs) +
                  " | ".join(f"{t:.1f}" for t in times) + " |", flush=True)


if __name__ == "__main__":
    main()
