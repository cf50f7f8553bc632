"""Inductor (torch.compile's default backend) on emu: registered as soon as Inductor's codegen registry loads.

Inductor cannot generate code for emu memory on this build, so its registration for emu refuses with a message
naming the backends that work, instead of Inductor's own `KeyError: 'emu'` deep inside lowering.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, NoReturn

import torch

from torch_emu._after_import import after_import

_REGISTRY_MODULE = "torch._inductor.codegen.common"
WORKING_BACKENDS = ("aot_eager", "eager")


class InductorUnsupportedError(RuntimeError):
    """torch.compile's default backend was asked to generate code for emu tensors."""


def _refuse() -> NoReturn:
    raise InductorUnsupportedError(
        f"torch.compile's default backend (Inductor) cannot generate code for emu devices with torch "
        f"{torch.__version__}: use torch.compile(..., backend=" + " or ".join(repr(b) for b in WORKING_BACKENDS) + ")"
    )


class RefusingScheduling:
    """Stands where Inductor looks up emu's kernel code generator; constructing it raises."""

    def __init__(self, scheduler: Any = None) -> None:
        _refuse()


class _RefusesOnFirstQuestion(type):
    # Inductor's first question to a device's wrapper class (before lowering, torch >= 2.6) is whether it supports
    # caching: refusing there names the working backends before Inductor has wrapped the error in an IR dump.
    @property
    def supports_caching(cls) -> NoReturn:
        _refuse()


class RefusingWrapperCodegen(metaclass=_RefusesOnFirstQuestion):
    """Stands where Inductor looks up emu's host-side wrapper code generator; using it raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse()

    @staticmethod
    def create(*args: Any, **kwargs: Any) -> NoReturn:
        _refuse()


def register(module: ModuleType) -> bool:
    """Registers emu with this Inductor's device registry; False if the release has none."""
    register_for_device = getattr(module, "register_backend_for_device", None)
    if register_for_device is None:
        return False
    register_for_device("emu", RefusingScheduling, RefusingWrapperCodegen)
    return True


def install() -> None:
    """Registers emu with Inductor now if its registry is loaded, else once it is."""
    after_import(_REGISTRY_MODULE, register)
