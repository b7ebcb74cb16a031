"""Full-graph training on several devices: an edge-cut partition (``spgnn partition``;
docs/ARCHITECTURE.md, "Partitions"), one part per rank, over the caller's ``torch.distributed``
process group (NCCL on GPUs, gloo on the CPU). spgnn's C++ core stays free of torch:
torch.distributed moves the bytes.

A rank holds one part: its owned vertices' rows, and the local graph from owned + halo sources
to owned targets.

- ``HaloExchange(part)(x_owned)`` returns ``[x_owned; x_halo]``, the rows of the halo vertices
  fetched from their owners. It is differentiable: the backward sends each halo row's gradient
  back to its owner, which adds them in a fixed order (peer by peer), so results do not depend
  on timing.
- ``DistGraph(part)`` is the part's graph for ``spgnn.nn`` layers: pass it where a layer takes
  ``edge_index`` and give the layer the owned rows only. A layer exchanges the rows its
  aggregation reads as sources -- after its transform when that narrows them -- and GCN's
  normalisation uses the whole graph's degrees. The model code is the single-graph code.
- ``all_reduce_gradients(model)`` sums the weight gradients over the ranks (one flat buffer).
- ``stale=True`` (PipeGCN, Wan et al., ICLR 2022): a training step uses the halo rows, and the
  halo gradients, of the step before, so each step's exchange runs behind the whole next step
  instead of being waited for. Call ``begin_step()`` before each training step's forward; the
  first step, and every forward without autograd (evaluation), exchange exactly.
"""
from __future__ import annotations

import time
from typing import Dict, Iterable, List, Optional, Union

import torch
import torch.distributed as dist
from torch import Tensor

from . import _ops
from ._runtime import C
from .graph import Graph

__all__ = ["HaloExchange", "DistGraph", "CommStats", "all_reduce_gradients"]


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
        ex._add_back(g_owned, back)
        return g_owned, None


class _StaleExchange(torch.autograd.Function):
    """``[x_owned; x_halo of the previous step]`` (PipeGCN): this step's rows leave in the
    background and serve the next step; the backward adds to the owned rows the halo gradients
    peers computed in the previous step, and sends this step's in the background."""

    @staticmethod
    def forward(ctx, x_owned: Tensor, ex: "HaloExchange") -> Tensor:
        slot = ex._slot
        ex._slot += 1
        ctx.ex, ctx.slot = ex, slot
        shape = (ex.num_halo,) + tuple(x_owned.shape[1:])
        send = x_owned.index_select(0, ex._send_ids_on(x_owned.device)).contiguous()
        prev = ex._fwd.get(slot)
        if prev is not None and prev[1].shape == shape and prev[1].dtype == x_owned.dtype:
            ex._wait(prev[0], x_owned.device)
            halo = prev[1]
        else:  # the first step (or a changed width): exchange exactly
            halo = x_owned.new_empty(shape)
            ex._all_to_all(halo, send, ex.halo_counts, ex.send_counts)
        nxt = x_owned.new_empty(shape)
        work = ex._all_to_all(nxt, send, ex.halo_counts, ex.send_counts, async_op=True)
        ex._fwd[slot] = (work, nxt, send)  # `send` stays alive until the exchange completes
        return torch.cat([x_owned, halo], 0)

    @staticmethod
    def backward(ctx, grad: Tensor):
        ex, slot = ctx.ex, ctx.slot
        grad = grad.contiguous()
        g_owned = grad[: ex.num_owned].clone()
        g_halo = grad[ex.num_owned:].contiguous()
        shape = (ex.num_send,) + tuple(grad.shape[1:])
        prev = ex._bwd.get(slot)
        if prev is not None and prev[1].shape == shape and prev[1].dtype == grad.dtype:
            ex._wait(prev[0], grad.device)
            back = prev[1]
        else:
            back = grad.new_empty(shape)
            ex._all_to_all(back, g_halo, ex.send_counts, ex.halo_counts)
        ex._add_back(g_owned, back)
        nxt = grad.new_empty(shape)
        work = ex._all_to_all(nxt, g_halo, ex.send_counts, ex.halo_counts, async_op=True)
        ex._bwd[slot] = (work, nxt, g_halo)
        return g_owned, None


class HaloExchange:
    """The halo exchange of one part. ``part`` is what ``spgnn.io.read_partition`` returns (or
    any object with ``parts``, ``part``, ``num_owned``, ``num_local``, ``halo_offsets``,
    ``send_offsets`` and ``send_ids``); ``group`` is a torch.distributed process group of
    ``part.parts`` ranks (default: the world), in which this process is rank ``part.part``.
    With ``stale`` a training step reads the previous step's halo rows (see the module)."""

    def __init__(self, part, group: Optional[dist.ProcessGroup] = None, stale: bool = False):
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
        self.stats = CommStats()
        self.stale = bool(stale)
        self._slot = 0
        self._fwd: Dict[int, tuple] = {}  # slot -> (work, next step's halo rows, sent rows)
        self._bwd: Dict[int, tuple] = {}  # slot -> (work, next step's returned gradients, sent)

    def begin_step(self) -> None:
        """Marks a training step's start: its exchanges pair, call by call, with the previous
        step's (stale mode; a no-op otherwise)."""
        self._slot = 0

    def wait_all(self) -> None:
        """Waits for the background exchanges of stale mode (before the group is torn down)."""
        for table in (self._fwd, self._bwd):
            for work, *_ in table.values():
                if work is not None:
                    work.wait()
            table.clear()

    def _send_ids_on(self, device: torch.device) -> Tensor:
        ids = self._ids_cache.get(device)
        if ids is None:
            ids = self._ids_cache[device] = self._send_ids.to(device)
        return ids

    def _all_to_all(self, out: Tensor, inp: Tensor, out_counts, in_counts,
                    async_op: bool = False):
        """The exchange; with ``async_op`` it returns the work to ``_wait`` on (None when
        there is nothing to wait for), and only the wait is timed: the exposed part."""
        if self.parts == 1:
            return None
        row = inp[0].numel() * inp.element_size() if inp.dim() and inp.shape[0] else 0
        # What leaves and enters this rank: the rows kept by the rank itself move no bytes.
        mine = dist.get_rank(self.group)
        self.stats.add_bytes((sum(in_counts) - in_counts[mine]) * row,
                             (sum(out_counts) - out_counts[mine]) * row)
        if async_op:
            return dist.all_to_all_single(out, inp, output_split_sizes=out_counts,
                                          input_split_sizes=in_counts, group=self.group,
                                          async_op=True)
        with self.stats.timed(inp.device):
            dist.all_to_all_single(out, inp, output_split_sizes=out_counts,
                                   input_split_sizes=in_counts, group=self.group)
        return None

    def _wait(self, work, device: torch.device) -> None:
        if work is not None:
            with self.stats.timed(device):
                work.wait()

    def _add_back(self, g_owned: Tensor, back: Tensor) -> None:
        """Adds the halo gradients peers returned (``back``, in send order) to their rows.
        Peer by peer: within one peer a row is sent at most once (no colliding indices), and
        the peers' order is fixed, so the sum is the same on every run."""
        ids = self._send_ids_on(back.device)
        for q in range(self.parts):
            b, e = self.send_offsets[q], self.send_offsets[q + 1]
            if e > b:
                g_owned.index_add_(0, ids[b:e], back[b:e])

    def __call__(self, x_owned: Tensor) -> Tensor:
        if not isinstance(x_owned, Tensor) or x_owned.dim() < 1:
            raise TypeError("x_owned must be a tensor with one row per owned vertex")
        if x_owned.shape[0] != self.num_owned:
            raise ValueError(f"x_owned has {x_owned.shape[0]} rows, the part owns "
                             f"{self.num_owned} vertices")
        if self.stale and torch.is_grad_enabled() and x_owned.requires_grad:
            return _StaleExchange.apply(x_owned, self)
        return _Exchange.apply(x_owned, self)


class CommStats:
    """Bytes a rank sent and received and the time its collectives took, summed since the last
    ``reset()``. On a GPU the time is read from CUDA events around each collective on the
    current stream (no synchronisation while training); ``collect()`` waits for them."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.calls = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self._seconds = 0.0
        self._events: List[tuple] = []

    def add_bytes(self, sent: int, received: int) -> None:
        self.calls += 1
        self.bytes_sent += int(sent)
        self.bytes_received += int(received)

    def timed(self, device: torch.device):
        return _Timed(self, device)

    def collect(self) -> Dict[str, float]:
        for a, b in self._events:
            b.synchronize()
            self._seconds += a.elapsed_time(b) / 1e3
        self._events.clear()
        return {"calls": self.calls, "bytes_sent": self.bytes_sent,
                "bytes_received": self.bytes_received, "seconds": self._seconds}


class _Timed:
    def __init__(self, stats: CommStats, device: torch.device):
        self.stats, self.cuda = stats, device.type == "cuda"
        # Inside a CUDA-graph capture nothing runs, and timing events recorded there could not
        # be read: the collective goes untimed (train.py --cuda-graph reports no comm time).
        self.off = self.cuda and torch.cuda.is_current_stream_capturing()

    def __enter__(self):
        if self.off:
            return
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        if self.off:
            return False
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.stats._events.append((self.start, end))
        else:
            self.stats._seconds += time.perf_counter() - self.t0
        return False


class DistGraph(Graph):
    """One rank's part as the graph of ``spgnn.nn`` layers. ``part`` is what
    ``spgnn.io.read_partition(dir, rank)`` returns; ``group`` the process group (one rank per
    part, rank r holding part r; default: the world); ``device`` where the graph and the
    exchanged rows live (default: the CPU).

    Layers take the owned rows (``num_owned``, the graph's targets) and return the owned rows::

        g = DistGraph(spgnn.io.read_partition(dir, rank), device=dev)
        out = model(part.x.to(dev), g)       # the same model as on the whole graph

    A layer fetches the halo rows its aggregation reads (after a narrowing transform, so the
    narrower side crosses the network) and sends their gradients back in the backward. GCN's
    normalisation uses the whole graph's in-degrees (the halo's are fetched once). Caller-given
    edge weights are not supported; the partition's own edge weights are used.

    With ``overlap`` (the default), sum, mean, max and min aggregations (GCN, SAGE, GIN) hide
    the exchange behind the edges whose sources are owned: the exchange starts, the owned-source
    edges aggregate while it runs, then the halo-source edges add their part, or for max/min
    replace the owned part where theirs is larger/smaller (and the reverse in the backward).
    GAT exchanges first, then aggregates.

    With ``stale`` (PipeGCN) every layer's training step reads the previous step's halo rows and
    gradients while this step's travel in the background (call ``begin_step()`` before each
    training forward); evaluation (no autograd) and the first step exchange exactly. The
    gradients are then those of a one-step-old boundary: training converges as PipeGCN reports,
    but a step no longer equals the single-graph step.
    """

    def __init__(self, part, group: Optional[dist.ProcessGroup] = None,
                 device: Union[str, torch.device, None] = None, overlap: bool = True,
                 stale: bool = False):
        device = torch.device("cpu" if device is None else device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        local = part.graph.to(device)
        self._init(local._base, local._nnz)
        self._local = local  # keeps the host graph the device copy derives from
        self.part = part
        self.halo = HaloExchange(part, group, stale=stale)
        self.num_owned = self.halo.num_owned
        self.num_halo = self.halo.num_halo
        self._variants: Dict[str, Graph] = {}
        self._splits: Dict[str, tuple] = {}
        self._inv_deg: Optional[Tensor] = None  # 1 / in-degree (gspmm's mean's), built once
        # Stale halos take the exchange off the critical path altogether: no overlap needed.
        self.overlap = bool(overlap) and not stale
        self.stale = bool(stale)

    def begin_step(self) -> None:
        """Marks a training step's start (stale mode; see HaloExchange.begin_step)."""
        self.halo.begin_step()

    @property
    def stats(self) -> CommStats:
        return self.halo.stats

    def gather(self, x_owned: Tensor) -> Tensor:
        """``[x_owned; x_halo]``: the rows the local graph's sources read (differentiable)."""
        return self.halo(x_owned)

    def aggregate(self, x_owned: Tensor, kind: str) -> Tensor:
        """The aggregation of ``kind`` over the local graph with the exchange overlapped (see
        the class): sums over ``sum``, ``weighted`` (the part's edge weights), ``mean``, or a
        GCN normalisation (``gcn``, ``gcn_improved``, ``gcn_noloops``); or ``max`` / ``min``.
        On a weighted part (a weighted graph's partition) ``sum``, ``mean``, ``max`` and ``min``
        scale each message by its edge weight, as the layers do on a weighted spgnn.Graph (so
        SAGEConv and GINConv compute here what they compute on the whole graph); on an
        unweighted part they run over the edge pattern."""
        if x_owned.shape[0] != self.num_owned:
            raise ValueError(f"x has {x_owned.shape[0]} rows, the part owns {self.num_owned} "
                             "vertices")
        if kind in ("max", "min"):
            if self.has_weights:
                # max/min of w x: the overlapped kernel's winner test and backward read the
                # pattern, so the weighted reduction exchanges first (its autograd is the op's)
                return _ops.gspmm_arg(self.handle(), "u_mul_e", kind,
                                      self.gather(x_owned).contiguous(), None, self.num_owned,
                                      "")[0]
            inner, boundary = self._split("sum")
            return _OverlappedExtreme.apply(x_owned.contiguous(), self, inner, boundary, kind)
        if kind == "mean" and not self.has_weights and x_owned.dtype in (torch.float32,
                                                                          torch.float64):
            # The sum over the bare pattern, then the rows scaled by 1/in-degree (autograd
            # scales the gradient's rows the same way before the transposed sums): as on one
            # device (nn.conv._aggregate), the SpMMs read no weight per edge, which costs them
            # 15% at F = 256 on the Reddit shape. Half inputs keep the 1/deg edge weights, so
            # that their result is rounded once, as gspmm's mean rounds it.
            inner, boundary = self._split("sum")
            out = _Overlapped.apply(x_owned.contiguous(), self, inner, boundary)
            if self._inv_deg is None:  # an owned target has all its in-edges in the part
                self._inv_deg = _ops.graph_tensor(self.handle(), "inv_degree", out,
                                                  self.num_owned)
            return out * self._inv_deg.to(out.dtype)[:, None]
        inner, boundary = self._split(kind)
        return _Overlapped.apply(x_owned.contiguous(), self, inner, boundary)

    def _split(self, kind: str) -> tuple:
        """(owned-source graph, halo-source graph) of a kind: ``num_owned`` targets each, from
        the ``num_owned`` owned / ``num_halo`` halo sources, with the kind's edge weights."""
        hit = self._splits.get(kind)
        if hit is not None:
            return hit
        # Built once, on a layer's first call, perhaps inside torch.autocast: the weights are
        # the graph's float32 values, not their rounding to the autocast dtype.
        with torch.autocast(self.device.type, enabled=False):
            return self._build_split(kind)

    def _build_split(self, kind: str) -> tuple:
        if kind in ("gcn", "gcn_improved", "gcn_noloops"):
            g = self.variant(kind)
        elif kind in ("mean", "sum") and self.has_weights:
            # sum(w x), and mean = sum(w x) / in-degree (edges counted, as gspmm's mean): an
            # owned target has all its in-edges in the part, so the count is the whole graph's
            g = self if kind == "sum" else self._weighted_mean()
        elif kind in ("mean", "sum"):
            g = Graph._wrap(C.derive(self._base.untyped_storage().data_ptr(),
                                     "mean" if kind == "mean" else "pattern"))
        elif kind == "weighted":
            g = self
        else:
            raise ValueError(f"unknown aggregation kind {kind!r}")
        src, dst = g.edge_index
        w = g.edge_weight
        halo = src >= self.num_owned
        own = ~halo

        def sub(mask, shift, n_src):
            return Graph(torch.stack([src[mask] - shift, dst[mask]]), edge_weight=(
                None if w is None else w[mask].contiguous()), size=(n_src, self.num_owned))
        hit = self._splits[kind] = (sub(own, 0, self.num_owned),
                                    sub(halo, self.num_owned, self.num_halo))
        return hit

    def _weighted_mean(self) -> Graph:
        src, dst = self.edge_index
        deg = torch.bincount(dst, minlength=self.num_owned).to(self.edge_weight.dtype)
        return Graph(torch.stack([src, dst]), edge_weight=self.edge_weight / deg[dst],
                     size=(self.num_src_nodes, self.num_dst_nodes))

    def to(self, device) -> "DistGraph":
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device != self.device:
            raise ValueError(f"a DistGraph lives on the device it was built for ({self.device}); "
                             f"build another with DistGraph(part, device={str(device)!r})")
        return self

    def variant(self, kind: str) -> Optional[Graph]:
        """The graph a layer's ``kind`` of aggregation runs on, where the part's own graph
        cannot derive it locally (GCN's normalisation needs the halo's degrees); None when
        the local derivation is the whole graph's."""
        if kind not in ("gcn", "gcn_improved", "gcn_noloops"):
            return None
        g = self._variants.get(kind)
        if g is None:
            with torch.autocast(self.device.type, enabled=False):  # as in _split
                g = self._variants[kind] = self._gcn(kind != "gcn_noloops",
                                                     2.0 if kind == "gcn_improved" else 1.0)
        return g

    @torch.no_grad()
    def _gcn(self, add_loops: bool, fill: float) -> Graph:
        """PyG's gcn_norm on the part: self loops as in add_remaining_self_loops (a vertex keeps
        its last loop's weight, else ``fill``), deg = the weighted in-degree with loops, and
        edge u -> v weighted deg[u]^-1/2 w deg[v]^-1/2; deg of a halo vertex comes from its
        owner (an owned vertex has all its in-edges here)."""
        dev = self.device
        src, dst = self.part.edge_index.to(dev, torch.int64)
        w = (self.part.edge_weight.to(dev, torch.float64) if self.part.edge_weight is not None
             else torch.ones(src.shape[0], dtype=torch.float64, device=dev))
        n = self.num_owned
        if add_loops:
            loop = src == dst
            pos = torch.arange(src.shape[0], device=dev)
            last = torch.full((n,), -1, dtype=torch.int64, device=dev)
            last.scatter_reduce_(0, dst[loop], pos[loop], "amax")
            loop_w = torch.where(last >= 0, w[last.clamp(min=0)],
                                 torch.full((n,), fill, dtype=w.dtype, device=dev))
            ids = torch.arange(n, device=dev)
            keep = ~loop
            src = torch.cat([src[keep], ids])
            dst = torch.cat([dst[keep], ids])
            w = torch.cat([w[keep], loop_w])
        deg = torch.zeros(n, dtype=w.dtype, device=dev).index_add_(0, dst, w)
        deg = self.halo(deg[:, None])[:, 0]
        dinv = deg.pow(-0.5)
        dinv = torch.where(torch.isinf(dinv), torch.zeros_like(dinv), dinv)
        norm = (dinv[src] * w * dinv[dst]).to(torch.float32)
        return Graph(torch.stack([src, dst]), edge_weight=norm,
                     size=(self.num_src_nodes, self.num_dst_nodes))

    def __repr__(self) -> str:
        return (f"spgnn.distributed.DistGraph(part={self.part.part} of {self.part.parts}, "
                f"num_owned={self.num_owned}, num_halo={self.num_halo}, "
                f"num_edges={self.num_edges}, device={self.device})")


def _spmm(g: Graph, x: Tensor, transpose: bool = False) -> Tensor:
    """sum over g's edges (times its weights when it has them) of x's source rows; with
    ``transpose``, over the reversed edges (the backward)."""
    h = g.handle()
    rows = g.num_dst_nodes
    if transpose:
        h = _ops.graph_variant(h, "transpose")
        rows = g.num_src_nodes
    op = "u_mul_e" if g.has_weights else "copy_u"
    return _ops.gspmm(h, op, "sum", x, None, rows, "")


class _Overlapped(torch.autograd.Function):
    """out = A_owned x_owned + A_halo x_halo, the exchange of x_halo overlapped with the first
    product; backward: the halo rows' gradients A_halo^T g travel back while A_owned^T g runs.
    Linear in x, so nothing is saved for the backward."""

    @staticmethod
    def forward(ctx, x: Tensor, g: "DistGraph", inner: Graph, boundary: Graph) -> Tensor:
        ctx.g, ctx.inner, ctx.boundary = g, inner, boundary
        ex = g.halo
        halo = x.new_empty((ex.num_halo,) + tuple(x.shape[1:]))
        send = x.index_select(0, ex._send_ids_on(x.device)).contiguous()
        work = ex._all_to_all(halo, send, ex.halo_counts, ex.send_counts, async_op=True)
        out = _spmm(inner, x)
        ex._wait(work, x.device)
        if boundary.num_edges:
            out.add_(_spmm(boundary, halo))
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        g, inner, boundary = ctx.g, ctx.inner, ctx.boundary
        ex = g.halo
        grad = grad.contiguous()
        if boundary.num_edges:
            g_halo = _spmm(boundary, grad, transpose=True)
        else:
            g_halo = grad.new_zeros((ex.num_halo,) + tuple(grad.shape[1:]))
        back = grad.new_empty((ex.num_send,) + tuple(grad.shape[1:]))
        work = ex._all_to_all(back, g_halo, ex.send_counts, ex.halo_counts, async_op=True)
        g_owned = _spmm(inner, grad, transpose=True)
        ex._wait(work, grad.device)
        ex._add_back(g_owned, back)
        return g_owned, None, None, None


class _OverlappedExtreme(torch.autograd.Function):
    """max/min over the local graph, the exchange of x_halo overlapped with the owned-source
    edges' reduction: each output then keeps the halo block's value where that block has edges
    and its value is strictly larger (max) / smaller (min), else the owned block's (so a tie
    goes to the owned source, which the local graph lists first, and a row without edges keeps
    0). Backward: each output's gradient goes to the source it came from; the halo sources'
    part travels back to the owners while the owned part is scattered."""

    @staticmethod
    def forward(ctx, x: Tensor, g: "DistGraph", inner: Graph, boundary: Graph,
                reduce: str) -> Tensor:
        ex = g.halo
        halo = x.new_empty((ex.num_halo,) + tuple(x.shape[1:]))
        send = x.index_select(0, ex._send_ids_on(x.device)).contiguous()
        work = ex._all_to_all(halo, send, ex.halo_counts, ex.send_counts, async_op=True)
        n = g.num_owned
        out, arg_o, _ = _ops.gspmm_arg(inner.handle(), "copy_u", reduce, x, None, n, "")
        ex._wait(work, x.device)
        take = torch.zeros_like(arg_o, dtype=torch.bool)
        arg_h = arg_o
        if boundary.num_edges:
            out_h, arg_h, _ = _ops.gspmm_arg(boundary.handle(), "copy_u", reduce, halo, None, n,
                                             "")
            better = out_h > out if reduce == "max" else out_h < out
            take = (arg_h >= 0) & ((arg_o < 0) | better)
            out = torch.where(take, out_h, out)
        ctx.g, ctx.halo_edges = g, bool(boundary.num_edges)
        ctx.save_for_backward(arg_o, arg_h, take)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        g = ctx.g
        ex = g.halo
        arg_o, arg_h, take = ctx.saved_tensors
        grad = grad.contiguous()
        zero = grad.new_zeros(())
        shape = tuple(grad.shape[1:])
        g_halo = grad.new_zeros((ex.num_halo,) + shape)
        if ctx.halo_edges:
            g_halo.scatter_add_(0, arg_h.clamp(min=0), torch.where(take, grad, zero))
        back = grad.new_empty((ex.num_send,) + shape)
        work = ex._all_to_all(back, g_halo, ex.send_counts, ex.halo_counts, async_op=True)
        keep = (arg_o >= 0) & ~take
        g_owned = grad.new_zeros((g.num_owned,) + shape)
        g_owned.scatter_add_(0, arg_o.clamp(min=0), torch.where(keep, grad, zero))
        ex._wait(work, grad.device)
        ex._add_back(g_owned, back)
        return g_owned, None, None, None, None


def all_reduce_gradients(params: Union[torch.nn.Module, Iterable[Tensor]],
                         group: Optional[dist.ProcessGroup] = None,
                         stats: Optional[CommStats] = None) -> None:
    """Sums the gradients of ``params`` (a module's parameters, or tensors) over the ranks, in
    one all-reduce of a flat buffer. A parameter without a gradient on this rank counts as
    zero, so every rank moves the same buffer. With each rank's loss scaled to its share of the
    whole (its local sum over the global count), the sum is the single-graph gradient."""
    if isinstance(params, torch.nn.Module):
        params = params.parameters()
    params = [p for p in params if p.requires_grad]
    if not params or dist.get_world_size(group) == 1:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    nbytes = flat.numel() * flat.element_size()
    if stats is not None:
        stats.add_bytes(nbytes, nbytes)
        with stats.timed(flat.device):
            dist.all_reduce(flat, group=group)
    else:
        dist.all_reduce(flat, group=group)
    offset = 0
    for p in params:
        k = p.numel()
        p.grad = flat[offset: offset + k].view_as(p)
        offset += k
