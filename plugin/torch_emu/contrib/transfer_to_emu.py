"""`import torch_emu.contrib.transfer_to_emu` makes an unmodified CUDA-style script run on emu.

Like torch_npu's transfer_to_npu: after this import, device='cuda' (and 'cuda:N',
torch.device('cuda')) means emu, `.cuda()` moves to emu, and `torch.cuda.*` calls reach
torch.emu. It patches torch's functions that take a device, so import it before the
script makes its tensors; it is meant for migration and demos, not for libraries.
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any, Callable

import torch

import torch_emu  # noqa: F401  (registers emu)

_CUDA = re.compile(r"^cuda(?=$|:)")
_PATCHED_MARK = "__emu_transfer__"

# Factories and conversions that accept a device argument.
_TORCH_FUNCTIONS = (
    "tensor",
    "as_tensor",
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "randint_like",
    "randperm",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "normal",
    "tril_indices",
    "triu_indices",
    "from_numpy",
)
_TENSOR_METHODS = ("to", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor")
_MODULE_METHODS = ("to",)


def _swap(device: Any) -> Any:
    if isinstance(device, str):
        return _CUDA.sub("emu", device)
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("emu", device.index) if device.index is not None else torch.device("emu")
    return device


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(fn, _PATCHED_MARK, False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "device" in kwargs:
            kwargs["device"] = _swap(kwargs["device"])
        args = tuple(_swap(a) if isinstance(a, (str, torch.device)) else a for a in args)
        return fn(*args, **kwargs)

    setattr(wrapper, _PATCHED_MARK, True)
    return wrapper


def _tensor_cuda(self: torch.Tensor, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> torch.Tensor:
    if isinstance(device, int):
        device = torch.device("emu", device)
    return self.to(_swap(device) if device is not None else "emu", non_blocking=non_blocking)


def _module_cuda(self: torch.nn.Module, device: Any = None) -> torch.nn.Module:
    if isinstance(device, int):
        device = torch.device("emu", device)
    return self.to(_swap(device) if device is not None else "emu")


def _patch_device_constructor() -> None:
    original = torch.device
    if getattr(original, _PATCHED_MARK, False):
        return

    class _DeviceMeta(type):
        def __instancecheck__(cls, obj: object) -> bool:
            return isinstance(obj, original)

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], str):
                args = (_swap(args[0]), *args[1:])
            if "type" in kwargs:
                kwargs["type"] = _swap(kwargs["type"])
            return original(*args, **kwargs)

    class device(metaclass=_DeviceMeta):
        pass

    setattr(device, _PATCHED_MARK, True)
    device.__doc__ = original.__doc__
    torch.device = device  # type: ignore[misc,assignment]


def _patch_cuda_module() -> None:
    emu = torch.emu  # type: ignore[attr-defined]
    for name in dir(emu):
        if not name.startswith("__"):
            try:
                setattr(torch.cuda, name, getattr(emu, name))
            except (AttributeError, TypeError):
                continue
    torch.cuda.is_available = emu.is_available
    torch.cuda.device_count = emu.device_count


def apply() -> None:
    for name in _TORCH_FUNCTIONS:
        if hasattr(torch, name):
            setattr(torch, name, _wrap(getattr(torch, name)))
    for name in _TENSOR_METHODS:
        setattr(torch.Tensor, name, _wrap(getattr(torch.Tensor, name)))
    for name in _MODULE_METHODS:
        setattr(torch.nn.Module, name, _wrap(getattr(torch.nn.Module, name)))
    torch.Tensor.cuda = _tensor_cuda  # type: ignore[method-assign]
    torch.nn.Module.cuda = _module_cuda  # type: ignore[method-assign]
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", "emu"))  # type: ignore[method-assign,assignment]
    _patch_cuda_module()
    _patch_device_constructor()
    warnings.warn("torch_emu.contrib.transfer_to_emu: 'cuda' now means the emu device in this process", stacklevel=2)


apply()
