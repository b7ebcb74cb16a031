"""What bench/mask_cost.py and bench/compile_cost.py share: python/examples/speed_vs_pyg.py's
models and training step (imported from its file), their command-line arguments, and the inputs
(the graph, random features and labels, a 60% training mask)."""
import argparse
import importlib.util
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "speed_vs_pyg", os.path.join(HERE, "..", "python", "examples", "speed_vs_pyg.py"))
speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(speed)


def parser(doc: str, models: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--graph", default="random:20000:25",
                    help="an edge_index .npy, a dataset directory or random:N:DEG")
    ap.add_argument("--models", default=models)
    ap.add_argument("--features", type=int, default=602)
    ap.add_argument("--classes", type=int, default=41)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return ap


def parse(ap: argparse.ArgumentParser) -> argparse.Namespace:
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    return a


def inputs(a: argparse.Namespace):
    """(device, edge_index, n, x, y, mask) for the parsed arguments."""
    dev = torch.device(a.device)
    ei, n = speed.load_graph(a.graph, dev)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, a.features, generator=g).to(dev)
    y = torch.randint(0, a.classes, (n,), generator=g).to(dev)
    mask = speed.training_split(n, "mask", g, dev)
    return dev, ei, n, x, y, mask
