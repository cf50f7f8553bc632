"""What the commands print: the terminal's consoles, and the lines a run's plan and outcome are told in."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from torch_buildmatrix.progress import failure_kind

if TYPE_CHECKING:
    from torch_buildmatrix.builder.records.model import BuildResult, CellResult
    from torch_buildmatrix.builder.workspace import Workspace


def console() -> Console:
    """Standard output; logs and CI output are not terminals: lines are kept whole rather than wrapped at 80 columns."""
    return Console(width=None if sys.stdout.isatty() else 200)


def errors() -> Console:
    """Standard error, where paths in errors stay whole."""
    return Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def say_lines(out: Console, lines: Sequence[str]) -> None:
    for line in lines:
        out.print(line, highlight=False, markup=False)


def say_failed(out: Console, workspace: Workspace, failed: Sequence[CellResult | BuildResult]) -> None:
    for result in failed:
        log_path = workspace.wheels_dir / (result.log or "")
        error = result.error or ""
        where = "" if f"(log: {log_path})" in error else f"  (log: {log_path})"  # step errors name their log already
        what = f" {result.status} in {result.failed_step} ({failure_kind(result)}): "
        out.print(Text.assemble((result.id, "red"), what, f"{error}{where}"))


def say_not_built(out: Console, not_built: Sequence[CellResult]) -> None:
    """Each cell the run left unbuilt, with its record's reason (which names the command that fixes it)."""
    for result in not_built:
        out.print(Text.assemble((result.id, "yellow"), f" {result.status}: ", result.error or ""))


def origins_lines(origins: dict[str, str] | Mapping[str, str], shown: int = 12) -> list[str]:
    """Where each cell's result came from, one line per source: its cells when few, else how many."""
    by_source: dict[str, list[str]] = {}
    for cell_id, origin in origins.items():
        by_source.setdefault(origin or "not built", []).append(cell_id)
    lines = []
    for source in sorted(by_source, key=lambda s: (s != "records", s == "not built", s)):
        ids = sorted(by_source[source])
        name = "this run's records (wheels/results)" if source == "records" else source
        listed = ": " + ", ".join(ids) if len(ids) <= shown else ""
        lines.append(f"{len(ids)} cell(s) from {name}{listed}")
    return lines
