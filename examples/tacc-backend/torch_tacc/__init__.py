"""torch-tacc: the toy accelerator tacc as torch's PrivateUse1 device "tacc" (tensors on device="tacc").

Loading the compiled library registers tacc's allocator, device guard and kernels with torch; it needs the tacc
toolkit's runtime (libtacc.so from the tacc-toolkit package) on the system, of the API major it was built against.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import ModuleType

import torch

from torch_tacc._build_info import TACC_API, TORCH_VERSION

__all__ = ["TACC_API", "TORCH_VERSION", "memory_allocated", "runtime_version"]


def _load() -> None:
    found = sorted(Path(__file__).parent.glob("_C*.so"))
    if len(found) != 1:
        raise ImportError(
            f"torch_tacc: expected one compiled library beside {__file__}, found {[p.name for p in found]}"
        )
    major = TACC_API.split(".")[0]
    try:
        ctypes.CDLL(f"libtacc.so.{major}")
    except OSError as exc:
        raise ImportError(
            f"torch_tacc needs the tacc toolkit's runtime libtacc.so.{major} (API {TACC_API}; install tacc-toolkit "
            f"{major}.x): {exc}"
        ) from None
    torch.ops.load_library(str(found[0]))


_load()


def runtime_version() -> str:
    """The loaded toolkit's API version, "major.minor"."""
    number = torch.ops.tacc.runtime_version()
    return f"{number // 1000}.{number % 1000}"


def memory_allocated(device: int = 0) -> tuple[int, int]:
    """Bytes allocated on a tacc device now, and at most (toolkit API 2 and later)."""
    current, peak = torch.ops.tacc.memory_allocated(device)
    return current, peak


def _is_available() -> bool:
    return bool(torch.ops.tacc.device_count() > 0)


def _set_device(device: int | str | torch.device) -> None:
    index = device if isinstance(device, int) else torch.device(device).index
    torch.ops.tacc.set_device(0 if index is None else index)


def _device_module() -> ModuleType:
    """torch.tacc: what torch and users ask of a device module (availability, count, current device)."""
    module = ModuleType("torch.tacc")
    for name, function in {
        "is_available": _is_available,
        "device_count": torch.ops.tacc.device_count,
        "current_device": torch.ops.tacc.current_device,
        "set_device": _set_device,
        "is_initialized": lambda: True,
        "_is_in_bad_fork": lambda: False,
        "manual_seed_all": lambda seed: None,
    }.items():
        setattr(module, name, function)
    return module


torch.utils.rename_privateuse1_backend("tacc")
torch._register_device_module("tacc", _device_module())
torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
