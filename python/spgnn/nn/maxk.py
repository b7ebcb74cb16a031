"""MaxK (MaxK-GNN): a nonlinearity that keeps the k largest features of each row."""
from __future__ import annotations

import torch
from torch import Tensor

from .. import _ops
from .._runtime import check_float, check_int

__all__ = ["MaxK"]


class MaxK(torch.nn.Module):
    """``MaxK(k)(x)`` keeps the k largest values of each row of x [N, F] and zeroes the rest
    (ties go to the lower column), a drop-in for ReLU between layers. The selection and the
    scatter run on spgnn's MaxK kernels; the gradient flows to the kept entries only. To
    aggregate the kept values without the zeros, use spgnn.ops.maxk and spgnn.ops.cbsr_spgemm."""

    def __init__(self, k: int):
        super().__init__()
        self.k = check_int(k, "MaxK: k", 1, what="a positive int (at most 2^63 - 1)")

    def forward(self, x: Tensor) -> Tensor:
        check_float(x, "x", ndim=(2,), contiguous=False)
        if x.layout != torch.strided:
            raise ValueError(f"MaxK: x is a {x.layout} tensor: MaxK takes a dense (strided) "
                             "tensor (x.to_dense())")
        if x.dtype != torch.float32:
            raise TypeError(f"MaxK takes float32, got {x.dtype}")
        F = x.shape[1]
        if self.k > F:
            raise ValueError(f"MaxK: k = {self.k} exceeds the {F} features of x")
        if F > 65536:
            raise ValueError(f"MaxK needs at most 65536 features, got {F}")
        data, index = _ops.maxk(x.contiguous(), self.k)
        return _ops.cbsr_to_dense(data, index, F)

    def extra_repr(self) -> str:
        return f"k={self.k}"
