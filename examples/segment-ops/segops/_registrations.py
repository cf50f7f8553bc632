"""Autograd and fake (meta) kernels for segops's operators, in Python so the ordinary and stable-ABI builds share them.

torch.library.register_autograd and register_fake exist from torch 2.4; older releases get an autograd.Function.
"""

from __future__ import annotations

from typing import Any

import torch

_HAS_LIBRARY_API = hasattr(torch.library, "register_autograd") and hasattr(torch.library, "register_fake")


def _sum_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
    # d out[s] / d src[r] is 1 where index[r] == s: the gradient of a row is its segment's gradient.
    (index,) = ctx.saved_tensors
    return grad.index_select(0, index), None, None


if _HAS_LIBRARY_API:

    def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        _src, index, _num_segments = inputs
        ctx.save_for_backward(index)

    torch.library.register_autograd("segops::segment_sum", _sum_backward, setup_context=_setup_context)

    @torch.library.register_fake("segops::segment_sum")
    def _sum_fake(src: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
        return src.new_empty((num_segments, *src.shape[1:]))

    @torch.library.register_fake("segops::segment_count")
    def _count_fake(index: torch.Tensor, num_segments: int) -> torch.Tensor:
        return index.new_empty((num_segments,))

    def segment_sum(src: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
        """Sum of the rows of src per segment: out[index[r]] += src[r]; differentiable in src."""
        return torch.ops.segops.segment_sum(src, index, num_segments)

else:

    class _SegmentSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, src: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
            ctx.save_for_backward(index)
            return torch.ops.segops.segment_sum(src, index, num_segments)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
            return _sum_backward(ctx, grad)

    def segment_sum(src: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
        """Sum of the rows of src per segment: out[index[r]] += src[r]; differentiable in src."""
        return _SegmentSum.apply(src, index, num_segments)
