"""Reading the data spgnn's CLI reads: NumPy .npy files (also gzip/zstd-compressed, detected by
their magic number) and dataset directories (the layout of ../shared/data: edge_index.npy,
x.npy, y.npy, train/val/test_idx.npy)."""
from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from ._runtime import C

__all__ = ["read_npy", "read_dataset", "read_partition"]


def _add_masks(out: SimpleNamespace, n: int) -> None:
    """``train_mask``/``val_mask``/``test_mask`` ([n] bool) from the ``*_idx`` fields."""
    for split in ("train", "val", "test"):
        idx = getattr(out, f"{split}_idx")
        mask = None
        if idx is not None:
            mask = torch.zeros(n, dtype=torch.bool)
            mask[idx] = True
        setattr(out, f"{split}_mask", mask)


def _path(path, name: str = "path") -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, got {type(path).__name__}")
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "\0" in path:  # the C++ reader would stop at the NUL and open another file
        raise ValueError(f"{name} contains a NUL character: {path!r}")
    return path


def read_npy(path: str) -> torch.Tensor:
    """A .npy (or .npy.gz / .npy.zst) file as a CPU tensor."""
    path = _path(path)
    if os.path.exists(path) and not os.path.isfile(path):  # /dev/zero, a FIFO: no end to read
        raise ValueError(f"{path}: not a regular file")
    return torch.from_dlpack(C.read_npy(path))


def read_dataset(path: str, edge_index_rows: str = "auto", *,
                 allow_nonfinite: bool = False) -> SimpleNamespace:
    """A dataset directory as PyG-style fields: ``edge_index`` ([2, E], row 0 = source, row 1 =
    target, sorted by target), ``x``, ``y``, ``train_mask``/``val_mask``/``test_mask`` (and the
    ``*_idx`` arrays), ``num_nodes``, ``num_classes``. ``edge_index_rows`` says which row of the
    file's edge_index holds the sources: ``"src,dst"`` (PyG's), ``"dst,src"``, or ``"auto"``
    (the directory's spgnn.json, else PyG's). NaN/Inf features are an error naming the entry
    unless ``allow_nonfinite`` (for a script that imputes them itself)."""
    if not isinstance(edge_index_rows, str):
        raise TypeError("edge_index_rows must be 'auto', 'src,dst' or 'dst,src', got "
                        f"{edge_index_rows!r}")
    d = C.read_dataset(_path(path), edge_index_rows, bool(allow_nonfinite))
    out = SimpleNamespace(name=d["name"], num_nodes=d["num_nodes"],
                          num_classes=d["num_classes"])
    for key in ("edge_index", "x", "y", "train_idx", "val_idx", "test_idx"):
        setattr(out, key, None if d[key] is None else torch.from_dlpack(d[key]))
    _add_masks(out, out.num_nodes)
    return out


def read_partition(path: str, part: int) -> SimpleNamespace:
    """Part ``part`` of a directory written by ``spgnn partition`` (checked against its
    meta.json): ``graph``, the local ``spgnn.Graph`` from ``num_local`` sources (owned vertices
    first, then the halo grouped by owner part) to ``num_owned`` targets, and its
    ``edge_index``/``edge_weight``; ``global_ids`` (local -> global), ``halo_offsets`` and
    ``send_offsets``/``send_ids`` (what spgnn.distributed.HaloExchange moves); ``x``, ``y`` and
    the splits of the owned vertices (``*_idx`` as local ids, ``*_mask`` over owned vertices)
    when the partition was made from a dataset; ``parts``, ``num_nodes``, ``num_classes``."""
    from .graph import Graph
    if not isinstance(part, int) or isinstance(part, bool) or part < 0:
        raise ValueError(f"part must be a non-negative int, got {part!r}")
    d = C.read_partition_part(_path(path), part)
    out = SimpleNamespace(part=part, **{k: d[k] for k in (
        "parts", "method", "num_nodes", "num_classes", "num_owned", "num_local")})
    for key in ("edge_index", "edge_weight", "global_ids", "halo_offsets", "send_offsets",
                "send_ids", "x", "y", "train_idx", "val_idx", "test_idx"):
        setattr(out, key, None if d[key] is None else torch.from_dlpack(d[key]))
    out.graph = Graph(out.edge_index, edge_weight=out.edge_weight,
                      size=(out.num_local, out.num_owned))
    _add_masks(out, out.num_owned)
    return out
