"""torch.emu.Stream and torch.emu.Event, over the runtime's streams and the device guard's events."""

from __future__ import annotations

import weakref

import torch

from torch_emu._library import ops as _ops


def _index(device) -> int:
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "emu":
        raise ValueError(f"expected an emu device, got {device}")
    return -1 if device.index is None else device.index


# c10::DeviceType::PrivateUse1, the same number in every release.
_PRIVATEUSE1 = 20
_StreamBase = getattr(torch, "Stream", torch._C.Stream)


class Stream(_StreamBase):
    """An in-order queue of work on one emu device. Stream() takes one from the device's pool.

    A torch.Stream underneath, so torch APIs that take one (Tensor.record_stream) accept it. priority is numbered as
    CUDA's: lower is higher; emu has two, 0 and -1 (priority_range()), and any negative priority means -1.
    """

    def __new__(
        cls, device=None, priority: int = 0, *, stream_id: int | None = None, device_index: int | None = None
    ) -> Stream:
        if stream_id is None:
            stream_id, device_index = _ops.stream_from_pool(_index(device), int(priority))
        index = int(device_index if device_index is not None else _ops.device_current())
        return super().__new__(cls, stream_id=int(stream_id), device_index=index, device_type=_PRIVATEUSE1)

    @property
    def device(self) -> torch.device:
        return torch.device("emu", self.device_index)

    @property
    def priority(self) -> int:
        """0 (normal) or -1 (high), kept from the pool the stream came from."""
        return int(_ops.stream_priority(self.stream_id, self.device_index))

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(least, greatest) priority, as torch.cuda.Stream.priority_range: (0, -1)."""
        least, greatest = _ops.stream_priority_range()
        return int(least), int(greatest)

    def query(self) -> bool:
        return _ops.stream_query(self.stream_id, self.device_index)

    def synchronize(self) -> None:
        _ops.stream_synchronize(self.stream_id, self.device_index)

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        self.wait_event(stream.record_event())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and (self.stream_id, self.device_index) == (
            other.stream_id,
            other.device_index,
        )

    def __hash__(self) -> int:
        return hash((self.stream_id, self.device_index))

    def __repr__(self) -> str:
        return f"<torch.emu.Stream device=emu:{self.device_index} stream_id={self.stream_id} priority={self.priority}>"


class Event:
    """A marker in a stream's order: query, synchronize, wait on another stream, time (driver API 2.x).

    Holds a handle of the runtime's event table; the driver event goes with the last reference to this object.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        if interprocess:
            raise NotImplementedError("emu events cannot be shared between processes")
        self._handle = int(_ops.event_create(enable_timing))
        weakref.finalize(self, _ops.event_destroy, self._handle)
        self.enable_timing = enable_timing

    def record(self, stream: Stream | None = None) -> None:
        stream = stream or current_stream()
        _ops.event_record(self._handle, stream.stream_id, stream.device_index)

    def wait(self, stream: Stream | None = None) -> None:
        stream = stream or current_stream()
        _ops.event_block(self._handle, stream.stream_id, stream.device_index)

    def query(self) -> bool:
        return bool(_ops.event_query(self._handle))

    def synchronize(self) -> None:
        _ops.event_synchronize(self._handle)

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event to end_event (both recorded with enable_timing=True)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time needs two events created with enable_timing=True")
        return float(_ops.event_elapsed_time(self._handle, end_event._handle))

    def __repr__(self) -> str:
        return f"<torch.emu.Event recorded={bool(_ops.event_recorded(self._handle))}>"


def _declare_stream_bases() -> None:
    """Torch 2.2-2.5's Dynamo accepts a device's Stream and Event only as subclasses of the abstract bases in
    torch._streambase (register_interface_for_device asserts it); emu's classes implement their methods, so they are
    registered as virtual subclasses there. From 2.6 those bases are deprecated aliases of torch.Stream/torch.Event,
    which Dynamo no longer checks."""
    import abc

    try:
        from torch import _streambase
    except ImportError:  # torch 2.1
        return
    for base_name, cls in (("_StreamBase", Stream), ("_EventBase", Event)):
        base = getattr(_streambase, base_name, None)
        if isinstance(base, abc.ABCMeta) and not issubclass(cls, base):
            base.register(cls)


_declare_stream_bases()


def current_stream(device=None) -> Stream:
    stream_id, index = _ops.stream_current(_index(device))
    return Stream(stream_id=stream_id, device_index=index)


def default_stream(device=None) -> Stream:
    stream_id, index = _ops.stream_default(_index(device))
    return Stream(stream_id=stream_id, device_index=index)


def set_stream(stream: Stream) -> None:
    _ops.stream_set(stream.stream_id, stream.device_index)


class StreamContext:
    """`with torch.emu.stream(s):` makes s current on its device (and its device current)."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self._saved: Stream | None = None
        self._saved_device = -1

    def __enter__(self) -> Stream | None:
        if self.stream is None:
            return None
        self._saved_device = _ops.device_current()
        _ops.device_set(self.stream.device_index)
        self._saved = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is None or self._saved is None:
            return
        set_stream(self._saved)
        _ops.device_set(self._saved_device)


def stream(stream: Stream | None) -> StreamContext:
    return StreamContext(stream)
