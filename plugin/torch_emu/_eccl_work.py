"""The Work objects of the eccl process group: an emu event recorded after the collective on its stream."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


class EmuWork(dist.Work):
    """A queued collective: an emu event recorded after it on its stream."""

    def __init__(self, result: list[torch.Tensor], device: torch.device | None, blocking: bool = False) -> None:
        super().__init__()
        self._result = result
        self._device = device
        self._event = None
        if device is not None:
            self._event = torch.emu.Event()  # type: ignore[attr-defined]
            self._event.record(torch.emu.current_stream(device))  # type: ignore[attr-defined]
        self._blocking = blocking

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        if self._event is not None:
            if self._blocking:  # barrier: the host waits, as ProcessGroupNCCL's barrier does
                self._event.synchronize()
            else:
                torch.emu.current_stream(self._device).wait_event(self._event)  # type: ignore[attr-defined]
        return True

    def is_completed(self) -> bool:
        return self._event is None or bool(self._event.query())

    def is_success(self) -> bool:
        return self.is_completed()

    def synchronize(self) -> None:
        if self._event is not None:
            self._event.synchronize()

    def result(self) -> list[torch.Tensor]:
        return self._result

    def get_future(self) -> torch.futures.Future:  # type: ignore[type-arg]
        # Completed at once, as ProcessGroupNCCL's future is for work queued on the stream: whatever runs next on the
        # stream sees the result.
        future: torch.futures.Future = torch.futures.Future()  # type: ignore[type-arg]
        future.set_result(self._result)
        return future


class _DoneWork(EmuWork):
    def __init__(self, result: list[torch.Tensor]) -> None:
        super().__init__(result, None)


class _WrappedWork(dist.Work):
    """A gloo work behind this group's name (CPU tensors)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self._inner = inner

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        return bool(self._inner.wait())

    def is_completed(self) -> bool:
        return bool(self._inner.is_completed())

    def get_future(self) -> torch.futures.Future:  # type: ignore[type-arg]
        return self._inner.get_future()

    def result(self) -> list[torch.Tensor]:
        return list(self._inner.result())


class _P2PWork(EmuWork):
    """A send or receive still pending in its group: waiting (or asking) hands the pending group to the driver."""

    def __init__(self, group: Any, tensors: list[torch.Tensor], device: torch.device) -> None:
        super().__init__(tensors, None)
        self._group = group
        self._tensors = tensors
        self._device = device

    def _issued(self) -> EmuWork:
        self._group._flush()
        if self._event is None:
            self._event = torch.emu.Event()  # type: ignore[attr-defined]
            self._event.record(torch.emu.current_stream(self._device))  # type: ignore[attr-defined]
        return self

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        return EmuWork.wait(self._issued(), timeout)

    def is_completed(self) -> bool:
        return EmuWork.is_completed(self._issued())

    def get_future(self) -> torch.futures.Future:  # type: ignore[type-arg]
        return EmuWork.get_future(self._issued())
