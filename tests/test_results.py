"""Result records: round trip, atomic store, reuse rules (merging across machines: test_merge.py)."""

from __future__ import annotations

import json
from pathlib import Path

from buildmatrix.builder.results import CellResult, ResultStore, SmokeCounts, StepResult, WheelRecord


def result(cell_id: str, finished: float, status: str = "passed") -> CellResult:
    return CellResult(
        cell={"id": cell_id},
        inputs_hash="h",
        inputs={"python": "cpython-3.11.7"},
        runner="local",
        status=status,
        steps=[StepResult("build", "passed", 1.5)],
        smoke=SmokeCounts(10, 0, 2, 0),
        wheel=WheelRecord("w.whl", "00", "torch2.13/w.whl"),
        finished=finished,
    )


def test_round_trip(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    original = result("a", 1.0)
    store.save(original)
    loaded = store.load("a")
    assert loaded == original
    assert loaded is not None and loaded.smoke == SmokeCounts(10, 0, 2, 0) and loaded.seconds == 1.5


def test_unreadable_or_old_record_counts_as_absent(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.path("a").parent.mkdir(parents=True)
    store.path("a").write_text("{ half a record")
    store.path("b").write_text(json.dumps({"schema_version": 0}))
    assert store.load("a") is None and store.load("b") is None


def test_no_temporary_files_left(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.save(result("a", 1.0))
    assert [p.name for p in (tmp_path / "cells").iterdir()] == ["a.json"]
