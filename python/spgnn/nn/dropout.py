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
        ops.check_probability(p, "Dropout")
        self.p, self.inplace = float(p), bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        return ops.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
