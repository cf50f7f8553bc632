"""torch.compile's view of emu: a Dynamo device interface, registered as soon as Dynamo is imported.

Importing torch._dynamo costs seconds, so `import torch_emu` does not do it: if Dynamo is not loaded yet, an import
hook registers the interface right after torch._dynamo.device_interface has run. Releases without
register_interface_for_device (before 2.2) get nothing and compile with the backends that do not need it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from torch_emu._after_import import after_import

_INTERFACE_MODULE = "torch._dynamo.device_interface"


def _index(device: Any) -> int:
    """A device index from whatever Dynamo and Inductor pass: None, an int, 'emu:1' or a torch.device."""
    if device is None:
        return torch.emu.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "emu":
        raise ValueError(f"expected an emu device, got {device}")
    return torch.emu.current_device() if device.index is None else device.index


def make_interface(base: type) -> type:
    """The emu interface as a subclass of this release's DeviceInterface (its shape follows CudaInterface)."""
    from torch_emu import device as emu
    from torch_emu import streams
    from torch_emu._library import ops

    # What a compile worker process asks before it may touch the device (set in the parent, read in the worker).
    worker_devices: dict[str, int] = {}
    worker_properties: dict[str, list] = {}

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            worker_devices["emu"] = device

        @staticmethod
        def current_device() -> int:
            return worker_devices.get("emu", emu.current_device())

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            if "emu" not in worker_properties:
                worker_properties["emu"] = [emu.get_device_properties(i) for i in range(emu.device_count())]
            index = Worker.current_device() if device is None else _index(device)
            return worker_properties["emu"][index]

    def exchange(device: int) -> int:
        previous = emu.current_device()
        if device >= 0 and device != previous:
            emu.set_device(device)
        return previous

    class EmuInterface(base):  # type: ignore[misc, valid-type]
        """Dynamo and Inductor reach emu devices, streams and events through this."""

        device = emu.device
        Event = streams.Event
        Stream = streams.Stream

        current_device = staticmethod(emu.current_device)
        set_device = staticmethod(emu.set_device)
        device_count = staticmethod(emu.device_count)
        stream = staticmethod(streams.stream)
        current_stream = staticmethod(streams.current_stream)
        set_stream = staticmethod(streams.set_stream)
        synchronize = staticmethod(emu.synchronize)
        get_device_properties = staticmethod(emu.get_device_properties)
        memory_allocated = staticmethod(emu.memory_allocated)
        exchange_device = staticmethod(exchange)
        maybe_exchange_device = staticmethod(exchange)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int = 0) -> None:
            ops.stream_set(int(stream_id), int(device_index))

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            """The current stream's id: what generated code hands back to the runtime to launch on it."""
            return int(ops.stream_current(int(device_idx))[0])

        @staticmethod
        def is_available() -> bool:
            return emu.is_available()

        @staticmethod
        def get_compute_capability(device: Any = None) -> int:
            major, minor = emu.get_device_capability(_index(device))
            return int(major) * 10 + int(minor)

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def is_triton_capable(device: Any = None) -> bool:
            return False

    EmuInterface.Worker = Worker  # type: ignore[attr-defined]
    return EmuInterface


def register(module: ModuleType) -> bool:
    """Registers emu with this Dynamo's device registry; False if the release has none."""
    register_for_device = getattr(module, "register_interface_for_device", None)
    base = getattr(module, "DeviceInterface", None)
    if register_for_device is None or base is None:
        return False
    interface = make_interface(base)
    register_for_device("emu", interface)
    for index in range(torch.emu.device_count()):
        register_for_device(f"emu:{index}", interface)
    return True


def install() -> None:
    """Registers the interface now if Dynamo is loaded, else once it is."""
    after_import(_INTERFACE_MODULE, register)
