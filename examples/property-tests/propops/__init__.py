"""propops: torch.ops.propops.running_max, from the library built by setup.py."""

from __future__ import annotations

import importlib.util

import torch

_spec = importlib.util.find_spec("propops._ops")  # the library's path; it defines no Python module
assert _spec is not None and _spec.origin is not None
torch.ops.load_library(_spec.origin)


def running_max(x: torch.Tensor) -> torch.Tensor:
    """Each element the largest of x up to it (1-D)."""
    return torch.ops.propops.running_max(x)
