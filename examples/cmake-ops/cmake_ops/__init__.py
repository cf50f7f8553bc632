"""cmake_ops: torch.ops.cmake_ops.scaled_add, from a library built with CMake."""

from __future__ import annotations

import importlib.util

import torch

_spec = importlib.util.find_spec("cmake_ops._ops")  # the library's path; it is not a Python module
assert _spec is not None and _spec.origin is not None
torch.ops.load_library(_spec.origin)


def scaled_add(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """a + alpha * b, computed by the CMake-built library."""
    return torch.ops.cmake_ops.scaled_add(a, b, alpha)
