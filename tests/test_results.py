"""Result records: round trip, atomic store, damaged or hostile records (merging across machines: test_merge.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from buildmatrix.builder.results import CellResult, ResultStore, SmokeCounts, StepResult, WheelRecord
from buildmatrix.errors import RecordError

from conftest import run_cli

SHA = "ab" * 32


def cell(cell_id: str) -> dict[str, str]:
    return {
        "id": cell_id,
        "torch": "2.13.0",
        "torch_minor": "2.13",
        "variant": "cpu",
        "python": "3.11",
        "driver": "2.1",
    }


def result(cell_id: str, finished: float, status: str = "passed") -> CellResult:
    wheel = "torch_emu-0.1.0+torch2.13.drv2-cp311-cp311-linux_x86_64.whl"
    return CellResult(
        cell=cell(cell_id),
        inputs_hash="h",
        inputs={"python": "cpython-3.11.7"},
        runner="local",
        status=status,
        steps=[StepResult("build", "passed", 1.5)],
        smoke=SmokeCounts(10, 0, 2, 0),
        wheel=WheelRecord(wheel, SHA, f"torch2.13/{wheel}"),
        driver_wheel=WheelRecord("emu_driver-2.1.0-py3-none-any.whl", SHA, "driver/emu_driver-2.1.0-py3-none-any.whl"),
        log=f"logs/{cell_id}.log",
        finished=finished,
    )


def test_round_trip(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    original = result("a", 1.0)
    store.save(original)
    loaded = store.load("a")
    assert loaded == original
    assert loaded is not None and loaded.smoke == SmokeCounts(10, 0, 2, 0) and loaded.seconds == 1.5


def test_no_temporary_files_left(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.save(result("a", 1.0))
    assert [p.name for p in (tmp_path / "cells").iterdir()] == ["a.json"]
    assert (tmp_path / "cells" / "a.json").stat().st_mode & 0o777 == 0o644


OTHER_WHEEL = "torch_emu-0.1.0+torch2.4.drv1-cp311-cp311-linux_x86_64.whl"
OLD_DRIVER = "emu_driver-1.4.0-py3-none-any.whl"
DAMAGE = {  # how -> (key path, new value)
    "smoke-type": (("smoke", "passed"), "ten"),
    "steps-type": (("steps",), "build"),
    "old-schema": (("schema_version",), 0),
    "status": (("status",), "green"),
    "log-outside": (("log",), "/etc/passwd"),
    "log-dotdot": (("log",), "logs/../../../etc/passwd"),
    "other-cells-log": (("log",), "logs/b.log"),
    "other-cells-wheel": (("wheel",), {"filename": OTHER_WHEEL, "sha256": SHA, "path": f"torch2.4/{OTHER_WHEEL}"}),
    "wheel-elsewhere": (("wheel", "path"), "torch2.4/torch_emu-0.1.0+torch2.13.drv2-cp311-cp311-linux_x86_64.whl"),
    "driver-of-other-api": (("driver_wheel",), {"filename": OLD_DRIVER, "sha256": SHA, "path": f"driver/{OLD_DRIVER}"}),
    "id-mismatch": (("cell", "id"), "b"),
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
        ("old-schema", "schema_version: 0 is not 1"),
        ("status", "status: 'green' is not one of passed, failed"),
        ("log-outside", "log: '/etc/passwd' is absolute; a record names files inside wheels/ only"),
        ("log-dotdot", "log: 'logs/../../../etc/passwd' is not a plain relative path"),
        ("other-cells-log", "log: 'logs/b.log' is not this cell's log (logs/a.log)"),
        ("other-cells-wheel", "is not a wheel of cell a (its local label is not +torch2.13.drv2)"),
        ("wheel-elsewhere", "wheel.path: 'torch2.4/torch_emu"),
        ("driver-of-other-api", "driver_wheel.filename: emu_driver-1.4.0-py3-none-any.whl is not a driver 2.1 wheel"),
        ("id-mismatch", "cell.id: 'b' is not 'a', the cell this file is named after"),
        ("unknown-key", "record: unknown key(s) colour"),
    ],
)
def test_a_damaged_record_is_an_error_naming_its_file(tmp_path: Path, how: str, message: str) -> None:
    store = ResultStore(tmp_path)
    store.save(result("a", 1.0))
    path = store.path("a")
    path.write_text(damage(json.loads(path.read_text()), how))
    before = path.read_bytes()
    with pytest.raises(RecordError) as caught:
        store.load("a")
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    with pytest.raises(RecordError, match="1 damaged record"):
        store.all()
    results, damaged = store.scan()
    assert results == [] and [d.source for d in damaged] == [str(path)]
    assert path.read_bytes() == before  # never rewritten nor deleted by reading


def test_a_cell_id_never_leads_out_of_the_store(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    with pytest.raises(RecordError, match="is not a plain file name"):
        store.save(result("../../x", 1.0))
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "results").exists()


def test_merge_of_a_hostile_cell_id_writes_nothing(tmp_path: Path) -> None:
    """`merge-results` of a record whose cell id is ../../x: an error naming the file; nothing outside --into."""
    source = ResultStore(tmp_path / "machine1" / "results")
    source.save(result("a", 1.0, "failed"))
    data = json.loads(source.path("a").read_text())
    data["cell"]["id"] = "../../x"
    data["log"] = None
    source.path("a").unlink()
    (source.directory / "cells" / "x.json").write_text(json.dumps(data))
    into = tmp_path / "deep" / "into"
    done = run_cli(tmp_path, "merge-results", str(tmp_path / "machine1"), "--into", str(into), timeout=60)
    from buildmatrix.builder.merge import MergeError

    assert done.returncode == MergeError.exit_code, done.stdout + done.stderr
    assert "machine1/results/cells/x.json: cell.id: '../../x' is not a plain file name" in done.stderr
    assert "Traceback" not in done.stderr
    assert not into.exists() and not (tmp_path / "x.json").exists() and not (tmp_path / "deep").exists()
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == [
        "machine1/results/cells/x.json"
    ]


def test_build_rebuilds_a_cell_whose_record_is_damaged_and_says_why(tmp_path: Path) -> None:
    from test_engine import setup_project

    from buildmatrix.builder.runners.local import LocalRunner

    engine, cells = setup_project(tmp_path)
    engine.runner = LocalRunner()  # a real interpreter, so the cell can be planned
    [planned] = engine.plan(cells)
    engine.store.save(
        CellResult(cell=cells[0].as_dict(), inputs_hash=planned.inputs_hash, inputs=planned.inputs, runner="local")
    )
    assert engine.plan(cells)[0].reusable is not None and engine.damaged == {}
    path = engine.store.path(cells[0].id)
    path.write_text(path.read_text()[:-40])  # truncated, e.g. by a full disk
    [replanned] = engine.plan(cells)
    assert replanned.reusable is None  # rebuilt, never silently "not built"
    assert str(engine.damaged[cells[0].id]).startswith(f"{path}: not valid JSON")
