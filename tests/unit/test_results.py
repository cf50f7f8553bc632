"""Result records: round trip, atomic store, damaged or hostile records (merging across machines: test_merge.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.records.model import CellResult, SmokeCounts, StepResult, WheelRecord
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.errors import RecordError
from torch_buildmatrix.model.cellkey import CellKey
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName, Status

from conftest import WriteMatrix, run_cli

SHA = "ab" * 32


A = CellKey(Version("2.13.0"), "cpu", Python.parse("3.11"), Version("2.1"), "drv2", "torch.2.13.drv.2")
B = replace(A, python=Python.parse("3.12"))


def result(key: CellKey, finished: float, status: Status = Status.PASSED) -> CellResult:
    wheel = f"torch_emu-0.1.0+torch.2.13.drv.2-{key.python_tag}-{key.python_tag}-linux_x86_64.whl"
    return CellResult(
        cell=key,
        inputs_hash="h",
        inputs={"python": "cpython-3.11.7"},
        runner=RunnerName.LOCAL,
        status=status,
        steps=[StepResult("build", Status.PASSED, 1.5)],
        smoke=SmokeCounts(10, 0, 2, 0),
        wheel=WheelRecord(wheel, SHA, f"torch2.13/{wheel}"),
        sdk_wheel=WheelRecord("emu_driver-2.1.0-py3-none-any.whl", SHA, "driver/emu_driver-2.1.0-py3-none-any.whl"),
        log=f"logs/{key.id}.log",
        finished=finished,
        patches=("pre-2.7", "extra"),
    )


def test_round_trip(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    original = result(A, 1.0)
    store.save(original)
    loaded = store.load(A.id)
    assert loaded == original
    assert loaded is not None and loaded.smoke == SmokeCounts(10, 0, 2, 0) and loaded.seconds == 1.5
    assert loaded.cell == A and isinstance(loaded.status, Status) and isinstance(loaded.runner, RunnerName)
    assert all(isinstance(step.status, Status) for step in loaded.steps)


def test_record_keeps_its_format(tmp_path: Path) -> None:
    """The typed cell key is written in the record form (and read back from it)."""
    store = ResultStore(tmp_path)
    store.save(result(A, 1.0))
    record = json.loads(store.path(A.id).read_text())
    assert record["cell"] == {
        "id": "torch2.13-cpu-cp311-drv2",
        "torch": "2.13.0",
        "torch_minor": "2.13",
        "variant": "cpu",
        "python": "3.11",
        "sdk": "2.1",
        "label": "torch.2.13.drv.2",
        "patches": "pre-2.7,extra",
        "build": {
            "id": "torch2.13-cpu-cp311-drv2",
            "torch": "2.13.0",
            "variant": "cpu",
            "python": "3.11",
            "sdk": "2.1",
            "label": "torch.2.13.drv.2",
        },
    }
    assert record["schema_version"] == 3 and record["sdk_wheel"]["path"] == "driver/emu_driver-2.1.0-py3-none-any.whl"
    assert record["status"] == "passed" and record["runner"] == "local" and "patches" not in record


def test_a_record_of_schema_2_is_read_as_3(tmp_path: Path) -> None:
    """Before builds were apart from cells, each cell built its own wheel: that is the build a record of 2 names."""
    store = ResultStore(tmp_path)
    original = result(A, 1.0)
    store.save(original)
    data = json.loads(store.path(A.id).read_text())
    data["schema_version"] = 2
    del data["cell"]["build"]
    store.path(A.id).write_text(json.dumps(data))
    assert store.load(A.id) == original and original.cell.build.id == A.id
    data["cell"]["build"] = {"id": "torch2.13-cpu-drv2"}
    store.path(A.id).write_text(json.dumps(data))
    with pytest.raises(RecordError, match="a record of schema 2 names no build"):
        store.load(A.id)


def test_a_record_of_schema_1_is_read_as_2(tmp_path: Path) -> None:
    """plugin 0.2.0's records (a driver, the fixed label scheme) stay readable: same cell, wheel and driver wheel."""
    store = ResultStore(tmp_path)
    original = result(A, 1.0)
    store.save(original)
    data = json.loads(store.path(A.id).read_text())
    data["schema_version"] = 1
    del data["cell"]["sdk"], data["cell"]["label"], data["cell"]["build"]
    data["cell"]["driver"] = "2.1"
    data["driver_wheel"] = data.pop("sdk_wheel")
    store.path(A.id).write_text(json.dumps(data))
    assert store.load(A.id) == original


def test_a_record_without_sdk(tmp_path: Path) -> None:
    """A project with no SDK: the cell has no sdk part, the record no sdk wheel."""
    key = CellKey(Version("2.13.0"), "cpu", Python.parse("3.11"), None, "", "torch.2.13")
    wheel = "my_ops-0.1.0+torch.2.13-cp311-cp311-linux_x86_64.whl"
    made = replace(result(A, 1.0), cell=key, wheel=WheelRecord(wheel, SHA, f"torch2.13/{wheel}"), sdk_wheel=None)
    made.log = f"logs/{key.id}.log"
    store = ResultStore(tmp_path)
    store.save(made)
    assert key.id == "torch2.13-cpu-cp311" and store.load(key.id) == made
    assert "sdk" not in json.loads(store.path(key.id).read_text())["cell"]


def test_no_temporary_files_left(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.save(result(A, 1.0))
    assert [p.name for p in (tmp_path / "cells").iterdir()] == [f"{A.id}.json"]
    assert (tmp_path / "cells" / f"{A.id}.json").stat().st_mode & 0o777 == 0o644


OTHER_WHEEL = "torch_emu-0.1.0+torch.2.4.drv.1-cp311-cp311-linux_x86_64.whl"
OLD_DRIVER = "emu_driver-1.4.0-py3-none-any.whl"
DAMAGE = {  # how -> (key path, new value)
    "smoke-type": (("smoke", "passed"), "ten"),
    "steps-type": (("steps",), "build"),
    "old-schema": (("schema_version",), 0),
    "status": (("status",), "green"),
    "log-outside": (("log",), "/etc/passwd"),
    "log-dotdot": (("log",), "logs/../../../etc/passwd"),
    "other-cells-log": (("log",), f"logs/{B.id}.log"),
    "other-cells-wheel": (("wheel",), {"filename": OTHER_WHEEL, "sha256": SHA, "path": f"torch2.4/{OTHER_WHEEL}"}),
    "wheel-elsewhere": (("wheel", "path"), "torch2.4/torch_emu-0.1.0+torch.2.13.drv.2-cp311-cp311-linux_x86_64.whl"),
    "driver-of-other-api": (("sdk_wheel",), {"filename": OLD_DRIVER, "sha256": SHA, "path": f"driver/{OLD_DRIVER}"}),
    "sdk-wheel-elsewhere": (("sdk_wheel", "path"), "../emu_driver-2.1.0-py3-none-any.whl"),
    "id-mismatch": (("cell",), B.to_dict()),
    "id-inconsistent": (("cell", "id"), B.id),
    "cell-variant": (("cell", "variant"), "ROCm"),
    "cell-sdk": (("cell", "sdk"), "two"),
    "runner": (("runner",), "cloud"),
    "step-status": (("steps",), [{"name": "build", "status": "maybe", "seconds": 1.0}]),
    "unknown-key": (("colour",), "red"),
}


def damage(data: dict, how: str) -> str:  # type: ignore[type-arg]
    if how == "truncated":
        return json.dumps(data)[:200]
    keys, value = DAMAGE[how]
    target = data
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("truncated", "not valid JSON"),
        ("smoke-type", "smoke.passed: expected a count"),
        ("steps-type", "steps: expected a list, got str"),
        ("old-schema", "schema_version: 0 is not 3 (or 2 or 1, read as it)"),
        ("status", "status: 'green' is not one of passed, failed"),
        ("runner", "runner: 'cloud' is not one of local, docker"),
        ("step-status", "steps[0].status: 'maybe' is not one of passed"),
        ("log-outside", "log: '/etc/passwd' is absolute; a record names files inside wheels/ only"),
        ("log-dotdot", "log: 'logs/../../../etc/passwd' is not a plain relative path"),
        ("other-cells-log", f"log: 'logs/{B.id}.log' is not this cell's log (logs/{A.id}.log)"),
        ("other-cells-wheel", f"is not a wheel of cell {A.id} (its local label is not +torch.2.13.drv.2)"),
        ("wheel-elsewhere", "wheel.path: 'torch2.4/torch_emu"),
        ("driver-of-other-api", "sdk_wheel.filename: emu_driver-1.4.0-py3-none-any.whl is not a wheel of SDK 2.1"),
        ("sdk-wheel-elsewhere", "sdk_wheel.path: '../emu_driver-2.1.0-py3-none-any.whl' is not a plain relative path"),
        ("id-mismatch", f"cell.id: {B.id!r} is not {A.id!r}, the cell this file is named after"),
        ("id-inconsistent", f"cell.id: {B.id!r} is not torch2.13-cpu-cp311-<sdk part>, the id its torch, variant"),
        ("cell-variant", "cell.variant: 'ROCm' is not a variant name"),
        ("cell-sdk", "cell.sdk: 'two' is not a version"),
        ("unknown-key", "record: unknown key(s) colour"),
    ],
)
def test_a_damaged_record_is_an_error_naming_its_file(tmp_path: Path, how: str, message: str) -> None:
    store = ResultStore(tmp_path)
    store.save(result(A, 1.0))
    path = store.path(A.id)
    path.write_text(damage(json.loads(path.read_text()), how))
    before = path.read_bytes()
    with pytest.raises(RecordError) as caught:
        store.load(A.id)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    with pytest.raises(RecordError, match="1 damaged record"):
        store.all()
    results, damaged = store.scan()
    assert results == [] and [d.source for d in damaged] == [str(path)]
    assert path.read_bytes() == before  # never rewritten nor deleted by reading


def test_a_cell_id_never_leads_out_of_the_store(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    with pytest.raises(RecordError, match="is not a plain file name"):
        store.load("../../x")
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "results").exists()


def test_merge_of_a_hostile_cell_id_writes_nothing(tmp_path: Path) -> None:
    """`merge-results` of a record whose cell id is ../../x: an error naming the file; nothing outside --into."""
    source = ResultStore(tmp_path / "machine1" / "results")
    source.save(result(A, 1.0, Status.FAILED))
    data = json.loads(source.path(A.id).read_text())
    data["cell"]["id"] = "../../x"
    data["log"] = None
    source.path(A.id).unlink()
    (source.directory / "cells" / "x.json").write_text(json.dumps(data))
    into = tmp_path / "deep" / "into"
    done = run_cli(tmp_path, "merge-results", str(tmp_path / "machine1"), "--into", str(into), timeout=60)
    from torch_buildmatrix.errors import MergeError

    assert done.returncode == MergeError.exit_code, done.stdout + done.stderr
    assert "machine1/results/cells/x.json: cell.id: '../../x' is not a plain file name" in done.stderr
    assert "Traceback" not in done.stderr
    assert not into.exists() and not (tmp_path / "x.json").exists() and not (tmp_path / "deep").exists()
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == [
        "machine1/results/cells/x.json"
    ]


def test_build_rebuilds_a_cell_whose_record_is_damaged_and_says_why(tmp_path: Path) -> None:
    from test_engine import setup_project

    from torch_buildmatrix.builder.records.model import BuildResult
    from torch_buildmatrix.builder.runners.local import LocalRunner

    engine, cells = setup_project(tmp_path)
    engine.runner = LocalRunner()  # a real interpreter, so the cell can be planned
    [build] = engine.builds_of(cells)
    made = BuildResult(cells[0].build, "h" * 64, {}, RunnerName.LOCAL)  # its build failed with these inputs
    planned = engine.plan_cell(cells[0], build, made)
    engine.store.save(
        CellResult(cell=cells[0].key, inputs_hash=planned.inputs_hash, inputs=planned.inputs, runner=RunnerName.LOCAL)
    )
    assert engine.plan_cell(cells[0], build, made).reusable is not None and engine.damaged == {}
    path = engine.store.path(cells[0].id)
    path.write_text(path.read_text()[:-40])  # truncated, e.g. by a full disk
    replanned = engine.plan_cell(cells[0], build, made)
    assert replanned.reusable is None  # rebuilt, never silently "not built"
    assert str(engine.damaged[cells[0].id]).startswith(f"{path}: not valid JSON")


def test_merge_results_in_a_project_waits_for_no_build_it_is_refused_while_one_runs(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    """merge-results took no run lock: a build writing wheels/ meanwhile mixed its records with the merged ones."""
    from torch_buildmatrix.builder.workspace import RunLock, Workspace
    from torch_buildmatrix.errors import RunLocked

    path = write_matrix()
    source = ResultStore(tmp_path / "machine1" / "results")
    source.save(result(A, 1.0, Status.FAILED))
    into = path.parent / "wheels"
    with RunLock(Workspace.for_root(path.parent)):
        done = run_cli(path.parent, "merge-results", str(tmp_path / "machine1"), "--into", str(into), timeout=60)
    assert done.returncode == RunLocked.exit_code and "another build-matrix run" in done.stderr, done.stderr
    assert not into.exists()
