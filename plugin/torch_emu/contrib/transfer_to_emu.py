"""`import torch_emu.contrib.transfer_to_emu` makes an unmodified CUDA-style script run on emu.

Like torch_npu's transfer_to_npu: after this import, device='cuda' (and 'cuda:N',
torch.device('cuda')) means emu, `.cuda()` moves to emu, and `torch.cuda.*` calls reach
torch.emu. It patches torch's functions that take a device, so import it before the
script makes its tensors; it is meant for migration and demos, not for libraries.

Also mapped: `torch.autocast("cuda")` (and `torch.cuda.amp.autocast`, `torch.amp.GradScaler("cuda")`, the
`torch.*autocast*` queries), `torch.load(map_location="cuda")` (strings, devices and dicts; a checkpoint saved
on CUDA loads onto emu without one), `torch.Generator("cuda")`, `torch.cuda.memory_summary()`, memory history
(`torch.cuda.memory._record_memory_history`, `_snapshot`, `_dump_snapshot`), and graphs
(`torch.cuda.CUDAGraph`, `torch.cuda.graph`, `graph_pool_handle`, and so torch's own `make_graphed_callables`), and
the profilers' CUDA activity (`ProfilerActivity.CUDA`, `use_cuda=True`, `use_device="cuda"`).

The import says what it did once, as a `torch_emu.contrib.TransferToEmuWarning` whose message starts with this
module's name. A test suite that runs with warnings as errors silences it with pytest's
`filterwarnings = ["ignore::torch_emu.contrib.TransferToEmuWarning"]` (or `-W` of that to pytest), with Python's
`-W "ignore:torch_emu.contrib.transfer_to_emu"` or the same in PYTHONWARNINGS (Python's own -W cannot name a
category from site-packages: it reads it before site-packages is on the path), or in code with
`warnings.filterwarnings("ignore", category=torch_emu.contrib.TransferToEmuWarning)` before the import.
"""

from __future__ import annotations

import copyreg
import functools
import re
import warnings
from typing import Any, Callable

import torch

import torch_emu  # noqa: F401  (registers emu)
from torch_emu.contrib import TransferToEmuWarning

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
    _same_builtin(fn, wrapper)
    return wrapper


def _same_builtin(original: Any, stand_in: Any) -> None:
    """TorchScript knows torch's functions by identity (torch.zeros is aten::zeros): the stand-in gets the original's
    entry, or scripting code that calls it fails (torch.distributed.optim scripts its optimizers at import). Scripted
    code calls the op itself, so a 'cuda' device inside TorchScript is not mapped."""
    op = torch.jit._builtins._find_builtin(original)
    if op is not None:
        torch.jit._builtins._register_builtin(stand_in, op)


def _tensor_cuda(self: torch.Tensor, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> torch.Tensor:
    if isinstance(device, int):
        device = torch.device("emu", device)
    return self.to(_swap(device) if device is not None else "emu", non_blocking=non_blocking)


def _module_cuda(self: torch.nn.Module, device: Any = None) -> torch.nn.Module:
    if isinstance(device, int):
        device = torch.device("emu", device)
    return self.to(_swap(device) if device is not None else "emu")


def _swap_device_class(original: Any) -> Any:
    """A stand-in for a C++ class torch exposes at the top level taking a device as its first argument or `type=` /
    `device=` (torch.device, torch.Generator): constructing it maps 'cuda' to emu and gives the original class's
    object; isinstance and issubclass see the original class. It is named torch.<name>, the attribute it replaces, so
    pickle finds it there (objects of the original class pickle through it too: see _pickle_through)."""

    class _SwappingMeta(type):
        def __instancecheck__(cls, obj: object) -> bool:
            return isinstance(obj, original)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, original)

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            if args:
                args = (_swap(args[0]), *args[1:])
            for key in ("type", "device"):
                if key in kwargs:
                    kwargs[key] = _swap(kwargs[key])
            return original(*args, **kwargs)

    name = original.__name__
    namespace = {"__doc__": original.__doc__, "__module__": "torch", "__qualname__": name, _PATCHED_MARK: True}
    stand_in = _SwappingMeta(name, (), namespace)
    _same_builtin(original, stand_in)
    _pickle_through(original, name)
    return stand_in


def _pickle_through(original: Any, name: str) -> None:
    """An object of the original class pickles as a call of torch.<name>: its own reduction names the class by its
    qualified name, which after the swap is the stand-in, and pickle refuses a name that is another object. In a
    process without transfer_to_emu the same pickle loads through the original class."""
    reduce = original.__reduce__

    def reduce_through_torch(obj: Any) -> Any:
        reduced = reduce(obj)
        return (getattr(torch, name), *reduced[1:])

    copyreg.pickle(original, reduce_through_torch)


def _patch_device_constructor() -> None:
    if not getattr(torch.device, _PATCHED_MARK, False):
        torch.device = _swap_device_class(torch.device)  # type: ignore[misc,assignment]


def _patch_generator() -> None:
    if not getattr(torch.Generator, _PATCHED_MARK, False):
        torch.Generator = _swap_device_class(torch.Generator)  # type: ignore[misc,assignment]


def _swap_location(location: Any) -> Any:
    if isinstance(location, dict):
        return {key: _swap(value) for key, value in location.items()}
    return _swap(location)


def _from_cuda(storage: Any, location: str) -> Any:
    """torch.load's restore for a checkpoint saved on CUDA: its storages, tagged 'cuda:N', go to emu:N; any other
    tag is left to torch (None)."""
    if _CUDA.match(location):
        return torch.serialization.default_restore_location(storage, _swap(location))
    return None


def _patch_load() -> None:
    original = torch.load
    if getattr(original, _PATCHED_MARK, False):
        return

    @functools.wraps(original)
    def load(*args: Any, **kwargs: Any) -> Any:
        if len(args) >= 2:
            args = (args[0], _swap_location(args[1]), *args[2:])
        elif kwargs.get("map_location") is None:
            kwargs["map_location"] = _from_cuda
        else:
            kwargs["map_location"] = _swap_location(kwargs["map_location"])
        return original(*args, **kwargs)

    setattr(load, _PATCHED_MARK, True)
    torch.load = load  # type: ignore[assignment]


def _replace_init(cls: Any, replacement: Callable[[Callable[..., None]], Callable[..., None]]) -> None:
    """cls.__init__ becomes replacement(original __init__), once: importing again patches nothing."""
    original = cls.__init__
    if getattr(original, _PATCHED_MARK, False):
        return
    init = functools.wraps(original)(replacement(original))
    setattr(init, _PATCHED_MARK, True)
    cls.__init__ = init


def _patch_autocast() -> None:
    """autocast("cuda") and GradScaler("cuda") take their device as a string, which the device stand-in never sees:
    their constructors map it; torch.cuda.amp's classes call the same constructors with "cuda"."""

    def autocast_init(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
            original(self, _swap(device_type), *args, **kwargs)

        return init

    def grad_scaler_init(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
            original(self, _swap(device), *args, **kwargs)

        return init

    _replace_init(torch.amp.autocast_mode.autocast, autocast_init)
    scaler = getattr(torch.amp, "GradScaler", None)
    if scaler is not None:
        _replace_init(scaler, grad_scaler_init)
    for name in ("is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype"):
        if hasattr(torch, name):
            setattr(torch, name, _wrap(getattr(torch, name)))


def _patch_cuda_module() -> None:
    emu = torch.emu  # type: ignore[attr-defined]
    for name in dir(emu):
        # torch.emu.memory is a module: torch.cuda keeps its own, which gets emu's memory history below.
        if not name.startswith("__") and name != "memory":
            try:
                setattr(torch.cuda, name, getattr(emu, name))
            except (AttributeError, TypeError):
                continue
    torch.cuda.is_available = emu.is_available
    torch.cuda.device_count = emu.device_count
    # Graphs: graph, graph_pool_handle and is_current_stream_capturing came with the names above; the class is named
    # after the device (torch.cuda.graphs' own functions, make_graphed_callables among them, reach it by this name).
    torch.cuda.CUDAGraph = emu.EmuGraph
    # Memory history: torch.cuda.memory._record_memory_history / _snapshot / _dump_snapshot record emu's allocator.
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot"):
        setattr(torch.cuda.memory, name, getattr(emu.memory, name))
    if hasattr(torch.cuda, "graphs"):
        for name in ("CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing"):
            setattr(torch.cuda.graphs, name, getattr(torch.cuda, name))


def _swap_activity(activity: Any) -> Any:
    kinds = torch.profiler.ProfilerActivity
    if isinstance(activity, dict):
        return {_swap_activity(key): value for key, value in activity.items()}
    device = getattr(kinds, "PrivateUse1", None)  # not in every release's profiler
    return device if device is not None and activity == kinds.CUDA else activity


def _patch_profilers() -> None:
    """torch.profiler.profile(activities=[..., ProfilerActivity.CUDA]) profiles emu's device (its device traces, where
    the build has them); torch.autograd.profiler.profile(use_cuda=True) or use_device="cuda" times ops on emu."""

    def profile_init(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            if kwargs.get("activities") is not None:
                kwargs["activities"] = [_swap_activity(a) for a in kwargs["activities"]]
            elif args and args[0] is not None:
                args = ([_swap_activity(a) for a in args[0]], *args[1:])
            original(self, *args, **kwargs)

        return init

    def legacy_profile_init(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            if kwargs.pop("use_cuda", False):
                kwargs["use_device"] = "emu"
            if kwargs.get("use_device") == "cuda":
                kwargs["use_device"] = "emu"
            original(self, *args, **kwargs)

        return init

    _replace_init(torch.profiler.profile, profile_init)
    _replace_init(torch.autograd.profiler.profile, legacy_profile_init)


def _swap_backend(backend: Any) -> Any:
    """ "nccl" and the "cuda:nccl" forms name emu's collective backend (as transfer_to_npu makes them "hccl")."""
    if not isinstance(backend, str):
        return backend
    from torch_emu.distributed import BACKEND

    if backend.lower() == "nccl":
        return BACKEND
    if ":" not in backend:
        return backend
    pairs = []
    for pair in backend.split(","):
        device, _, name = pair.partition(":")
        device, name = device.strip(), name.strip()
        if device == "cuda":
            device = "emu"
        if name.lower() == "nccl":
            name = BACKEND
        pairs.append(f"{device}:{name}")
    return ",".join(pairs)


def _wrap_backend(fn: Callable[..., Any]) -> Callable[..., Any]:
    if getattr(fn, _PATCHED_MARK, False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            kwargs["backend"] = _swap_backend(kwargs["backend"])
        elif args and fn.__name__ == "init_process_group":
            args = (_swap_backend(args[0]), *args[1:])
        if "device_id" in kwargs:
            kwargs["device_id"] = _swap(kwargs["device_id"])
        return fn(*args, **kwargs)

    setattr(wrapper, _PATCHED_MARK, True)
    return wrapper


def _patch_distributed() -> None:
    """init_process_group(backend="nccl") and new_group(backend="nccl") run on emu's backend, and NCCL counts as
    available, so a CUDA training script's checks pass unchanged."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    for name in ("init_process_group", "new_group"):
        setattr(dist, name, _wrap_backend(getattr(dist, name)))
        setattr(dist.distributed_c10d, name, getattr(dist, name))
    dist.is_nccl_available = lambda: True  # type: ignore[assignment]
    dist.distributed_c10d.is_nccl_available = dist.is_nccl_available
    import torch.cuda.nccl

    # A script (PyTorch's own tests among them) gates features on NCCL's version: answer the level eccl offers.
    from torch_emu.distributed import NCCL_EQUIVALENT

    torch.cuda.nccl.version = lambda: NCCL_EQUIVALENT  # type: ignore[assignment]


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
    _patch_autocast()
    _patch_load()
    _patch_generator()
    _patch_profilers()
    first = not getattr(torch.device, _PATCHED_MARK, False)
    _patch_device_constructor()
    _patch_distributed()
    if first:  # said once: importing again (after a failed import, for example) patches nothing new
        warnings.warn(
            "torch_emu.contrib.transfer_to_emu: 'cuda' now means the emu device in this process (device arguments, "
            ".cuda(), torch.cuda.*, autocast and GradScaler, torch.load's map_location, torch.Generator); silence "
            "this with the filter 'ignore::torch_emu.contrib.TransferToEmuWarning' (pytest) or "
            "'ignore:torch_emu.contrib.transfer_to_emu' (python -W, PYTHONWARNINGS)",
            TransferToEmuWarning,
            stacklevel=2,
        )


apply()
