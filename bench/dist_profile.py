#!/usr/bin/env python3
"""Where a distributed training step goes, rank by rank: the step of `python -m spgnn.train
--dist` (forward, loss, backward, gradient all-reduce, Adam), timed with the GPU idle before and
after each step, then timed again without the closing wait (the host's share: when it matches the
step, the step waits for the host, not for the GPU), then under torch.profiler. Each rank writes
`PREFIX_r<rank>.txt`: the two step times, the GPU kernel time of a step (and NCCL's share of
it), and the top ops by GPU time and by host time. Launch it as spgnn.train is launched:

    torchrun --nproc-per-node 2 bench/dist_profile.py --dist DIR --model gcn --layers 2 \\
        --hidden 16 --prefix /tmp/gcn [--device cpu] [--steps 15] [--profiled 4]

Every spgnn.train model and option applies (--no-overlap, --stale-halos, --dtype). Found that
GCN 2x16 on two H200s is host-bound (docs/BENCHMARKS.md, "Two H200s").
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from spgnn import train as T
from spgnn.distributed import DistGraph, all_reduce_gradients


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--prefix", required=True, help="each rank writes PREFIX_r<rank>.txt")
    ap.add_argument("--steps", type=int, default=15, help="timed steps (after 5 warm-up ones)")
    ap.add_argument("--profiled", type=int, default=4, help="steps under torch.profiler")
    own, rest = ap.parse_known_args()
    if own.steps < 1 or own.profiled < 1:
        sys.exit("dist_profile.py: --steps and --profiled must be >= 1")
    args = T.parse_args(rest)
    if args.dist is None:
        sys.exit("dist_profile.py: give --dist DIR (a partition directory) and launch with "
                 "torchrun, one process per part")
    if "RANK" not in os.environ:
        sys.exit("dist_profile.py: launch with torchrun --nproc-per-node P")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    dev = T._device(args.device, local_rank, local_ranks)
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    rank = dist.get_rank()
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    d = T._load_part(args, dev, rank)
    torch.manual_seed(args.seed)
    model = T.Net(args.model, d.x.shape[1], args.hidden, d.classes, args.layers, args.heads,
                  args.maxk, args.dropout).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train_idx = d.splits[0]
    count = T._sum([float(0 if train_idx is None else train_idx.numel())], dev, True)[0]
    half = T._AUTOCAST.get(args.dtype)
    if half is not None and args.dtype == "fp16":
        sys.exit("dist_profile.py: --dtype fp16 needs loss scaling; profile bf16 instead")

    def step():
        opt.zero_grad(set_to_none=True)
        if isinstance(d.graph, DistGraph):
            d.graph.begin_step()
        with torch.autocast(dev.type, dtype=half or torch.float32, enabled=half is not None):
            out = model(d.x, d.graph).float()
        loss = F.cross_entropy(out[train_idx], d.y[train_idx], reduction="sum") / count
        loss.backward()
        all_reduce_gradients(model)
        opt.step()

    for _ in range(5):
        step()
    walls, hosts = [], []
    for _ in range(own.steps):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        walls.append((time.perf_counter() - t0) * 1e3)
    for _ in range(own.steps):
        sync()
        t0 = time.perf_counter()
        step()
        hosts.append((time.perf_counter() - t0) * 1e3)
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(own.profiled):
            sync()
            step()
            sync()
    if isinstance(d.graph, DistGraph):
        d.graph.halo.wait_all()
    path = f"{own.prefix}_r{rank}.txt"
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        g = d.graph
        f.write(f"rank {rank} of {dist.get_world_size()} on {dev}: {args.model}, owned "
                f"{g.num_owned}, halo {g.num_halo}, local edges {g.num_edges}\n")
        f.write(f"step ms (median of {own.steps}): {statistics.median(walls):.3f}; host's share "
                f"(no wait at the end): {statistics.median(hosts):.3f}\n")
        if cuda:
            evs = [e for e in prof.events() if e.device_type.name == "CUDA"]
            total = sum(e.device_time for e in evs) / 1e3 / own.profiled
            nccl = sum(e.device_time for e in evs if "nccl" in e.name.lower()) / 1e3 / own.profiled
            f.write(f"GPU kernel time a step {total:.3f} ms, of which NCCL {nccl:.3f} (NCCL's "
                    "kernels include their wait for the peer)\n")
            f.write(prof.key_averages().table(sort_by="device_time_total", row_limit=25,
                                              max_name_column_width=70))
        f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25,
                                          max_name_column_width=70))
    os.replace(tmp, path)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
