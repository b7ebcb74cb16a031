"""Plumbing shared by the ops: the compiled core, streams, devices and argument checks."""
from __future__ import annotations

import contextlib
import math
import numbers
from typing import Optional, Sequence

import torch
from torch import Tensor
from torch.utils.dlpack import to_dlpack as _to_dlpack

from . import _C

__all__ = ["C", "stream_of", "on_device", "arr", "check_tensor", "check_float",
           "check_same_dtype", "check_int", "check_real", "INT64_MAX", "dtype_name"]

C = _C


def stream_of(t: Tensor) -> int:
    """The caller's current CUDA stream on t's device (0 for host tensors): spgnn queues its
    kernels there, so they are ordered with the caller's own work."""
    if t.is_cuda:
        return torch.cuda.current_stream(t.device).cuda_stream
    return 0


def on_device(t: Tensor):
    """Makes t's GPU the current one while spgnn runs (DLPack export needs it, and spgnn's
    kernels launch on the data's device)."""
    if t.is_cuda and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def arr(t: Optional[Tensor]):
    """A tensor as the extension takes it: a DLPack capsule of the same memory (detached:
    DLPack refuses tensors that require grad). The capsule, not the tensor: given a tensor,
    nanobind goes through ``Tensor.__dlpack__`` and its Python-level checks, 9 us of host time
    per call with two arrays against 0.2 us per capsule (CPU, torch 2.15). spgnn queues its work
    on the tensor's current stream (stream_of), so the producer-stream handshake that
    ``__dlpack__(stream=...)`` exists for is not needed."""
    return None if t is None else _to_dlpack(t.detach())


_FLOATS = (torch.float32, torch.float64)


def dtype_name(dtype) -> str:
    """torch.float32 -> 'float32', as error messages name dtypes."""
    return str(dtype).replace("torch.", "")


def check_tensor(t, name: str, *, ndim: Optional[Sequence[int]] = None, dtypes=None,
                 device: Optional[torch.device] = None, rows: Optional[int] = None,
                 rows_name: str = "", contiguous: bool = True) -> None:
    """Raises a clear TypeError/ValueError naming `name` when t is not what an op takes."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    # A meta or other device's tensor would otherwise fail inside DLPack, naming no argument.
    # (Under torch.compile the ops see fake tensors only through their register_fake rules.)
    # (is_cuda / is_cpu: 0.06 us against device.type's 0.34, on every op's every tensor.)
    if not (t.is_cuda or t.is_cpu):
        raise ValueError(f"{name} is on {t.device}: spgnn's ops take CPU or CUDA tensors")
    # Ops read arrays in place; layers (contiguous=False) pass sparse x on to torch's Linear.
    if contiguous and t.layout != torch.strided:
        raise ValueError(f"{name} is a {t.layout} tensor: this op takes a dense (strided) tensor")
    if dtypes is not None and t.dtype not in dtypes:
        want = ", ".join(dtype_name(d) for d in dtypes)
        raise TypeError(f"{name} must have dtype {want}, got {dtype_name(t.dtype)}")
    if ndim is not None and t.dim() not in ndim:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndim))} dimensions, "
                         f"got shape {tuple(t.shape)}")
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device}, but the graph is on {device}")
    if rows is not None and t.dim() > 0 and t.shape[0] != rows:
        raise ValueError(f"{name} has {t.shape[0]} rows, expected {rows_name} = {rows} "
                         f"(shape {tuple(t.shape)})")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name} is not contiguous (strides {t.stride()}): spgnn reads its "
                         f"inputs in place and never copies them; pass {name}.contiguous()")


_HALVES = (torch.float16, torch.bfloat16)


def check_float(t: Tensor, name: str, **kw) -> None:
    """A feature tensor: float32 anywhere; float64 (the float64 reference path) on the CPU;
    float16/bfloat16 anywhere (gspmm and gsddmm have GPU kernels that read them; the other ops
    compute in float32, each result rounded once)."""
    if isinstance(t, Tensor) and t.is_cuda and t.dtype == torch.float64:
        raise TypeError(f"{name} is float64 on {t.device}: spgnn's GPU kernels take float32 "
                        "(float64 runs on the CPU reference path)")
    check_tensor(t, name, dtypes=_FLOATS + _HALVES, **kw)


def check_same_dtype(*named) -> None:
    """The float operands of one op share one dtype: (tensor, name) pairs, None skipped."""
    named = [(t, n) for t, n in named if t is not None]
    for t, n in named[1:]:
        if t.dtype != named[0][0].dtype:
            raise TypeError(f"{n} is {dtype_name(t.dtype)} but {named[0][1]} is "
                            f"{dtype_name(named[0][0].dtype)}: one op takes one "
                            "float dtype")


# ---- Python numbers ------------------------------------------------------------------------------
# The compiled core takes int64 (and uint64 seeds); nanobind answers an int past that range with
# its signature dump ("incompatible function arguments"), naming no argument. So do torch's own
# shape arguments (a traceback from torch.empty).
INT64_MAX = 2 ** 63 - 1


def check_int(v, name: str, lo: int = 0, hi: int = INT64_MAX, what: Optional[str] = None) -> int:
    """v as a Python int in [lo, hi], else a ValueError naming `name`: ints and numpy's integers
    pass, bools and floats never (int() would silently truncate 2.9 to 2)."""
    if what is None:
        what = f"an int in [{lo}, {hi}]"
    if isinstance(v, torch.SymInt):  # a size under torch.compile: checked, not specialised
        if not lo <= v <= hi:
            raise ValueError(f"{name} must be {what}, got {v!r}")
        return v
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not lo <= int(v) <= hi:
        raise ValueError(f"{name} must be {what}, got {v!r}")
    return int(v)


def check_real(v, name: str, lo: Optional[float] = None, hi: Optional[float] = None, *,
               hi_open: bool = False) -> float:
    """v as a finite float (lo <= v <= hi, or < hi with hi_open), else a ValueError naming
    `name`, as spgnn.ops.dropout's probability check does; a string such as "0.5" is refused,
    not parsed (torch's and PyG's layers fail on one later, inside their forward)."""
    if lo is None and hi is None:
        what = "a finite real number"
    elif hi is None:
        what = f"a real number >= {lo}"
    else:
        what = f"a real number in [{lo}, {hi}{')' if hi_open else ']'}"
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool)
    if ok:
        try:
            f = float(v)
        except OverflowError:  # an int past float's range
            ok = False
        else:
            ok = (math.isfinite(f) and (lo is None or f >= lo)
                  and (hi is None or (f < hi if hi_open else f <= hi)))
    if not ok:
        raise ValueError(f"{name} must be {what}, got {v!r}")
    return f
