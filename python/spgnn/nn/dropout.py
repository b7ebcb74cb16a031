"""Dropout whose mask is recomputed from a seed instead of stored (spgnn.ops.dropout)."""
from __future__ import annotations

import torch
from torch import Tensor

from .. import ops

__all__ = ["Dropout"]


class Dropout(torch.nn.Module):
    """A drop-in for ``torch.nn.Dropout(p, inplace)`` on spgnn.ops.dropout: the same result
    distribution, a hashed mask that the backward recomputes (none is stored), and a parallel
    CPU kernel. Identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p!r}")
        self.p, self.inplace = float(p), bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        return ops.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
