"""Segment reductions as torch operators: torch.ops.segops.segment_sum / segment_count, and segment_mean on top.

The compiled library holds no Python bindings; it registers its operators with torch's dispatcher when loaded.
"""

from __future__ import annotations

from pathlib import Path

import torch

from segops._build_info import STABLE_ABI, TORCH_VERSION

__all__ = ["STABLE_ABI", "TORCH_VERSION", "segment_count", "segment_mean", "segment_sum"]


def _load() -> None:
    found = sorted(Path(__file__).parent.glob("_segops*.so"))
    if len(found) != 1:
        raise ImportError(f"segops: expected one compiled library beside {__file__}, found {[p.name for p in found]}")
    torch.ops.load_library(str(found[0]))


_load()

from segops import _registrations  # noqa: E402  (registers autograd and fake kernels for the loaded operators)

segment_sum = _registrations.segment_sum


def segment_count(index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """How many rows fall in each segment (int64, length num_segments)."""
    return torch.ops.segops.segment_count(index, num_segments)


def segment_mean(src: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Mean of the rows of each segment; an empty segment gives zeros."""
    counts = segment_count(index, num_segments).clamp(min=1).to(src.dtype)
    return segment_sum(src, index, num_segments) / counts.view(-1, *([1] * (src.dim() - 1)))
