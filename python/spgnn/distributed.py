"""Full-graph training on several devices, first piece: the halo exchange of an edge-cut
partition (``spgnn partition``; docs/ARCHITECTURE.md, "Partitions"), over the caller's
``torch.distributed`` process group (NCCL on GPUs, gloo on the CPU). spgnn's C++ core stays free
of torch: torch.distributed moves the bytes.

A rank holds one part: its owned vertices' rows, and the local graph from owned + halo sources
to owned targets. ``HaloExchange(part)(x_owned)`` returns ``[x_owned; x_halo]`` -- the rows of
the halo vertices fetched from their owners -- so that any spgnn op or layer then aggregates
the owned rows with the local graph exactly as on the whole graph. It is differentiable: the
backward sends each halo row's gradient back to its owner, which adds them in a fixed order
(peer by peer), so results do not depend on timing.
"""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["HaloExchange"]


def _counts(offsets: Tensor) -> List[int]:
    return (offsets[1:] - offsets[:-1]).tolist()


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_owned: Tensor, ex: "HaloExchange") -> Tensor:
        ctx.ex = ex
        send = x_owned.index_select(0, ex._send_ids_on(x_owned.device))
        halo = x_owned.new_empty((ex.num_halo,) + tuple(x_owned.shape[1:]))
        ex._all_to_all(halo, send.contiguous(), ex.halo_counts, ex.send_counts)
        return torch.cat([x_owned, halo], 0)

    @staticmethod
    def backward(ctx, grad: Tensor):
        ex = ctx.ex
        grad = grad.contiguous()
        g_owned = grad[: ex.num_owned].clone()
        g_halo = grad[ex.num_owned:].contiguous()
        back = grad.new_empty((ex.num_send,) + tuple(grad.shape[1:]))
        ex._all_to_all(back, g_halo, ex.send_counts, ex.halo_counts)
        # Peer by peer: within one peer a row is sent at most once (no colliding indices), and
        # the peers' order is fixed, so the sum is the same on every run.
        ids = ex._send_ids_on(grad.device)
        for q in range(ex.parts):
            b, e = ex.send_offsets[q], ex.send_offsets[q + 1]
            if e > b:
                g_owned.index_add_(0, ids[b:e], back[b:e])
        return g_owned, None


class HaloExchange:
    """The halo exchange of one part. ``part`` is what ``spgnn.io.read_partition`` returns (or
    any object with ``parts``, ``part``, ``num_owned``, ``num_local``, ``halo_offsets``,
    ``send_offsets`` and ``send_ids``); ``group`` is a torch.distributed process group of
    ``part.parts`` ranks (default: the world), in which this process is rank ``part.part``."""

    def __init__(self, part, group: Optional[dist.ProcessGroup] = None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("HaloExchange needs torch.distributed initialised "
                               "(dist.init_process_group) with one rank per part")
        self.group = group
        world = dist.get_world_size(group)
        rank = dist.get_rank(group)
        if world != part.parts:
            raise ValueError(f"the partition has {part.parts} parts but the process group has "
                             f"{world} ranks: launch one rank per part")
        if rank != part.part:
            raise ValueError(f"this process is rank {rank} but was given part {part.part}: "
                             f"rank r reads part r")
        self.parts = part.parts
        self.num_owned = int(part.num_owned)
        self.num_halo = int(part.num_local) - self.num_owned
        self.halo_counts = _counts(part.halo_offsets)
        self.send_counts = _counts(part.send_offsets)
        self.send_offsets = part.send_offsets.tolist()
        self.num_send = int(self.send_offsets[-1])
        if len(self.halo_counts) != self.parts or sum(self.halo_counts) != self.num_halo:
            raise ValueError("part.halo_offsets does not match parts and num_local")
        self._send_ids = part.send_ids.to(torch.int64)
        self._ids_cache = {}

    def _send_ids_on(self, device: torch.device) -> Tensor:
        ids = self._ids_cache.get(device)
        if ids is None:
            ids = self._ids_cache[device] = self._send_ids.to(device)
        return ids

    def _all_to_all(self, out: Tensor, inp: Tensor, out_counts, in_counts):
        if self.parts == 1:
            return
        dist.all_to_all_single(out, inp, output_split_sizes=out_counts,
                               input_split_sizes=in_counts, group=self.group)

    def __call__(self, x_owned: Tensor) -> Tensor:
        if not isinstance(x_owned, Tensor) or x_owned.dim() < 1:
            raise TypeError("x_owned must be a tensor with one row per owned vertex")
        if x_owned.shape[0] != self.num_owned:
            raise ValueError(f"x_owned has {x_owned.shape[0]} rows, the part owns "
                             f"{self.num_owned} vertices")
        return _Exchange.apply(x_owned, self)
