"""Reading the data spgnn's CLI reads: NumPy .npy files (also gzip/zstd-compressed, detected by
their magic number) and dataset directories (the layout of ../shared/data: edge_index.npy,
x.npy, y.npy, train/val/test_idx.npy)."""
from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from ._runtime import C, check_int, dtype_name

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


def read_partition(path: str, part: int, *, allow_nonfinite: bool = False) -> SimpleNamespace:
    """Part ``part`` of a directory written by ``spgnn partition`` (checked against its
    meta.json): ``graph``, the local ``spgnn.Graph`` from ``num_local`` sources (owned vertices
    first, then the halo grouped by owner part) to ``num_owned`` targets, and its
    ``edge_index``/``edge_weight``; ``global_ids`` (local -> global), ``halo_offsets`` and
    ``send_offsets``/``send_ids`` (what spgnn.distributed.HaloExchange moves); ``x``, ``y`` and
    the splits of the owned vertices (``*_idx`` as local ids, ``*_mask`` over owned vertices)
    when the partition was made from a dataset; ``parts``, ``num_nodes``, ``num_classes``.
    As read_dataset: NaN/Inf features are an error naming the entry unless ``allow_nonfinite``,
    and so is a label outside ``[0, num_classes)`` of meta.json (-1 marks an unlabelled vertex)."""
    from .graph import Graph
    part = check_int(part, "part", 0, what="a non-negative int (at most 2^63 - 1)")
    path = _path(path)
    d = C.read_partition_part(path, part)
    out = SimpleNamespace(part=part, **{k: d[k] for k in (
        "parts", "method", "num_nodes", "num_classes", "num_owned", "num_local")})
    for key in ("edge_index", "edge_weight", "global_ids", "halo_offsets", "send_offsets",
                "send_ids", "x", "y", "train_idx", "val_idx", "test_idx"):
        setattr(out, key, None if d[key] is None else torch.from_dlpack(d[key]))
    # The core checks the part's files against meta.json but not their values: these are
    # read_dataset's checks, which a partition's x and y (copied from a dataset) skipped.
    part_dir = os.path.join(path, f"part-{part}")
    if out.x is not None and not allow_nonfinite:
        _check_finite(out.x, os.path.join(part_dir, "x.npy"), out.global_ids)
    if out.y is not None:
        _check_labels(out.y, os.path.join(part_dir, "y.npy"), out.num_classes,
                      os.path.join(path, "meta.json"), out.global_ids)
    out.graph = Graph(out.edge_index, edge_weight=out.edge_weight,
                      size=(out.num_local, out.num_owned))
    _add_masks(out, out.num_owned)
    return out


def _check_finite(x: torch.Tensor, file: str, global_ids: torch.Tensor) -> None:
    """A NaN or Inf feature does not stop training: ReLU and max turn some NaNs into numbers, so
    the run ends with an accuracy computed from garbage (the core's read_dataset refuses them
    for that reason)."""
    if not x.is_floating_point():
        raise ValueError(f"{file}: features must be float32 (or float64, float16), found "
                         f"{dtype_name(x.dtype)}")
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        i, j = (int(v) for v in torch.nonzero(bad.reshape(x.shape[0], -1))[0])
        v = float(x.reshape(x.shape[0], -1)[i, j])
        raise ValueError(f"{file}: feature x[{i}, {j}] (vertex {int(global_ids[i])}) is "
                         f"{'NaN' if v != v else 'infinite'}; features must be finite "
                         "(allow_nonfinite=True in spgnn.io.read_partition accepts them)")


def _check_labels(y: torch.Tensor, file: str, num_classes: int, meta: str,
                  global_ids: torch.Tensor) -> None:
    """Labels a loss can take: class ids below meta.json's num_classes, or -1 (unlabelled). A
    larger one fails inside cross_entropy (an IndexError on the CPU, a device-side assert that
    ends the CUDA context on a GPU), naming neither file."""
    if y.dim() != 1 or y.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{file}: labels must be a 1-D int64 (or int32) array, found "
                         f"{dtype_name(y.dtype)} {tuple(y.shape)}")
    bad = (y < -1) | (y >= num_classes)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise ValueError(f"{file}: label y[{i}] = {int(y[i])} (vertex {int(global_ids[i])}) is "
                         f"outside [0, num_classes = {num_classes}) of {meta} (-1 marks an "
                         "unlabelled vertex)")
