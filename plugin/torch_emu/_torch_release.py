"""The installed torch's release line, for the few behaviours that differ by release."""

from __future__ import annotations

import torch


def torch_release() -> tuple[int, int]:
    """The running torch's (major, minor): (2, 13) for 2.13.0+cpu, and for a vendor build such as 2.13.0a0+nv25.01."""
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()))


def torch_at_least(major: int, minor: int) -> bool:
    """Whether the running torch is release major.minor or later."""
    return torch_release() >= (major, minor)
