"""What happened in a cell (CellResult), stored as one JSON record per cell and merged into a summary."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from buildmatrix.util.atomic import write_text_atomic

RESULT_SCHEMA_VERSION = 1
PASSED, FAILED = "passed", "failed"


@dataclass
class StepResult:
    name: str
    status: str  # passed | failed
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
class WheelRecord:
    filename: str
    sha256: str
    path: str  # relative to the wheels directory


@dataclass
class CellResult:
    cell: dict[str, str]
    inputs_hash: str
    inputs: dict[str, Any]
    runner: str
    status: str = FAILED
    failed_step: str | None = None
    error: str | None = None
    error_tail: str | None = None
    steps: list[StepResult] = field(default_factory=list)
    smoke: SmokeCounts | None = None
    features: dict[str, str] = field(default_factory=dict)
    torch_build: dict[str, Any] = field(default_factory=dict)  # version, cuda, cxx11_abi of the cell's torch
    wheel: WheelRecord | None = None
    driver_wheel: WheelRecord | None = None
    variants_claimed: list[str] = field(default_factory=list)
    log: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    schema_version: int = RESULT_SCHEMA_VERSION

    @property
    def id(self) -> str:
        return self.cell["id"]

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        if data.get("schema_version") != RESULT_SCHEMA_VERSION:
            raise ValueError(f"result schema {data.get('schema_version')} is not {RESULT_SCHEMA_VERSION}")
        data = dict(data)
        data["steps"] = [StepResult(**s) for s in data.get("steps", [])]
        data["smoke"] = SmokeCounts(**data["smoke"]) if data.get("smoke") else None
        data["wheel"] = WheelRecord(**data["wheel"]) if data.get("wheel") else None
        data["driver_wheel"] = WheelRecord(**data["driver_wheel"]) if data.get("driver_wheel") else None
        return cls(**data)


class ResultStore:
    """One record per cell in <dir>/cells/<id>.json, written atomically; a summary merges them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, cell_id: str) -> Path:
        return self.directory / "cells" / f"{cell_id}.json"

    def save(self, result: CellResult) -> None:
        write_text_atomic(self.path(result.id), result.to_json() + "\n")

    def load(self, cell_id: str) -> CellResult | None:
        path = self.path(cell_id)
        if not path.is_file():
            return None
        try:
            return CellResult.from_dict(json.loads(path.read_text()))
        except (ValueError, TypeError, KeyError):
            return None  # an unreadable or old record counts as absent: the cell is rebuilt

    def all(self) -> list[CellResult]:
        out = []
        for path in sorted((self.directory / "cells").glob("*.json")):
            result = self.load(path.stem)
            if result is not None:
                out.append(result)
        return out

    def write_summary(self, results: list[CellResult]) -> Path:
        path = self.directory / "summary.json"
        write_text_atomic(path, summary_json(results))
        return path


def summary_json(results: list[CellResult]) -> str:
    counts = {PASSED: sum(r.status == PASSED for r in results), FAILED: sum(r.status == FAILED for r in results)}
    body = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "counts": counts,
        "cells": {r.id: json.loads(r.to_json()) for r in sorted(results, key=lambda r: r.id)},
    }
    return json.dumps(body, indent=2, sort_keys=True) + "\n"
