"""What happened in a cell (CellResult), stored as one JSON record per cell and merged into a summary."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from buildmatrix.errors import RecordError
from buildmatrix.model.cellkey import BuildKey, CellKey
from buildmatrix.util.atomic import write_text_atomic
from buildmatrix.util.paths import name_problem, read_regular
from buildmatrix.vocab import Cause, FailureClass, RunnerName, Status, TierStatus

if TYPE_CHECKING:
    from buildmatrix.builder.recordparse import ParseMemo, RecordRules

# 3: builds apart from cells (a cell's `cell.build` names the build whose wheel it tested; build records in
# results/builds/). 2: the SDK axis is general (cell `sdk` and `label`, `sdk_wheel`). Records of 2 (each cell built its
# own wheel) and 1 (`driver`, `driver_wheel`, the fixed label scheme) are still read: recordparse migrates them.
RESULT_SCHEMA_VERSION = 3


@dataclass
class StepResult:
    name: str
    status: Status
    seconds: float


@dataclass
class SmokeCounts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped + self.errors


@dataclass
class TierResult:
    """A build's deep tier (smoke.tiers): the cell that ran it and what it found. The deep cell's record, its
    build's record and, once known, every other cell of the build's record carry it."""

    cell: str  # the id of the cell that ran it
    status: TierStatus
    smoke: SmokeCounts | None = None
    features: dict[str, str] = field(default_factory=dict)  # the outcomes of the features its tests exercise
    error: str | None = None
    failure_class: FailureClass | None = None  # of a failed deep tier
    seconds: float = 0.0


@dataclass(frozen=True)
class WheelRecord:
    """A published wheel: in a cell's record, in the compat table and on the site (whose root mirrors wheels/)."""

    filename: str
    sha256: str
    path: str  # relative to the wheels directory

    @classmethod
    def from_dict(cls, data: Any) -> WheelRecord | None:
        return cls(**data) if data else None


@dataclass
class CellResult:
    cell: CellKey
    inputs_hash: str
    inputs: dict[str, Any]
    runner: RunnerName
    status: Status = Status.FAILED
    failed_step: str | None = None
    error: str | None = None
    error_tail: str | None = None
    failure_class: FailureClass | None = None  # FailureClass of a failed or interrupted cell; None in older records
    cause: Cause | None = None  # Cause of a transient failure (timeout, network, ...)
    attempts: int = 1  # tries within the run that made this record (--retries)
    steps: list[StepResult] = field(default_factory=list)
    smoke: SmokeCounts | None = None
    features: dict[str, str] = field(default_factory=dict)
    torch_build: dict[str, Any] = field(default_factory=dict)  # version, cuda, cxx11_abi of the cell's torch
    wheel: WheelRecord | None = None
    sdk_wheel: WheelRecord | None = None  # the wheel SDK's wheel the cell was tested with
    variants_claimed: list[str] = field(default_factory=list)
    log: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    patches: tuple[str, ...] = ()  # the shim series applied, in order (recorded in the cell's record form)
    schema_version: int = RESULT_SCHEMA_VERSION
    deep: TierResult | None = None  # its build's deep tier (smoke.tiers); absent without tiers, or not yet known

    @property
    def id(self) -> str:
        return self.cell.id

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["patches"]
        data["cell"] = self.cell.to_dict(self.patches)
        if data["deep"] is None:  # a project without tiers writes the records it always wrote
            del data["deep"]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(
        cls,
        text: str,
        source: str,
        expected_id: str | None = None,
        rules: RecordRules | None = None,
        memo: ParseMemo | None = None,
    ) -> CellResult:
        """Parse a record, every type checked (with `rules`, its wheels against the matrix's distributions and the
        cell); raises RecordError naming `source` and the bad key. `memo`: the batch's, when there is one."""
        from buildmatrix.builder.recordparse import parse_record

        return parse_record(text, source, expected_id, rules, memo)


@dataclass
class BuildResult:
    """What happened to one build: the wheel it made (or how it failed), which every cell of the build tests."""

    build: BuildKey
    inputs_hash: str
    inputs: dict[str, Any]
    runner: RunnerName
    python: str = ""  # the interpreter it ran on, e.g. "3.11" (one of its cells' Pythons for a wheel of every Python)
    status: Status = Status.FAILED
    failed_step: str | None = None
    error: str | None = None
    error_tail: str | None = None
    failure_class: FailureClass | None = None
    cause: Cause | None = None
    attempts: int = 1
    steps: list[StepResult] = field(default_factory=list)
    torch_build: dict[str, Any] = field(default_factory=dict)  # the torch it was built against, and the wheel's facts
    wheel: WheelRecord | None = None
    sdk_wheel: WheelRecord | None = None  # a wheel SDK's wheel it was built against (its cells install it too)
    log: str | None = None  # logs/builds/<id>.log
    started: float = field(default_factory=time.time)
    finished: float | None = None
    patches: tuple[str, ...] = ()  # the shim series applied, in order
    schema_version: int = RESULT_SCHEMA_VERSION
    deep: TierResult | None = None  # its deep tier (smoke.tiers), as its deep cell recorded it; absent: not known

    @property
    def id(self) -> str:
        return self.build.id

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["build"] = self.build.to_dict()
        data["patches"] = list(self.patches)
        if data["deep"] is None:
            del data["deep"]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(
        cls,
        text: str,
        source: str,
        expected_id: str | None = None,
        rules: RecordRules | None = None,
        memo: ParseMemo | None = None,
    ) -> BuildResult:
        from buildmatrix.builder.recordparse import parse_build_record

        return parse_build_record(text, source, expected_id, rules, memo)


class ResultStore:
    """One record per cell in <dir>/cells/<id>.json and per build in <dir>/builds/<id>.json, written atomically; a
    summary merges them."""

    def __init__(self, directory: Path, rules: RecordRules | None = None) -> None:
        from buildmatrix.builder.recordparse import ParseMemo

        self.directory = directory
        self.rules = rules  # what the matrix says the records' wheels must be (None: types and paths only)
        self.memo = ParseMemo()  # versions, Pythons and tag checks its records share, parsed once

    def path(self, cell_id: str) -> Path:
        problem = name_problem(cell_id)
        if problem:  # a cell id from a record must never lead out of cells/
            raise RecordError(str(self.directory / "cells"), f"cell id {cell_id!r:.80} {problem}")
        return self.directory / "cells" / f"{cell_id}.json"

    def save(self, result: CellResult) -> None:
        write_text_atomic(self.path(result.id), result.to_json() + "\n")

    def build_path(self, build_id: str) -> Path:
        problem = name_problem(build_id)
        if problem:  # a build id from a record must never lead out of builds/
            raise RecordError(str(self.directory / "builds"), f"build id {build_id!r:.80} {problem}")
        return self.directory / "builds" / f"{build_id}.json"

    def save_build(self, result: BuildResult) -> None:
        write_text_atomic(self.build_path(result.id), result.to_json() + "\n")

    def load_build(self, build_id: str) -> BuildResult | None:
        """The build's record, None when there is none; raises RecordError when it is damaged."""
        path = self.build_path(build_id)
        if not path.exists() and not path.is_symlink():
            return None
        return read_build_record(self.directory / "builds", f"{build_id}.json", build_id, self.rules, self.memo)

    def scan_builds(self) -> tuple[list[BuildResult], list[RecordError]]:
        """Every readable build record, and the damaged ones as errors naming their files."""
        return _scan(self.directory / "builds", self.load_build)

    def load(self, cell_id: str) -> CellResult | None:
        """The cell's record, None when there is none; raises RecordError when it is damaged."""
        path = self.path(cell_id)
        if not path.exists() and not path.is_symlink():
            return None
        return read_record(
            self.directory / "cells", f"{cell_id}.json", expected_id=cell_id, rules=self.rules, memo=self.memo
        )

    def scan(self) -> tuple[list[CellResult], list[RecordError]]:
        """Every readable record, and the damaged ones as errors naming their files."""
        return _scan(self.directory / "cells", self.load)

    def all(self) -> list[CellResult]:
        """Every record; raises RecordError naming every damaged one, so no cell silently drops out."""
        results, damaged = self.scan()
        if damaged:
            raise RecordError(
                str(self.directory / "cells"),
                f"{len(damaged)} damaged record(s); fix or delete them (a deleted record's cell is rebuilt):\n"
                + "\n".join(f"  {exc}" for exc in damaged),
            )
        return results

    def write_summary(
        self,
        results: list[CellResult],
        damaged: list[RecordError] | None = None,
        builds: list[BuildResult] | None = None,
    ) -> Path:
        path = self.directory / "summary.json"
        write_text_atomic(path, summary_json(results, damaged or [], builds or []))
        return path


def read_record(
    base: Path,
    relative: str,
    expected_id: str | None = None,
    rules: RecordRules | None = None,
    memo: ParseMemo | None = None,
) -> CellResult:
    """The record at base/relative, read as untrusted (_record_text); raises RecordError naming it."""
    source = str(base / relative)
    return CellResult.from_json(_record_text(base, relative), source, expected_id=expected_id, rules=rules, memo=memo)


def read_build_record(
    base: Path,
    relative: str,
    expected_id: str | None = None,
    rules: RecordRules | None = None,
    memo: ParseMemo | None = None,
) -> BuildResult:
    """The build record at base/relative, read as untrusted as a cell's (_record_text)."""
    source = str(base / relative)
    return BuildResult.from_json(_record_text(base, relative), source, expected_id=expected_id, rules=rules, memo=memo)


def _record_text(base: Path, relative: str) -> str:
    """A record's text: a regular file reached through no symlink, at most MAX_RECORD_BYTES, strict UTF-8; raises
    RecordError naming base/relative for anything else."""
    from buildmatrix.builder.recordparse import MAX_RECORD_BYTES

    source = str(base / relative)
    try:
        return read_regular(base, relative, MAX_RECORD_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(source, f"not UTF-8 ({exc}); a record is written as UTF-8 JSON") from None
    except ValueError as exc:
        raise RecordError(source, f"unreadable: {exc}") from None


Record = TypeVar("Record", CellResult, BuildResult)


def _scan(directory: Path, load: Callable[[str], Record | None]) -> tuple[list[Record], list[RecordError]]:
    """Every readable record of directory/*.json by `load` (by id: the file's stem), and the damaged ones as errors."""
    out, damaged = [], []
    for path in sorted(directory.glob("*.json")):
        try:
            result = load(path.stem)
        except RecordError as exc:
            damaged.append(exc)
            continue
        if result is not None:
            out.append(result)
    return out, damaged


def summary_json(
    results: list[CellResult], damaged: list[RecordError] | None = None, builds: list[BuildResult] | None = None
) -> str:
    counts = {str(s): sum(r.status == s for r in results) for s in (Status.PASSED, Status.FAILED)}
    interrupted = sum(r.status == Status.INTERRUPTED for r in results)
    if interrupted:  # only then, so summaries of runs that were never stopped keep their shape
        counts[str(Status.INTERRUPTED)] = interrupted
    not_built = sum(r.status == Status.NOT_BUILT for r in results)
    if not_built:  # only then too: a run that left no cell unbuilt (no Docker engine) keeps the shape
        counts[str(Status.NOT_BUILT)] = not_built
    body: dict[str, Any] = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "counts": counts,
        "cells": {r.id: r.to_dict() for r in sorted(results, key=lambda r: r.id)},
        "builds": {b.id: b.to_dict() for b in sorted(builds or [], key=lambda b: b.id)},
    }
    if damaged:
        body["damaged"] = {exc.source: exc.problem for exc in damaged}
    return json.dumps(body, indent=2, sort_keys=True) + "\n"
