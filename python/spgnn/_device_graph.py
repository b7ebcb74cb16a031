"""Graphs of GPU edge lists built on the GPU, with torch.

The host build (spgnn's C++ graph core) copies the edges down, sorts them on the CPU and copies
the result up: fine once per training run, but a mini-batch loop (a new sampled edge_index every
step, as from PyG's NeighborLoader) paid it every step, and spgnn.nn layers ran 2-3x slower than
PyG's there (H200, bench/minibatch_vs_pyg.py). Here the same canonical arrays -- edges sorted by
(target, source), ties in input order, the int32/int64 index rule, the edge-order map -- are
built with torch's GPU sort on the caller's stream and handed to the core as views, and so are
the variants layers derive (GCN normalisation, mean weights, self loops, transposes). The only
host waits: one small read per build (id range, sortedness) and one per self-loop variant (how
many loops the graph had). The same reads carry the degree statistics `auto` picks kernels by,
for the graph and for its transpose (spgnn::provide_degree_summary), which the core would
otherwise read back itself, one more wait per graph. Everything must equal the host build's
arrays (python/tests/test_graph.py holds the two side by side).
"""
from __future__ import annotations

import struct
from typing import List, Optional

import torch
from torch import Tensor

from ._runtime import C, stream_of

_INDEX32_LIMIT = 2**31 - 1  # graph.cpp's kIndex32Limit: int32 holds ids and counts below it
_KEY_LIMIT = 2**62  # (target, source) keys as target * n_cols + source, with room to spare
_DROP = torch.iinfo(torch.int64).max  # the key of an edge a variant removes: sorts last


def _index_dtype(n: int, nnz: int) -> torch.dtype:
    return torch.int64 if n >= _INDEX32_LIMIT or nnz >= _INDEX32_LIMIT else torch.int32


def _rowptr(row: Tensor, n_rows: int) -> Tensor:
    """CSR offsets of sorted int64 rows."""
    return torch.searchsorted(row, torch.arange(n_rows + 1, device=row.device, dtype=row.dtype))


def _register(row, col, rowptr, val, source, n_rows, n_cols, kind, idx, parent=0,
              summaries=(None, None)):
    return C.graph_from_arrays(row.to(idx).contiguous(), col.to(idx).contiguous(),
                               rowptr.to(idx).contiguous(),
                               None if val is None else val.contiguous(),
                               None if source is None else source.contiguous(), n_rows, n_cols,
                               kind, parent, stream_of(row), summaries[0], summaries[1])


def _counts(ids: Tensor, n: int) -> Tensor:
    """How often each of 0..n-1 occurs in ids, clamped into range first: this runs before the
    read that names out-of-range ids, and must not index out of bounds meanwhile."""
    return torch.zeros(n, dtype=torch.int64, device=ids.device).index_add_(
        0, ids.clamp(0, n - 1), torch.ones_like(ids))


def _summary(deg: Tensor) -> List[Tensor]:
    """Max degree, empty rows and the sum of squared degrees of `deg` (int64), the last as the
    bits of a float64, so that one int64 read carries all three (see _unpack)."""
    if deg.numel() == 0:
        return [torch.zeros((), dtype=torch.int64, device=deg.device)] * 3
    return [deg.max(), (deg == 0).sum(), deg.double().square().sum().view(torch.int64)]


def _unpack(vals) -> tuple:
    return vals[0], vals[1], struct.unpack("<d", struct.pack("<q", vals[2]))[0]


def _first_bad(ids: Tensor, limit: int) -> int:
    return int(((ids < 0) | (ids >= limit)).nonzero()[0, 0])


def build(rows: Tensor, cols: Tensor, vals: Optional[Tensor], n_rows: int, n_cols: int,
          rows_name: str, cols_name: str, register=_register):
    """(handle array, nnz) of the graph of edges cols[k] -> rows[k] on their GPU, or None when
    the host build should run instead (keys past 62 bits, or the GPU is out of memory).
    `register` receives the arrays (tests pass their own, to read them on any device)."""
    if n_rows * n_cols >= _KEY_LIMIT:
        return None
    try:
        return _build(rows, cols, vals, n_rows, n_cols, rows_name, cols_name, register)
    except torch.cuda.OutOfMemoryError:
        return None


def _build(rows, cols, vals, n_rows, n_cols, rows_name, cols_name, register):
    E = rows.numel()
    rows, cols = rows.long(), cols.long()
    perm = None
    # The row and column degree statistics: the graph's, and its transpose's rows.
    summaries = ((0, n_rows, 0.0), (0, n_cols, 0.0))
    if E:
        key = rows * n_cols + cols
        parts = [rows.min(), rows.max(), cols.min(), cols.max(), (key[1:] < key[:-1]).any().long()]
        if n_rows and n_cols:  # else every id is out of range, named below
            parts += _summary(_counts(rows, n_rows)) + _summary(_counts(cols, n_cols))
        got = torch.stack(parts).tolist()  # the one wait
        rmin, rmax, cmin, cmax, unsorted = got[:5]
        # As the host build words it (graph.cpp's check_range): targets first.
        for ids, lo, hi, limit, name in ((rows, rmin, rmax, n_rows, rows_name),
                                         (cols, cmin, cmax, n_cols, cols_name)):
            if lo < 0 or hi >= limit:
                k = _first_bad(ids, limit)
                raise ValueError(f"{name}[{k}] = {int(ids[k])} is out of range: node ids must "
                                 f"lie in [0, {limit})")
        summaries = (_unpack(got[5:8]), _unpack(got[8:11]))
        if unsorted:
            key, perm = torch.sort(key, stable=True)
        row = key // n_cols
        col = key - row * n_cols
    else:
        row = col = rows
    val = None
    if vals is not None:
        val = vals.detach().index_select(0, perm) if perm is not None else vals.detach().clone()
    idx = _index_dtype(max(n_rows, n_cols), E)
    return register(row, col, _rowptr(row, n_rows), val, perm, n_rows, n_cols, "base", idx,
                    summaries=summaries)


# Variants built here (any other kind goes to the host derivation).
KINDS = ("gcn", "gcn_improved", "gcn_noloops", "mean", "loops", "pattern", "transpose")


def derive(addr: int, kind: str, info: dict, register=_register):
    """(handle array, nnz) of a variant of the GPU-built graph at `addr`, attached to it; None
    for the pattern of a graph without values (the graph itself)."""
    n_rows, n_cols = info["n_rows"], info["n_cols"]
    # The parent's arrays as they are (views): variants that keep its structure share them.
    row_in, col_in, rowptr, val, _ = C.graph_arrays(addr)
    same = C.degree_summaries(addr)  # (rows, columns): a variant of the same structure's
    E = row_in.numel()
    dev = row_in.device
    idx = rowptr.dtype
    if kind == "pattern":
        if val is None:
            return None  # already a pattern: the graph itself
        return register(row_in, col_in, rowptr, None, None, n_rows, n_cols, kind, idx, addr,
                        same)
    if kind == "mean":
        deg = (rowptr[1:] - rowptr[:-1]).to(torch.float32)
        return register(row_in, col_in, rowptr, (1.0 / deg).index_select(0, row_in), None,
                        n_rows, n_cols, kind, idx, addr, same)
    row, col = row_in.long(), col_in.long()
    if kind == "transpose":
        perm = torch.sort(col, stable=True)[1]
        row_t = col.index_select(0, perm)
        val_t = None if val is None else val.index_select(0, perm)
        return register(row_t, row.index_select(0, perm), _rowptr(row_t, n_cols), val_t, perm,
                        n_cols, n_rows, kind, idx, addr, same[::-1])
    gcn = kind.startswith("gcn")
    if gcn and n_rows != n_cols:
        raise ValueError(f"GCN normalisation needs a square graph, got {n_rows} x {n_cols}")
    if kind == "loops" and n_rows > n_cols:
        raise ValueError(f"self loops need every target to be a source too (target i = source "
                         f"i), got {n_rows} targets and {n_cols} sources")
    w = None
    if gcn:
        w = val if val is not None else torch.ones(E, dtype=torch.float32, device=dev)
    source = None
    if kind != "gcn_noloops":
        # Every existing loop goes; one loop per target comes in at its sorted place, taking
        # the weight and position of the target's last loop (gcn_norm's add_remaining_self_loops)
        # or its first (the host build's "one loop per vertex" under keep).
        pos = torch.arange(E, device=dev)
        is_loop = row == col
        if gcn:
            pick = torch.full((n_rows,), -1, dtype=torch.int64, device=dev).scatter_reduce_(
                0, row, torch.where(is_loop, pos, -1), "amax")
        else:
            pick = torch.full((n_rows,), E, dtype=torch.int64, device=dev).scatter_reduce_(
                0, row, torch.where(is_loop, pos, E), "amin")
            pick = torch.where(pick < E, pick, -1)
        # The variant's degrees: the graph's without its loops, plus target i's loop in row i
        # and column i.
        kept = (~is_loop).long()
        rdeg = torch.zeros(n_rows, dtype=torch.int64, device=dev).index_add_(0, row, kept) + 1
        cdeg = torch.zeros(n_cols, dtype=torch.int64, device=dev).index_add_(0, col, kept)
        cdeg[:n_rows] += 1
        got = torch.stack([is_loop.sum()] + _summary(rdeg) + _summary(cdeg)).tolist()  # the wait
        loops, summaries = got[0], (_unpack(got[1:4]), _unpack(got[4:7]))
        nnz = E - loops + n_rows
        targets = torch.arange(n_rows, device=dev)
        key = torch.cat([torch.where(is_loop, _DROP, row * n_cols + col), targets * (n_cols + 1)])
        key, perm = torch.sort(key, stable=True)
        key, perm = key[:nnz], perm[:nnz]
        source = torch.cat([pos, pick]).index_select(0, perm)
        row = key // n_cols if nnz else key
        col = key - row * n_cols
        if gcn:
            fill = 2.0 if kind == "gcn_improved" else 1.0
            given = w.index_select(0, pick.clamp(min=0)) if E else w.new_empty(n_rows)
            w = torch.cat([w, torch.where(pick >= 0, given, fill)]).index_select(0, perm)
        idx = _index_dtype(n_rows, E + n_rows) if gcn else _index_dtype(max(n_rows, n_cols), nnz)
    if not gcn:
        return register(row, col, _rowptr(row, n_rows), None, source, n_rows, n_cols, kind, idx,
                        addr, summaries)
    # D^-1/2 (A + I) D^-1/2 in float64, as the host build: deg = the target's incoming weights.
    wd = w.double()
    deg = torch.zeros(n_rows, dtype=torch.float64, device=dev).index_add_(0, row, wd)
    dinv = torch.where(deg > 0, 1.0 / deg.sqrt(), torch.zeros_like(deg))
    norm = (dinv.index_select(0, row) * wd * dinv.index_select(0, col)).float()
    if source is None:  # gcn_noloops: the parent's structure, new weights
        return register(row_in, col_in, rowptr, norm, None, n_rows, n_cols, kind, idx, addr,
                        same)
    return register(row, col, _rowptr(row, n_rows), norm, source, n_rows, n_cols, kind, idx,
                    addr, summaries)


def tensor(addr: int, name: str) -> Tensor:
    """graph_tensor(name) of a GPU-built graph, computed on the current stream."""
    row, col, rowptr, val, src = C.graph_arrays(addr)
    if name == "row":
        return row.long()
    if name == "col":
        return col.long()
    if name == "edge_source":
        return src.clone() if src is not None else torch.arange(row.numel(), device=row.device)
    if name == "values":
        return val.clone() if val is not None else torch.ones(row.numel(), device=row.device)
    if name == "inv_degree":
        deg = (rowptr[1:] - rowptr[:-1]).to(torch.float32)
        return torch.where(deg > 0, 1.0 / deg, torch.zeros_like(deg))
    raise ValueError(f"graph_tensor: unknown name '{name}' (row, col, edge_source, values, "
                     "inv_degree)")
