"""The Work objects of the eccl process group: an emu event recorded after the collective on its stream."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


class WorkKeeper:
    """Keeps the Python side of the works a group returned alive while C++ may still call them.

    C++ callers (DDP's parameter check and bucket reducer on older torch releases) hold only the C++ half of a Work
    returned from Python. Where torch's binding does not keep the Python object alive, it is collected at once, and
    the C++ half's wait() falls back to the base Work's, which waits forever: torch 2.1's DDP hung in
    _verify_param_shape_across_processes. A work is kept until it is waited for or its future is taken (after which
    callers use the future); beyond LIMIT kept works, the oldest whose collectives have finished are let go.
    """

    LIMIT = 1024

    def __init__(self) -> None:
        self._works: dict[int, dist.Work] = {}

    def keep(self, work: dist.Work) -> None:
        self._works[id(work)] = work
        if len(self._works) > self.LIMIT:
            finished = [key for key, kept in self._works.items() if kept.is_completed()]
            for key in finished[: len(self._works) - self.LIMIT // 2]:
                del self._works[key]

    def release(self, work: dist.Work) -> None:
        self._works.pop(id(work), None)

    def clear(self) -> None:
        self._works.clear()


class _KeptWork(dist.Work):
    """A Work a WorkKeeper may hold: let go once it is waited for or its future is taken."""

    def __init__(self) -> None:
        super().__init__()
        self._keeper: WorkKeeper | None = None

    def kept_by(self, keeper: WorkKeeper) -> None:
        self._keeper = keeper
        keeper.keep(self)

    def _let_go(self) -> None:
        if self._keeper is not None:
            self._keeper.release(self)
            self._keeper = None


class EmuWork(_KeptWork):
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
        self._let_go()
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
        self._let_go()
        future: torch.futures.Future = torch.futures.Future()  # type: ignore[type-arg]
        future.set_result(self._result)
        return future


class _DoneWork(EmuWork):
    def __init__(self, result: list[torch.Tensor]) -> None:
        super().__init__(result, None)


class _WrappedWork(_KeptWork):
    """A gloo work behind this group's name (CPU tensors)."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self._inner = inner

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        self._let_go()
        return bool(self._inner.wait())

    def is_completed(self) -> bool:
        return bool(self._inner.is_completed())

    def get_future(self) -> torch.futures.Future:  # type: ignore[type-arg]
        self._let_go()
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
