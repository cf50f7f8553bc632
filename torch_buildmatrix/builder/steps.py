"""Times and records the steps of one build or cell."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from torch_buildmatrix.builder.records.model import BuildResult, CellResult, StepResult
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.util.failures import DISK_FULL_ERRNOS, is_resource_error, resource_message
from torch_buildmatrix.util.process import CHILDREN
from torch_buildmatrix.vocab import Cause, FailureClass, Status


@dataclass(frozen=True)
class Note:
    """A progress event that is a line saying what a step did ("check: relabelled ..."): shown, never a state."""

    line: str

    def __str__(self) -> str:
        return self.line  # where events are shown as text (the outdated report's probe), a note reads as its line


# Events for whoever displays progress: (what, event). `what` is a cell id, or "build <build id>"; event is the state
# it is in, "queued" | "up-to-date" | "<step name>" | "retry <n>" | "passed" | "failed" | "interrupted", or a Note.
ProgressEvent = str | Note
ProgressCallback = Callable[[str, ProgressEvent], None]
BUILD = "build "  # the prefix of a build's name in progress events


class StepRecorder:
    def __init__(
        self, result: CellResult | BuildResult, progress: ProgressCallback | None = None, name: str | None = None
    ) -> None:
        """name: what progress calls the build or cell (default: its id)."""
        self.result = result
        self.progress = progress
        self.name = name or result.id

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        CHILDREN.check(name)  # a stopping run starts no new step
        if self.progress:
            self.progress(self.name, name)
        start = time.monotonic()
        try:
            yield
        except StepFailed:
            self.result.steps.append(StepResult(name, Status.FAILED, round(time.monotonic() - start, 3)))
            raise
        except Exception as exc:
            # An unexpected error inside a step still fails only this cell.
            self.result.steps.append(StepResult(name, Status.FAILED, round(time.monotonic() - start, 3)))
            if isinstance(exc, OSError) and is_resource_error(exc):
                cause = Cause.DISK_FULL if exc.errno in DISK_FULL_ERRNOS else Cause.NOT_WRITABLE
                raise StepFailed(name, resource_message(exc), "", FailureClass.TRANSIENT, cause) from exc
            raise StepFailed(name, f"{type(exc).__name__}: {exc}") from exc
        self.result.steps.append(StepResult(name, Status.PASSED, round(time.monotonic() - start, 3)))
