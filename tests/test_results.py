"""Result records: round trip, atomic store, merge across machines, reuse rules."""

from __future__ import annotations

import json
from pathlib import Path

from buildmatrix.builder.results import CellResult, ResultStore, SmokeCounts, StepResult, WheelRecord, merge_result_dirs


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


def test_merge_keeps_the_newest_record_per_cell(tmp_path: Path) -> None:
    one, two = ResultStore(tmp_path / "m1"), ResultStore(tmp_path / "m2")
    one.save(result("a", 1.0, "failed"))
    one.save(result("b", 1.0))
    two.save(result("a", 2.0, "passed"))
    into = ResultStore(tmp_path / "all")
    merged = merge_result_dirs([one.directory, two.directory], into)
    assert {r.id: r.status for r in merged} == {"a": "passed", "b": "passed"}
    summary = json.loads((into.directory / "summary.json").read_text())
    assert summary["counts"] == {"passed": 2, "failed": 0} and set(summary["cells"]) == {"a", "b"}
