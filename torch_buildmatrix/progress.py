"""Live progress and the final summary for the terminal (rich); fed by the engine's progress events."""

from __future__ import annotations

import threading
import time
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from torch_buildmatrix.builder.records.model import BuildResult, CellResult
from torch_buildmatrix.builder.steps import Note, ProgressEvent
from torch_buildmatrix.model.builds import Build
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.vocab import FailureClass, Status

STYLE = {
    Status.PASSED: "green",
    Status.FAILED: "red",
    Status.INTERRUPTED: "magenta",
    Status.NOT_BUILT: "yellow",
    "up-to-date": "cyan",
    "queued": "dim",
}


class ProgressDisplay:
    """A live table on a terminal; one line per event elsewhere (CI logs)."""

    def __init__(self, console: Console, cells: list[Cell], builds: list[Build] | None = None) -> None:
        self.console = console
        names = [*(f"build {b.id}" for b in builds or ()), *(cell.id for cell in cells)]
        self.state = {name: ("queued", time.monotonic()) for name in names}
        self.lock = threading.Lock()
        self.live: Live | None = (
            Live(self._table(), console=console, refresh_per_second=4, transient=True) if console.is_terminal else None
        )

    def __enter__(self) -> ProgressDisplay:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if self.live:
            self.live.__exit__(kind, value, tb)

    def update(self, cell_id: str, what: ProgressEvent) -> None:
        with self.lock:
            if isinstance(what, Note):  # a line saying what a step did: printed (above the live table), state unchanged
                self.console.print(f"{cell_id}: {what.line}", highlight=False, markup=False)
                return
            self.state[cell_id] = (what, time.monotonic())
            if self.live:
                self.live.update(self._table())
            elif what != "queued":
                self.console.print(f"{cell_id}: {what}", highlight=False)

    def up_to_date(self) -> set[str]:
        """The builds ("build <id>") and cells the run found up to date: nothing of theirs ran."""
        with self.lock:
            return {name for name, (what, _) in self.state.items() if what == "up-to-date"}

    def _table(self) -> Table:
        table = Table(title="torch-buildmatrix build")
        table.add_column("build or cell")
        table.add_column("state")
        now = time.monotonic()
        for cell_id, (what, since) in self.state.items():
            style = STYLE.get(what, "yellow")
            running = "" if what in STYLE else f" ({now - since:.0f} s)"
            table.add_row(cell_id, f"[{style}]{what}{running}[/{style}]")
        return table


def failure_kind(result: CellResult | BuildResult) -> str:
    """'deterministic', 'transient: timeout', 'interrupted'...: whether a rerun can change the outcome, and why."""
    if result.status == Status.INTERRUPTED:
        return "interrupted: rebuilt next run"
    if result.failure_class == FailureClass.TRANSIENT:
        return f"transient: {result.cause}, retried next run" if result.cause else "transient, retried next run"
    return "deterministic" if result.failure_class else "recorded before failure classes"


def summary_table(
    results: list[CellResult], builds: list[BuildResult] | None = None, up_to_date: set[str] | None = None
) -> Table:
    """The run's builds (what each made) and cells (what each tested); those in `up_to_date` (cell ids, "build <id>")
    did not run: they are marked so, with the time of the run that made their record."""
    fresh = up_to_date or set()
    table = Table(title="summary")
    for column in ("build or cell", "status", "smoke (pass/fail/skip)", "time", "wheel"):
        table.add_column(column)
    for build in builds or ():
        style = STYLE.get(build.status, "yellow")
        status = (
            build.status
            if build.status == Status.PASSED
            else f"{build.status} ({build.failed_step}; {failure_kind(build).split(',')[0]})"
        )
        wheel = build.wheel.filename if build.wheel else "-"
        name = f"build {build.id}"
        if name in fresh:
            status = f"{status}, up to date"
        table.add_row(name, f"[{style}]{status}[/{style}]", "-", _seconds(build.seconds, name in fresh), wheel)
    for result in results:
        style = STYLE.get(result.status, "yellow")
        smoke = result.smoke
        counts = f"{smoke.passed}/{smoke.failed + smoke.errors}/{smoke.skipped}" if smoke else "-"
        status = (
            result.status
            if result.status == Status.PASSED
            else f"{result.status} ({result.failed_step}; {failure_kind(result).split(',')[0]})"
        )
        if result.id in fresh:
            status = f"{status}, up to date"
        table.add_row(
            result.id,
            f"[{style}]{status}[/{style}]",
            counts,
            _seconds(result.seconds, result.id in fresh),
            result.wheel.filename if result.wheel else "-",
        )
    return table


def _seconds(seconds: float, earlier: bool) -> str:
    """A row's time: this run's, or the earlier run's that made the record (up to date: nothing ran now)."""
    return f"{seconds:.0f} s earlier" if earlier else f"{seconds:.0f} s"
