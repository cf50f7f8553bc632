"""What happened in a cell (CellResult) and in a build (BuildResult): the records' model and their JSON form (read
back by parse.py, stored by store.py)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from torch_buildmatrix.builder.records.fields import LIMITS
from torch_buildmatrix.model.cellkey import BuildKey, CellKey
from torch_buildmatrix.vocab import Cause, FailureClass, RunnerName, Status, TierStatus

# 3: builds apart from cells (a cell's `cell.build` names the build whose wheel it tested; build records in
# results/builds/). 2: the SDK axis is general (cell `sdk` and `label`, `sdk_wheel`). Records of 2 (each cell built its
# own wheel) and 1 (`driver`, `driver_wheel`, the fixed label scheme) are still read: records/parse.py migrates them.
RESULT_SCHEMA_VERSION = 3


def clipped(text: str | None, key: str) -> str | None:
    """A record's free text (error, error_tail) within the limit its reader holds it to (records/fields.LIMITS): the
    writer never writes a record its reader refuses. Clipped in the middle, saying how much, so both ends remain."""
    limit = LIMITS[key]
    if text is None or len(text) <= limit:
        return text
    note = f"\n[... cut: {len(text)} characters in all ...]\n"
    keep = limit - len(note)
    return text[: keep // 2] + note + text[len(text) - (keep - keep // 2) :]


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
    build_code: str | None = None  # the hash of the build code that made it (epoch.py); absent in older records

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
        data["error"], data["error_tail"] = clipped(self.error, "error"), clipped(self.error_tail, "error_tail")
        for optional in ("deep", "build_code"):  # a project without tiers keeps the records' shape; older ones too
            if data[optional] is None:
                del data[optional]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


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
    build_code: str | None = None  # the hash of the build code that made it (epoch.py); absent in older records

    @property
    def id(self) -> str:
        return self.build.id

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["build"] = self.build.to_dict()
        data["error"], data["error_tail"] = clipped(self.error, "error"), clipped(self.error_tail, "error_tail")
        data["patches"] = list(self.patches)
        for optional in ("deep", "build_code"):
            if data[optional] is None:
                del data[optional]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)
