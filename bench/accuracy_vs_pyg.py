#!/usr/bin/env python3
"""Test accuracy of the same training script with spgnn.nn layers and with torch_geometric.nn
layers: GCN and GAT (python/examples/train_gcn.py, train_gat.py), 5 seeds each, on the
datasets in ../shared/data. Both get identical inputs (PyG's conventions: raw features, the
dataset's edge_index and split) and the same seed for initialisation and dropout.

Usage: bench/accuracy_vs_pyg.py [--datasets cora,citeseer,amazon-computers,coauthor-cs]
       [--models gcn,gat] [--seeds 5] [--device cpu] [--epochs 200] [--json out.json]
Prints mean +- std test accuracy (at the best validation epoch) per library and the difference.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
EX = os.path.join(HERE, "..", "python", "examples")
sys.path.insert(0, EX)


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EX, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    import _common
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="cora,citeseer,amazon-computers,coauthor-cs")
    ap.add_argument("--models", default="gcn,gat")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if not os.path.isdir(_common.DATA):
        print(f"SKIPPED: {_common.DATA} is absent")
        return 0
    import spgnn
    import torch_geometric.nn as pyg
    examples = {"gcn": (load_example("train_gcn"), 0.01), "gat": (load_example("train_gat"), 0.005)}
    results = {}
    print(f"{'dataset':<18} {'model':<5} {'spgnn':>16} {'PyG':>16} {'diff':>7}  (mean +- std of "
          f"{a.seeds} seeds, {a.device}, torch {torch.__version__})", flush=True)
    for ds in a.datasets.split(","):
        for model in a.models.split(","):
            mod, lr = examples[model]
            accs = {"spgnn": [], "pyg": []}
            t0 = time.time()
            for seed in range(1, a.seeds + 1):
                args = argparse.Namespace(dataset=ds, device=a.device, epochs=a.epochs, lr=lr,
                                          weight_decay=5e-4, seed=seed, normalize_features=False,
                                          compile=False, pyg=False)
                d = _common.load(args)
                for lib, nn in (("spgnn", spgnn.nn), ("pyg", pyg)):
                    torch.manual_seed(seed)
                    m = mod.build(nn, d.x.shape[1], d.num_classes)
                    acc, _ = _common.train(m, d, args, log=False)
                    accs[lib].append(100 * acc)
            mean = {k: statistics.mean(v) for k, v in accs.items()}
            std = {k: statistics.pstdev(v) for k, v in accs.items()}
            results[f"{ds}/{model}"] = {"spgnn": accs["spgnn"], "pyg": accs["pyg"]}
            print(f"{ds:<18} {model:<5} {mean['spgnn']:>9.2f} +- {std['spgnn']:.2f} "
                  f"{mean['pyg']:>9.2f} +- {std['pyg']:.2f} {mean['spgnn'] - mean['pyg']:>+7.2f}"
                  f"  ({time.time() - t0:.0f} s)", flush=True)
    if a.json:
        load_example("speed_vs_pyg").write_json(a.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
