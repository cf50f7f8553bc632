"""FakeTensorMode's fake of an emu tensor carries the tensor's backend metadata, as torch.save and copies do.

torch (checked up to 2.15) builds a fake from a new meta tensor (FakeTensorConverter.from_real_tensor through
torch._subclasses.meta_utils) and copies only the conj and neg bits onto it, so every PrivateUse1 backend's metadata
is lost at fakeification: what torch.compile and export see of an emu tensor then differs from the tensor. PyTorch's
reference backend tests that the fake keeps it (test_fake_tensor_metadata_preservation in torch_openreg's
test_storage.py) for a torch that copies it itself. Here the converter is wrapped once its module is imported: the
fake gets a copy of the real tensor's metadata (of the tensor inside, for a FunctionalTensor, whose wrapper carries
none), copied TensorImpl to TensorImpl in C++, not through set_tensor_metadata, which would pick the hook by the
device the fake reports ("meta" while a kernel runs). On a torch that copies it itself, the copy is the same map again.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import torch

from torch_emu._after_import import after_import
from torch_emu._library import ops as _ops

_PATCHED = "_torch_emu_copies_backend_meta"


def _real_tensor(t: torch.Tensor) -> torch.Tensor:
    """The tensor that holds the metadata: a FunctionalTensor's inner tensor, else t."""
    try:
        from torch._subclasses.functional_tensor import FunctionalTensor
    except ImportError:  # a torch without FunctionalTensor has nothing to unwrap
        return t
    if isinstance(t, FunctionalTensor):
        return torch._from_functional_tensor(t.elem)
    return t


def _copies_backend_meta(from_real_tensor: Any) -> Any:
    if getattr(from_real_tensor, _PATCHED, False):
        return from_real_tensor

    @functools.wraps(from_real_tensor)
    def wrapped(self: Any, fake_mode: Any, t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        fake = from_real_tensor(self, fake_mode, t, *args, **kwargs)
        # Only emu tensors; torch 2.1's memoized_only=True may give None.
        if isinstance(fake, torch.Tensor) and isinstance(t, torch.Tensor) and t.device.type == "emu":
            # Past the fake mode, which refuses a real tensor in an op (torch.compile converts under it), and past
            # the subclasses' __torch_dispatch__: the kernel only moves metadata between the two TensorImpls.
            with torch._C._DisableTorchDispatch():
                _ops.backend_meta_copy(_real_tensor(t), fake)
        return fake

    setattr(wrapped, _PATCHED, True)
    return wrapped


def _patch(module: ModuleType) -> None:
    converter = module.FakeTensorConverter
    converter.from_real_tensor = _copies_backend_meta(converter.from_real_tensor)


def install() -> None:
    """Wraps FakeTensorConverter.from_real_tensor once torch._subclasses.fake_tensor is imported (not now)."""
    after_import("torch._subclasses.fake_tensor", _patch)
