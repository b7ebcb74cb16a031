"""Full-batch node classification with spgnn.nn layers, on one device or on several.

One device::

    python -m spgnn.train --dataset ../shared/data/cora --model gcn

Several (one process per part of a directory written by ``spgnn partition``; NCCL on GPUs,
gloo on the CPU; the same command on one host or across hosts)::

    spgnn partition ../shared/data/amazon-computers --parts 2 -o parts
    torchrun --nproc-per-node 2 -m spgnn.train --dist parts --model sage

The model is the same module in both modes: on several devices it gets the rank's owned rows
and a ``spgnn.distributed.DistGraph``; each rank's loss is its share of the whole training set's
mean, and the weight gradients are summed over the ranks, so one step is the single-device
step. Per epoch it reports time, communication time and bytes, the halo fraction and memory.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import resource
import sys
import time
from typing import List, Optional

import torch
import torch.nn.functional as F

from . import io
from . import nn as snn
from . import ops
from ._runtime import INT64_MAX
from .distributed import CommStats, DistGraph, all_reduce_gradients

__all__ = ["Net", "main", "parse_args", "run"]

MODELS = ("gcn", "sage", "gin", "gat")
DTYPES = ("fp32", "bf16", "fp16")
_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
_SEEDS = 2**64  # torch.manual_seed takes seeds below 2^64 (an overflow traceback past them)
# --cuda-graph: eager steps before the capture (first-use builds, cached variants, the
# optimizer's state, NCCL's communicators all exist by then; torch's recipe warms up 3).
WARMUP_STEPS = 3
# Where --dataset names are looked up: $SPGNN_DATA, else the checkout's ../shared/data.
DATA = os.environ.get("SPGNN_DATA") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", "shared", "data"))


class Net(torch.nn.Module):
    """``layers`` graph layers of one kind with ReLU (or MaxK) and dropout between them, as
    PyG's examples build them: GCN, GraphSAGE (mean), GIN (a 2-layer MLP per layer), GAT
    (``heads`` heads concatenated in hidden layers, one head at the output)."""

    def __init__(self, model: str, in_channels: int, hidden: int, classes: int, layers: int = 2,
                 heads: int = 8, maxk: int = 0, dropout: float = 0.5):
        super().__init__()
        if model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        self.dropout = dropout
        self.convs = torch.nn.ModuleList()
        width = in_channels
        for i in range(layers):
            last = i == layers - 1
            out = classes if last else hidden
            if model == "gcn":
                conv = snn.GCNConv(width, out)
            elif model == "sage":
                conv = snn.SAGEConv(width, out)
            elif model == "gin":
                conv = snn.GINConv(torch.nn.Sequential(
                    torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, out)))
            else:
                h = 1 if last else heads
                conv = snn.GATConv(width, out, heads=h, dropout=dropout)
                out = out * h
            self.convs.append(conv)
            width = out
        if maxk and layers < 2:
            raise ValueError(f"maxk = {maxk}: MaxK acts between layers and a 1-layer model has "
                             "none")
        self.act = snn.MaxK(maxk) if maxk else torch.nn.ReLU()
        if maxk and maxk > hidden * (heads if model == "gat" else 1):
            raise ValueError(f"maxk = {maxk} exceeds the hidden width")

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            # spgnn's dropout: a hashed mask recomputed in the backward, hashed in parallel on
            # the CPU (torch's CPU dropout took 70% of a Cora epoch there)
            x = ops.dropout(x, self.dropout, self.training)
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = self.act(x)
        return x


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m spgnn.train", description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--dataset", default=None,
                     help=f"a dataset directory, or a name under {DATA} (default: cora)")
    src.add_argument("--dist", metavar="DIR", default=None,
                     help="a partition directory (spgnn partition); launch one process per part "
                          "with torchrun")
    ap.add_argument("--model", choices=MODELS, default="gcn")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=16, help="hidden width (per head for GAT)")
    ap.add_argument("--heads", type=int, default=8, help="GAT heads of hidden layers")
    ap.add_argument("--maxk", type=int, default=0, help="MaxK nonlinearity: keep k (0 = ReLU)")
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1, help="train with seeds seed .. seed+runs-1")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda (one process per GPU)")
    ap.add_argument("--stale-halos", action="store_true",
                    help="--dist: PipeGCN's stale halos (each step reads the previous step's "
                         "halo rows and gradients; the exchange leaves the critical path)")
    ap.add_argument("--no-overlap", action="store_true",
                    help="--dist: fetch the halo before each aggregation instead of hiding the "
                         "exchange behind the owned-source edges (one product per aggregation "
                         "instead of two: less host work a step, for narrow models whose "
                         "exchange is small)")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="capture the training step (forward, loss, backward, the gradient "
                         f"all-reduce, Adam) in a CUDA graph after {WARMUP_STEPS} eager steps and "
                         "replay it: no per-step host work (CUDA only; not with --dtype fp16, "
                         "whose loss scaler reads the GPU every step, nor --stale-halos)")
    ap.add_argument("--dtype", choices=DTYPES, default="fp32",
                    help="bf16/fp16: mixed precision with torch.autocast (float32 weights and "
                         "optimizer state; fp16 with loss scaling)")
    ap.add_argument("--eval-every", type=int, default=1,
                    help="evaluate every N epochs (and after the last); the test accuracy "
                         "reported is the one at the best validation accuracy")
    ap.add_argument("--report-every", type=int, default=0,
                    help="print a report line every N epochs (0: only the summary)")
    ap.add_argument("--json", default=None, help="write the results as JSON (atomically)")
    args = ap.parse_args(argv)
    for name in ("layers", "hidden", "heads", "epochs", "runs", "eval_every"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in ("maxk", "seed", "report_every"):
        if getattr(args, name) < 0:
            ap.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    # (past int64, a width or count fails deep inside torch or spgnn's core, naming no flag)
    for name in ("layers", "hidden", "heads", "epochs", "runs", "eval_every", "maxk",
                 "report_every"):
        if getattr(args, name) > INT64_MAX:
            ap.error(f"--{name.replace('_', '-')} must be at most 2^63 - 1, got "
                     f"{getattr(args, name)}")
    if args.seed + args.runs > _SEEDS:  # the runs' seeds are seed .. seed + runs - 1
        ap.error(f"--seed must be at most 2^64 - {args.runs} (run r of --runs is seeded seed + "
                 f"r, and torch takes seeds below 2^64), got {args.seed}")
    if not 0.0 <= args.dropout < 1.0:
        ap.error(f"--dropout must be in [0, 1), got {args.dropout}")
    # (an infinite rate or decay turns every weight into NaN; NaN fails every comparison)
    if not (math.isfinite(args.lr) and args.lr > 0):
        ap.error(f"--lr must be a finite number > 0, got {args.lr}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        ap.error(f"--weight-decay must be a finite number >= 0, got {args.weight_decay}")
    # (MaxK replaces the nonlinearity between layers, as `spgnn train` refuses it too: a
    # 1-layer model would train without it under a name that says MaxK)
    if args.maxk and args.layers < 2:
        ap.error(f"--maxk acts between layers; a model of --layers {args.layers} has none")
    width = args.hidden * (args.heads if args.model == "gat" else 1)
    if args.maxk > width:
        ap.error(f"--maxk {args.maxk} exceeds the hidden width {width}"
                 + (" (--hidden x --heads)" if args.model == "gat" else " (--hidden)"))
    if args.device not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:\d+", args.device):
        ap.error(f"--device must be auto, cpu, cuda or cuda:N, got {args.device!r}")
    if args.json:
        # Checked before training, not when the results are written at its end.
        path = os.path.abspath(args.json)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            ap.error(f"--json {args.json}: no directory {parent} to write it in")
        if os.path.isdir(path) or args.json.endswith(("/", os.sep)):
            ap.error(f"--json {args.json}: is a directory; name the file to write")
        if os.path.lexists(path) and not os.path.isfile(path):
            ap.error(f"--json {args.json}: exists and is not a regular file")
        if not os.access(parent, os.W_OK | os.X_OK):
            ap.error(f"--json {args.json}: cannot write in {parent}")
    if args.stale_halos and args.dist is None:
        ap.error("--stale-halos applies to --dist training")
    if args.no_overlap and args.dist is None:
        ap.error("--no-overlap applies to --dist training")
    if args.cuda_graph:
        if args.device == "cpu":
            ap.error("--cuda-graph captures CUDA work; --device cpu has none")
        if args.dtype == "fp16":
            ap.error("--cuda-graph with --dtype fp16: the loss scaler checks the gradients for "
                     "inf/NaN on the host every step, which a CUDA graph cannot replay (bf16 "
                     "needs no scaler)")
        if args.stale_halos:
            ap.error("--cuda-graph with --stale-halos: a stale step waits on the previous step's "
                     "exchange, which a graph replaying one step cannot hold")
    if args.dataset is None and args.dist is None:
        args.dataset = "cora"
    return args


def _device(spec: str, local_rank: int, local_ranks: int = 1) -> torch.device:
    """The device of this process: with several ranks on a host, GPU ``local_rank`` (NCCL
    allows one rank per GPU); ``auto`` takes the CPU (gloo) when the host has fewer GPUs than
    ranks, and says so."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if spec == "auto":
        spec = "cuda" if gpus >= max(1, local_ranks) else "cpu"
        if gpus and spec == "cpu" and local_rank == 0:
            print(f"spgnn.train: {local_ranks} ranks on this host but {gpus} GPU(s): training "
                  "on the CPU (gloo); launch one rank per GPU to use them", file=sys.stderr)
    dev = torch.device(spec)
    if dev.type == "cuda":
        if not gpus:
            raise SystemExit("--device cuda: no GPU is visible")
        if dev.index is None:
            if local_ranks > gpus:
                raise SystemExit(f"--device cuda: {local_ranks} ranks on this host but {gpus} "
                                 "GPU(s); NCCL needs one GPU per rank")
            dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    return dev


class _Data:
    """What one process trains on: its rows, its graph and its splits, and the counts of the
    whole training set (equal to its own on one device)."""


def _labelled_splits(name: str, y: torch.Tensor, splits, whole: bool = True) -> list:
    """The splits checked as `spgnn train` checks them (no vertex twice in a split or in two
    splits: it would count twice, or be evaluated on what it trained on) and with the
    unlabelled vertices (y = -1) left out, as `spgnn train`'s loss and accuracy leave them out.
    A part of a partition (not ``whole``) may own no labelled training vertex; train_once
    checks the whole training set's count."""
    owner = torch.full((y.shape[0],), -1, dtype=torch.int8)
    out = []
    for k, (split, idx) in enumerate(zip(("train", "val", "test"), splits)):
        if idx is None:
            out.append(None)
            continue
        seen = owner[idx]
        counts = torch.bincount(idx, minlength=y.shape[0])
        if bool((counts > 1).any()):
            v = int(torch.nonzero(counts > 1)[0])
            raise SystemExit(f"dataset {name!r}: vertex {v} is listed twice in the {split} split")
        if bool((seen >= 0).any()):
            j = int(torch.nonzero(seen >= 0)[0])
            other = ("train", "val", "test")[int(seen[j])]
            raise SystemExit(f"dataset {name!r}: vertex {int(idx[j])} is in both the {other} and "
                             f"the {split} split (splits must not overlap)")
        owner[idx] = k
        out.append(idx[y[idx] >= 0])
    if whole and out[0] is not None and out[0].numel() == 0 and splits[0].numel() > 0:
        raise SystemExit(f"dataset {name!r}: every vertex of the train split is unlabelled "
                         "(y = -1)")
    return out


def _simple_edges(edge_index: torch.Tensor):
    """edge_index with each (source, target) pair once (the first kept), and how many repeats
    were dropped. read_dataset sorts the edges by (target, source), so repeats are neighbours."""
    src, dst = edge_index
    if src.numel() < 2:
        return edge_index, 0
    same_dst = dst[1:] == dst[:-1]
    if not bool(((dst[1:] > dst[:-1]) | (same_dst & (src[1:] >= src[:-1]))).all()):
        unique = torch.unique(edge_index, dim=1)
        return unique, edge_index.shape[1] - unique.shape[1]
    repeat = same_dst & (src[1:] == src[:-1])
    dropped = int(repeat.sum())
    if dropped == 0:
        return edge_index, 0
    keep = torch.cat([torch.ones(1, dtype=torch.bool, device=repeat.device), ~repeat])
    return edge_index[:, keep], dropped


def _load_single(args, dev, log=print) -> _Data:
    path = args.dataset if os.path.isdir(args.dataset) else os.path.join(DATA, args.dataset)
    if not os.path.isdir(path):
        raise SystemExit(f"--dataset {args.dataset!r}: no directory {path}")
    try:
        d = io.read_dataset(path)
    except (ValueError, RuntimeError, OSError) as e:
        raise SystemExit(f"--dataset {args.dataset}: {e}") from None
    if d.x is None or d.y is None or d.train_idx is None:
        raise SystemExit(f"--dataset {path}: needs x.npy, y.npy and train_idx.npy (or masks)")
    out = _Data()
    out.name, out.classes = d.name, d.num_classes
    out.x, out.y = d.x.to(dev), d.y.to(dev)
    # `spgnn partition` reads a dataset directory as `spgnn train` does, with each repeated
    # edge (same source and target) once: a --dist run trains on that graph. So does this one,
    # or a dataset with parallel edges would train on another graph in each mode.
    edge_index, dropped = _simple_edges(d.edge_index)
    if dropped:
        log(f"note: --dataset {args.dataset}: {dropped} repeated edges (same source and target) "
            "counted once, as `spgnn partition` (so --dist) and `spgnn train` read the dataset")
    out.graph = edge_index.to(dev)
    out.num_nodes = d.num_nodes
    out.splits = [None if i is None else i.to(dev)
                  for i in _labelled_splits(d.name, d.y, (d.train_idx, d.val_idx, d.test_idx))]
    out.halo_fraction = 0.0
    out.stats = None
    return out


def _load_part(args, dev, rank: int) -> _Data:
    try:
        p = io.read_partition(args.dist, rank)
        graph = DistGraph(p, device=dev, stale=args.stale_halos, overlap=not args.no_overlap)
    except (ValueError, RuntimeError, OSError) as e:
        raise SystemExit(f"--dist {args.dist}: {e}") from None
    if p.x is None or p.y is None or p.train_idx is None:
        raise SystemExit(f"--dist {args.dist}: the partition was made from a graph without "
                         "features, labels or a training split; partition a dataset directory")
    out = _Data()
    out.name, out.classes = f"{os.path.basename(os.path.normpath(args.dist))} part {rank}", \
        p.num_classes
    out.x, out.y = p.x.to(dev), p.y.to(dev)
    out.graph = graph
    out.num_nodes = p.num_nodes
    out.splits = [None if i is None else i.to(dev)
                  for i in _labelled_splits(out.name, p.y, (p.train_idx, p.val_idx, p.test_idx),
                                            whole=False)]
    out.halo_fraction = out.graph.num_halo / max(1, p.num_local)
    out.stats = out.graph.stats
    return out


# The tensors of the latest collectives, alive until the process group is gone. gloo's worker
# thread may still hold a finished collective when the next one (the final barrier) starts, and
# the barrier keeps it until its own end. With torch 2.4, if that reference was the tensors'
# last, the worker freed them needing the GIL while the main thread, in
# destroy_process_group, held the GIL and joined the worker: rank 1 hung 3 runs in 32 (2 ranks,
# one busy core beside them; 0 in 40 since; py-spy: ~ProcessGroupGloo joining, the worker in
# ~AsyncBarrierWork -> ~AsyncAllgatherWork -> ~TensorImpl waiting for the GIL).
_recent_collective_tensors: "collections.deque[torch.Tensor]" = collections.deque(maxlen=16)


def _sum(values: List[float], dev, distributed: bool) -> List[float]:
    if not distributed:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=dev)
    torch.distributed.all_reduce(t)
    _recent_collective_tensors.append(t)
    return t.tolist()


def _gather(values: List[float], dev, world: int, distributed: bool) -> List[List[float]]:
    """Every rank's ``values`` (a rank's row per rank), on every rank."""
    if not distributed:
        return [values]
    t = torch.tensor(values, dtype=torch.float64, device=dev)
    out = [torch.empty_like(t) for _ in range(world)]
    torch.distributed.all_gather(out, t)
    _recent_collective_tensors.extend([t, *out])
    return [o.tolist() for o in out]


def _memory_mb(dev) -> float:
    if dev.type == "cuda":
        return torch.cuda.max_memory_allocated(dev) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def train_once(args, d: _Data, dev, seed: int, rank: int, world: int, distributed: bool,
               log=print) -> dict:
    torch.manual_seed(seed)
    model = Net(args.model, d.x.shape[1], args.hidden, d.classes, args.layers, args.heads,
                args.maxk, args.dropout).to(dev)
    # The same initial weights on every rank (seeded above), different dropout masks per rank
    # (wrapped into torch's seed range, which large --seed values would leave).
    torch.manual_seed((seed * 1_000_003 + rank) % _SEEDS)
    graphed = bool(getattr(args, "cuda_graph", False))
    if graphed and dev.type != "cuda":
        raise SystemExit(f"--cuda-graph needs a CUDA device; this run is on {dev}")
    # (capturable: the step count and bias corrections stay on the GPU, as a graph needs)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                           capturable=graphed)
    train_idx, val_idx, test_idx = d.splits
    counts = _sum([float(0 if i is None else i.numel()) for i in d.splits], dev, distributed)
    if counts[0] == 0:
        raise SystemExit("the training split is empty (or holds only unlabelled vertices, y = -1)")
    reduce_stats = CommStats()
    if isinstance(d.graph, DistGraph):
        d.graph.halo.wait_all()  # a new run's first step exchanges exactly (stale halos)
    half = _AUTOCAST.get(args.dtype)

    def forward():
        # Mixed precision as PyTorch does it: the model's weights stay float32, the GEMMs (and on
        # the CPU spgnn's ops) run in the half dtype, the loss in float32. (No cast cache in a
        # graph: torch's autocast cache does not survive a capture.)
        with torch.autocast(dev.type, dtype=half or torch.float32, enabled=half is not None,
                            cache_enabled=not graphed):
            return model(d.x, d.graph).float()

    # float16's range needs loss scaling (its gradients underflow); bfloat16 has float32's.
    scaler = torch.amp.GradScaler(dev.type, enabled=args.dtype == "fp16")

    def train_step():
        opt.zero_grad(set_to_none=True)
        if isinstance(d.graph, DistGraph):
            d.graph.begin_step()
        out = forward()
        # This rank's share of the whole training set's mean loss.
        loss = F.cross_entropy(out[train_idx], d.y[train_idx], reduction="sum") / counts[0]
        scaler.scale(loss).backward()
        if distributed:
            # Before the scaler looks for inf/NaN: a rank's overflow reaches every rank through
            # the sum, so all ranks skip the same steps.
            all_reduce_gradients(model, stats=reduce_stats)
        scaler.step(opt)
        scaler.update()
        return loss

    # --cuda-graph: the warm-up steps run on a side stream (as torch's capture recipe does, so
    # that no lazily made state belongs to the default stream), then one step is captured and
    # every later epoch replays it. The collectives' time is not measured inside a graph (their
    # timing events would be recorded into it); the bytes are those the captured step moves.
    graph, side, step_bytes = None, (torch.cuda.Stream(dev) if graphed else None), 0
    best_val, test_at_best, times, comm, rows = -1.0, 0.0, [], [], []
    for epoch in range(1, args.epochs + 1):
        if d.stats is not None:
            d.stats.reset()
        reduce_stats.reset()
        _sync(dev)
        t0 = time.perf_counter()
        model.train()
        if not graphed:
            loss = train_step()
        elif epoch <= WARMUP_STEPS:
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                loss = train_step()
            torch.cuda.current_stream(dev).wait_stream(side)
        else:
            if graph is None:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    loss = train_step()
                captured = [d.stats.collect() if d.stats is not None else None,
                            reduce_stats.collect()]
                step_bytes = sum(c["bytes_sent"] for c in captured if c)
            graph.replay()
        _sync(dev)
        ms = (time.perf_counter() - t0) * 1e3
        halo = d.stats.collect() if d.stats is not None else None
        red = reduce_stats.collect()
        comm_ms = ((halo["seconds"] if halo else 0.0) + red["seconds"]) * 1e3
        sent = (halo["bytes_sent"] if halo else 0) + red["bytes_sent"]
        if graph is not None:
            comm_ms, sent = float("nan"), step_bytes
        times.append(ms)
        comm.append(comm_ms)
        last = epoch == args.epochs
        every = args.report_every and (epoch % args.report_every == 0 or last)
        if epoch % args.eval_every == 0 or last or every:
            model.eval()
            with torch.no_grad():
                pred = forward().argmax(1)
            correct = [0.0 if i is None else float((pred[i] == d.y[i]).sum()) for i in d.splits]
            total_loss, *correct = _sum([float(loss.detach())] + correct, dev, distributed)
            accs = [c / n if n else 0.0 for c, n in zip(correct, counts)]
            if accs[1] > best_val or (counts[1] == 0 and last):
                best_val, test_at_best = accs[1], accs[2]
            shown = [f"{a:.3f}" if n else "n/a" for a, n in zip(accs, counts)]
        row = [ms, comm_ms, sent / 2**20, _memory_mb(dev)]
        if every:
            per_rank = _gather(row, dev, world, distributed)
            if rank == 0:
                worst = [max(r[k] for r in per_rank) for k in range(4)]
                log(f"epoch {epoch:4d}  loss {total_loss:.4f}  train {shown[0]}  "
                    f"val {shown[1]}  test {shown[2]}  |  {worst[0]:7.2f} ms  comm "
                    f"{worst[1]:6.2f} ms  compute {worst[0] - worst[1]:7.2f} ms  sent "
                    f"{worst[2]:7.2f} MiB  mem {worst[3]:8.1f} MiB (max over ranks)")
        rows.append(row)
    if isinstance(d.graph, DistGraph):
        d.graph.halo.wait_all()
    skip = min(5, len(times) - 1)
    med = sorted(times[skip:])[len(times[skip:]) // 2]
    med_comm = sorted(comm[skip:])[len(comm[skip:]) // 2]
    if math.isnan(med_comm):  # (replayed steps: not measured, JSON's null)
        med_comm = None
    # An empty split has no accuracy (None, JSON's null): 0 would read as a model that got
    # every vertex wrong.
    return {"seed": seed, "test_acc": test_at_best if counts[2] else None,
            "best_val": best_val if counts[1] else None,
            "epoch_ms": med, "comm_ms": med_comm, "last": rows[-1]}


def run(args: argparse.Namespace, log=print) -> dict:
    """Trains as ``args`` say; returns (on every rank) the results rank 0 prints."""
    distributed = args.dist is not None
    rank, world, local_rank = 0, 1, 0
    if distributed:
        import torch.distributed as dist
        if not dist.is_initialized():
            if "RANK" not in os.environ:
                raise SystemExit("--dist: launch with torchrun (one process per part), e.g. "
                                 "torchrun --nproc-per-node 2 -m spgnn.train --dist DIR")
            local_rank = int(os.environ.get("LOCAL_RANK", 0))
            local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
            dev = _device(args.device, local_rank, local_ranks)
            dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    else:
        local_ranks = 1
    dev = _device(args.device, local_rank, local_ranks)
    d = _load_part(args, dev, rank) if distributed else _load_single(args, dev, log)
    try:
        results = [train_once(args, d, dev, args.seed + r, rank, world, distributed, log)
                   for r in range(args.runs)]
    except RuntimeError as e:  # torch.OutOfMemoryError is one
        if not _out_of_memory(e):
            raise
        raise SystemExit(
            f"out of memory on {dev} training {args.model} with --hidden {args.hidden}, --layers "
            f"{args.layers}{f', --heads {args.heads}' if args.model == 'gat' else ''} on "
            f"{args.dist or args.dataset} ({str(e).splitlines()[0][:200]}): lower --hidden or "
            "--layers, or split the graph with `spgnn partition` and train with --dist") from None
    per_rank = _gather([d.halo_fraction, results[-1]["last"][3],
                        results[-1]["last"][2]], dev, world, distributed)
    accs = [r["test_acc"] for r in results]
    summary = {
        "model": args.model, "maxk": args.maxk, "dataset": args.dist or args.dataset,
        "dtype": args.dtype, "stale_halos": bool(args.stale_halos),
        "cuda_graph": bool(getattr(args, "cuda_graph", False)),
        # (whether the exchange hid behind the owned-source edges: stale halos need no overlap)
        "overlap": bool(isinstance(d.graph, DistGraph) and d.graph.overlap),
        "ranks": world, "device": str(dev), "epochs": args.epochs,
        "test_acc": accs,
        "test_acc_mean": None if None in accs else sum(accs) / len(accs),
        "epoch_ms": [r["epoch_ms"] for r in results],
        "comm_ms": [r["comm_ms"] for r in results],
        "halo_fraction": [p[0] for p in per_rank],
        "memory_mib": [p[1] for p in per_rank],
        "sent_mib_per_epoch": [p[2] for p in per_rank],
    }
    if rank == 0:
        acc = ("n/a (empty test split)" if summary["test_acc_mean"] is None
               else f"{summary['test_acc_mean']:.4f} (mean of {len(accs)})")
        comm_text = ("n/a (in the CUDA graph)" if None in summary["comm_ms"]
                     else f"{min(summary['comm_ms']):.2f} ms")
        log(f"{args.model}{'-maxk' + str(args.maxk) if args.maxk else ''} "
            f"({args.dtype}) on "
            f"{summary['dataset']}, {world} rank(s) on {dev.type}: test accuracy {acc}, "
            f"{min(summary['epoch_ms']):.2f} ms/epoch (median), comm "
            f"{comm_text}, halo fraction "
            f"{max(summary['halo_fraction']):.3f}, memory "
            f"{max(summary['memory_mib']):.1f} MiB per rank (max)")
        if args.json:
            tmp = f"{args.json}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(summary, f, indent=1)
            os.replace(tmp, args.json)
    return summary


def _out_of_memory(e: RuntimeError) -> bool:
    """An allocation that failed (torch's CUDA OOM, the CPU allocator's refusal, or a size past
    what a tensor can hold): too large a model for the machine, which a traceback would not say."""
    text = str(e)
    return (isinstance(e, torch.OutOfMemoryError) or "can't allocate memory" in text
            or "Storage size calculation overflowed" in text or "out of memory" in text)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    run(args)
    if args.dist is not None:
        import torch.distributed as dist
        if dist.is_initialized():
            # Every rank past its last collective before any tears down: a gloo group destroyed
            # (or left to the interpreter's exit) while a peer still talks to it aborted the
            # process now and then ("terminate called without an active exception", torch 2.15).
            dist.barrier()
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # After the group is destroyed, skip the interpreter's shutdown: torch 2.15's gloo threads
    # aborted the process there now and then, turning a finished run into a failed one.
    os._exit(rc)
