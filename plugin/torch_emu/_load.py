"""Loads the compiled library and registers the emu device (imported by torch_emu once the guard passed)."""

import warnings

import torch

from torch_emu import _build_info, _dynamo_device, _exit, _fake_tensor, _inductor_backend, _multiprocessing
from torch_emu import device as _device_module
from torch_emu._library import ops as _ops

__version__ = _build_info.PLUGIN_VERSION
__all__ = [
    "backend_meta",
    "build_info",
    "device_traces",
    "driver_api_version",
    "fallback_ops",
    "features",
    "reset_fallback_ops",
    "set_backend_meta",
]


def _register() -> None:
    if getattr(torch, "emu", None) is _device_module:
        return
    torch.utils.rename_privateuse1_backend("emu")
    torch._register_device_module("emu", _device_module)
    # Keywords only: torch 2.4 inserted a parameter in the middle of this signature.
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)


def _register_collectives() -> None:
    """A torch without torch.distributed, or a registry this release lays out differently, must not cost the device:
    the backend is then missing (the doctor and the smoke suite say why), and emu still loads."""
    if not torch.distributed.is_available():
        return
    try:
        from torch_emu import distributed

        distributed.register()
    except Exception as exc:
        warnings.warn(f"torch_emu could not register its collective backend: {exc!r}", stacklevel=2)


_register()
# torch.compile: Dynamo's device interface and Inductor's registry, each once its module is imported (not now).
_dynamo_device.install()
_inductor_backend.install()
# FakeTensorMode: a fake of an emu tensor keeps its backend metadata, once torch._subclasses.fake_tensor is imported.
_fake_tensor.install()
# torch.multiprocessing: an emu storage is refused in the receiving process instead of hanging it.
_multiprocessing.install()
# torch.distributed: the emu collective backend, registered for the device (and FSDP2's default mesh kept on CPU for
# groups that have no emu backend).
_register_collectives()
# Interpreter exit: the autograd threads for emu settle before Python finalizes (torch_emu/_exit.py).
_exit.install()


def build_info() -> dict:
    """What this wheel was built against, and what runs now."""
    facts = {k: v for k, v in vars(_build_info).items() if k.isupper()}
    facts["driver_api_runtime"] = "{}.{}".format(*divmod(_ops.driver_version(), 1000))
    facts["torch_runtime"] = torch.__version__
    return facts


def driver_api_version() -> tuple:
    """The API version of the driver library in use, e.g. (2, 1)."""
    return divmod(_ops.driver_version(), 1000)


def features() -> dict:
    """Which optional capabilities this build has (driver-gated)."""
    built = _ops.build_features()
    return {name: bool(built[name]) for name in ("async_streams", "event_timing", "pinned_memory", "graphs")}


def device_traces() -> tuple[bool, str]:
    """Whether torch.profiler shows emu's kernels, copies and collectives with device time
    (ProfilerActivity.PrivateUse1), and why not: it needs driver API 2.4 and torch 2.13's profiler registry."""
    reason = _ops.device_traces_unavailable()
    return not reason, reason


def fallback_ops() -> dict:
    """Ops that ran through the CPU fallback since start (or the last reset), with counts."""
    return dict(sorted(_ops.fallback_counts().items()))


def reset_fallback_ops() -> None:
    _ops.fallback_reset()


def set_backend_meta(tensor: torch.Tensor, values: dict) -> None:
    """Attaches named integers to an emu tensor's backend metadata; torch.save/torch.load and copies of the tensor
    keep them."""
    if tensor.device.type != "emu":
        raise ValueError(f"backend metadata belongs to emu tensors, not to a tensor on {tensor.device}")
    _ops.backend_meta_set(tensor, {str(k): int(v) for k, v in values.items()})


def backend_meta(tensor: torch.Tensor) -> dict:
    """The named integers set_backend_meta attached ({} if none)."""
    return dict(sorted(_ops.backend_meta_get(tensor).items()))
