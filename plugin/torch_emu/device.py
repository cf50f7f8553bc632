"""The torch.emu module: devices, streams, events, memory, random state (registered as torch.emu)."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import torch

from torch_emu import memory  # noqa: F401  (torch.emu.memory, as torch.cuda.memory)
from torch_emu._library import ops as _ops
from torch_emu.graphs import EmuGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables
from torch_emu.streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream  # noqa: F401

__all__ = [
    "EmuGraph",
    "Event",
    "Stream",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "driver_version",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "graph",
    "graph_pool_handle",
    "host_empty_cache",
    "host_memory_stats",
    "host_reset_accumulated_memory_stats",
    "host_reset_peak_memory_stats",
    "init",
    "initial_seed",
    "is_available",
    "is_current_stream_capturing",
    "is_initialized",
    "make_graphed_callables",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]


def _index(device: Any = None) -> int:
    """The index of an emu device (None and "emu" mean the current one); an index out of range raises the runtime's
    message, "The device index is out of range. It must be in [0, N), but got I ..."."""
    if device is None:
        return _ops.device_current()
    if isinstance(device, int):
        return _ops.device_index(device)
    device = torch.device(device)
    if device.type != "emu":
        raise ValueError(f"expected an emu device, got {device}")
    return _ops.device_current() if device.index is None else _ops.device_index(device.index)


def is_available() -> bool:
    return _ops.device_count() > 0


def is_initialized() -> bool:
    """The driver starts when torch_emu loads; a forked child of such a process cannot use it."""
    return not _ops.fork_is_bad()


def init() -> None:
    """Initialises emu, as torch.cuda.init() initialises CUDA: the driver is already running once torch_emu has loaded,
    so this only checks that it can be used here. In a child forked after emu started it raises "Cannot re-initialize
    emu in forked subprocess. To use emu with multiprocessing, you must use the 'spawn' start method", as CUDA does."""
    _lazy_init()


def _lazy_init() -> None:
    """Raises "Cannot re-initialize emu in forked subprocess" in a forked child, as torch.cuda does."""
    _ops.fork_check()


def _is_in_bad_fork() -> bool:
    """True in a child forked after emu started: torch.manual_seed (in DataLoader workers, say) then leaves emu be."""
    return bool(_ops.fork_is_bad())


def get_amp_supported_dtype() -> list:
    """Lower-precision dtypes torch.autocast may use on emu."""
    return [torch.float16, torch.bfloat16]


def device_count() -> int:
    return _ops.device_count()


def current_device() -> int:
    return _ops.device_current()


def set_device(device: Any) -> None:
    _lazy_init()
    _ops.device_set(_index(device))


class device:
    """`with torch.emu.device(1):` makes emu:1 current for the block."""

    def __init__(self, device: Any) -> None:
        self.index = _index(device)
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = _ops.device_current()
        _ops.device_set(self.index)

    def __exit__(self, *exc: object) -> None:
        _ops.device_set(self.previous)


def synchronize(device: Any = None) -> None:
    """Waits for all work queued on every stream of the device."""
    _lazy_init()
    _ops.device_synchronize(_index(device))


def driver_version() -> int:
    """The driver's API version as major * 1000 + minor (e.g. 2002)."""
    return _ops.driver_version()


# ---- random state ----
# Each device's default generator is emu's own GeneratorImpl (the one random kernels draw from), handed to Python as a
# torch.Generator by the registry: seeding and state go through torch.Generator's methods, which lock the generator.
class _DefaultGenerators:
    """torch.emu.default_generators[i]: one torch.Generator object per device, made on first use."""

    def __init__(self) -> None:
        self._generators: dict = {}

    def __getitem__(self, index: int) -> torch.Generator:
        index = _index(index)
        generator = self._generators.get(index)
        if generator is None:
            generator = self._generators[index] = _ops.default_generator(index)
        return generator

    def __len__(self) -> int:
        return _ops.device_count()

    def __iter__(self) -> Iterator[torch.Generator]:
        return (self[index] for index in range(len(self)))


default_generators = _DefaultGenerators()


def manual_seed(seed: int) -> None:
    default_generators[_ops.device_current()].manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for generator in default_generators:
        generator.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    default_generators[_ops.device_current()].seed()


def seed_all() -> None:
    for generator in default_generators:
        generator.seed()


def initial_seed() -> int:
    return default_generators[_ops.device_current()].initial_seed()


def get_rng_state(device: Any = "emu") -> torch.Tensor:
    return default_generators[_index(device)].get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "emu") -> None:
    default_generators[_index(device)].set_state(new_state)


def get_rng_state_all() -> list:
    return [generator.get_state() for generator in default_generators]


def set_rng_state_all(new_states: list) -> None:
    for generator, state in zip(default_generators, new_states):
        generator.set_state(state)


# ---- memory ----
def memory_stats(device: Any = None) -> collections.OrderedDict:
    """The caching allocator's statistics under torch.cuda.memory_stats's names, sorted by name."""
    return collections.OrderedDict(sorted(_ops.memory_stats(_index(device)).items()))


def memory_allocated(device: Any = None) -> int:
    return int(_ops.memory_stats(_index(device))["allocated_bytes.all.current"])


def max_memory_allocated(device: Any = None) -> int:
    return int(_ops.memory_stats(_index(device))["allocated_bytes.all.peak"])


def memory_reserved(device: Any = None) -> int:
    return int(_ops.memory_stats(_index(device))["reserved_bytes.all.current"])


def max_memory_reserved(device: Any = None) -> int:
    return int(_ops.memory_stats(_index(device))["reserved_bytes.all.peak"])


def reset_peak_memory_stats(device: Any = None) -> None:
    _ops.memory_reset_peak(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Zeroes the "allocated" and "freed" totals and the event counters (num_device_alloc, ...)."""
    _ops.memory_reset_accumulated(_index(device))


def empty_cache() -> None:
    """Returns cached, unused device memory to the driver."""
    _lazy_init()
    _ops.memory_empty_cache()


def host_memory_stats() -> dict:
    """The pinned host allocator's counters (driver API 2.2; all zero on an older driver)."""
    return dict(_ops.host_memory_stats())


def host_empty_cache() -> None:
    """Returns cached pinned host blocks that no queued copy still uses to the driver."""
    _ops.host_memory_empty_cache()


def host_reset_peak_memory_stats() -> None:
    """Starts the pinned host allocator's peaks (`allocated_bytes.peak`, `reserved_bytes.peak`) from now."""
    _ops.host_memory_reset_peak()


def host_reset_accumulated_memory_stats() -> None:
    """Zeroes the pinned host allocator's running totals (`num_host_alloc`, `num_host_free`, bytes allocated/freed)."""
    _ops.host_memory_reset_accumulated()


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """The caching allocator's statistics for a device as a table, like torch.cuda.memory_summary."""
    from torch_emu.memory import summary

    index = _index(device)
    return summary(memory_stats(index), index, abbreviated)


def mem_get_info(device: Any = None) -> tuple:
    _lazy_init()
    return tuple(_ops.device_memory_info(_index(device)))


# ---- properties ----
class _DeviceProperties:
    def __init__(self, facts: dict) -> None:
        self.name = facts["name"]
        self.total_memory = facts["total_memory"]
        self.major = facts["major"]
        self.minor = facts["minor"]
        self.multi_processor_count = facts["multi_processor_count"]

    def __repr__(self) -> str:
        return (
            f"_EmuDeviceProperties(name='{self.name}', total_memory={self.total_memory >> 20}MB, "
            f"api={self.major}.{self.minor})"
        )


def get_device_properties(device: Any = None) -> _DeviceProperties:
    name, total_memory, major, minor, processors = _ops.device_properties(_index(device))
    return _DeviceProperties(
        {
            "name": name,
            "total_memory": total_memory,
            "major": major,
            "minor": minor,
            "multi_processor_count": processors,
        }
    )


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple:
    props = get_device_properties(device)
    return (props.major, props.minor)
