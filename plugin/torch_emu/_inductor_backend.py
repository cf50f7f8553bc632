"""Inductor (torch.compile's default backend) on emu: registered as soon as Inductor's codegen registry loads.

On releases where emu's Inductor route is verified (VERIFIED_RELEASES), graphs on emu compile to Inductor's C++
kernels run as driver kernels (_inductor_emu.py, imported on first use: importing Inductor's code generators from
inside the registry's own import would be circular). Elsewhere the registration refuses at once with a message
naming the backends that work, instead of Inductor's `KeyError: 'emu'` deep inside lowering.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, NoReturn

import torch

from torch_emu._after_import import after_import
from torch_emu._torch_release import torch_release

_REGISTRY_MODULE = "torch._inductor.codegen.common"
WORKING_BACKENDS = ("emu", "aot_eager", "eager")
# Minor releases whose smoke suite compiles and trains an MLP and a GPT-2 step on emu with Inductor (test_compile.py,
# test_models.py).
VERIFIED_RELEASES = frozenset({(2, 13), (2, 14), (2, 15)})
# TORCH_EMU_INDUCTOR=0 turns the route off (the refusal then applies), =1 tries it on an unverified release.
_SWITCH = "TORCH_EMU_INDUCTOR"


class InductorUnsupportedError(RuntimeError):
    """torch.compile's default backend was asked to generate code for emu tensors where it cannot."""


def route_enabled() -> bool:
    """Whether Inductor generates code for emu here (a verified release, unless TORCH_EMU_INDUCTOR says otherwise)."""
    switch = os.environ.get(_SWITCH, "")
    if switch in ("0", "1"):
        return switch == "1"
    return torch_release() in VERIFIED_RELEASES


def verified_releases_text() -> str:
    """The releases the route is verified on, as "torch 2.13, 2.14"."""
    return "torch " + ", ".join(f"{a}.{b}" for a, b in sorted(VERIFIED_RELEASES))


def _route_off_reason() -> str:
    if os.environ.get(_SWITCH) == "0":
        return f"{_SWITCH}=0 turned it off"
    return f"torch_emu's Inductor route is verified on {verified_releases_text()}"


def _refuse() -> NoReturn:
    why = _route_off_reason()
    raise InductorUnsupportedError(
        f"torch.compile's default backend (Inductor) does not generate code for emu devices with torch "
        f"{torch.__version__} ({why}): use torch.compile(..., backend="
        + " or ".join(repr(b) for b in WORKING_BACKENDS)
        + ")"
    )


class _RefusesOnFirstQuestion(type):
    # Inductor's first question to a device's wrapper class (before lowering, torch >= 2.6) is whether it supports
    # caching: refusing there names the working backends before Inductor has wrapped the error in an IR dump.
    @property
    def supports_caching(cls) -> NoReturn:
        _refuse()


class RefusingScheduling:
    """Stands where Inductor looks up emu's kernel code generator; constructing it raises."""

    def __init__(self, scheduler: Any = None) -> None:
        _refuse()


class RefusingWrapperCodegen(metaclass=_RefusesOnFirstQuestion):
    """Stands where Inductor looks up emu's host-side wrapper code generator; using it raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse()

    @staticmethod
    def create(*args: Any, **kwargs: Any) -> NoReturn:
        _refuse()


class RefusingDeviceOpOverrides:
    """Stands where Inductor looks up emu's device op overrides: torch 2.7 asks for them before any code generator
    (GraphLowering.init_wrapper_code), so without an entry there it fails with KeyError: 'emu'."""

    def __getattr__(self, name: str) -> NoReturn:
        _refuse()


class _ResolvesOnFirstUse(type):
    # Everything Inductor asks of the wrapper class (create, supports_caching, ...) goes to the real one.
    def __getattr__(cls, name: str) -> Any:
        from torch_emu._inductor_emu import EmuWrapperCodegen

        return getattr(EmuWrapperCodegen, name)


class Scheduling:
    """emu's kernel code generator, imported when Inductor first schedules an emu graph."""

    def __new__(cls, scheduler: Any = None) -> Any:
        from torch_emu._inductor_emu import EmuScheduling

        return EmuScheduling(scheduler)


class WrapperCodegen(metaclass=_ResolvesOnFirstUse):
    """emu's host-side wrapper code generator, imported when Inductor first asks for it."""


def _device_op_overrides(base: type) -> Any:
    """Python the wrapper writes for emu devices and streams (a subclass of this release's DeviceOpOverrides)."""

    class EmuDeviceOpOverrides(base):  # type: ignore[misc, valid-type]
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"def {name}(index):\n    return torch.emu.current_stream(index).stream_id\n"

        def set_device(self, device_idx: int) -> str:
            return f"torch.emu.set_device({device_idx})"

        def synchronize(self) -> str:
            return "torch.emu.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.emu.device({device_idx})"

        def cpp_kernel_type(self) -> str:
            return "void*"

    return EmuDeviceOpOverrides()


def register(module: ModuleType) -> bool:
    """Registers emu with this Inductor's device registry; False if the release has none."""
    register_for_device = getattr(module, "register_backend_for_device", None)
    if register_for_device is None:
        return False
    if not route_enabled():
        register_for_device("emu", RefusingScheduling, RefusingWrapperCodegen)
        register_op_overrides = getattr(module, "register_device_op_overrides", None)
        if register_op_overrides is not None:
            register_op_overrides("emu", RefusingDeviceOpOverrides())
        return True
    register_for_device("emu", Scheduling, WrapperCodegen)
    module.register_device_op_overrides("emu", _device_op_overrides(module.DeviceOpOverrides))
    return True


def compile_for_emu(gm: Any, example_inputs: list[Any], options: dict[str, Any] | None = None) -> Any:
    """torch.compile(backend="emu"), found through the package's `torch_dynamo_backends` entry point.

    Where emu's Inductor route is on, the graph goes to Inductor (its C++ kernels run on the emu stream) with options
    as Inductor config patches; elsewhere to AOTAutograd's eager graphs (what backend "aot_eager" does), which work
    wherever Dynamo does. Graphs hold emu and CPU tensors only: another device is refused by name.
    """
    foreign = sorted(
        {str(x.device) for x in example_inputs if isinstance(x, torch.Tensor) and x.device.type not in ("emu", "cpu")}
    )
    if foreign:
        raise ValueError(
            f"backend 'emu' compiles graphs of emu and CPU tensors; this graph also has {', '.join(foreign)}"
        )
    if route_enabled():
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs, config_patches=options)
    if options:
        raise ValueError(
            f"backend 'emu' runs AOTAutograd's eager graphs with torch {torch.__version__} (Inductor does not generate "
            f"code for emu here: {_route_off_reason()}), which takes no options; got {sorted(options)}"
        )
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend("aot_eager")(gm, example_inputs)


def install() -> None:
    """Registers emu with Inductor now if its registry is loaded, else once it is."""
    after_import(_REGISTRY_MODULE, register)
