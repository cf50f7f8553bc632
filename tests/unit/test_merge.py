"""merge-results: wheels/ trees from several machines merge into one, checked; any problem merges nothing."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from fake_wheels import cell_of, cell_result
from packaging.version import Version

from torch_buildmatrix.builder.merge import merge_wheel_trees
from torch_buildmatrix.builder.records.parse import parse_record
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.cli import main
from torch_buildmatrix.errors import MergeError
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.vocab import WheelSourceKind

RELEASE = TorchRelease(Version("2.13.0"), "cpu", WheelSource(WheelSourceKind.FIND_LINKS, "/wheels"), None, ())
CELLS = [cell_of(RELEASE, p, d) for p in ("3.11", "3.12") for d in ("1.4", "2.1")]
STATUS = ("passed", "passed", "failed", "passed")


def files(tree: Path) -> dict[str, bytes]:
    """Every file of a tree but the summary (which lists what was merged), by relative path."""
    return {
        p.relative_to(tree).as_posix(): p.read_bytes()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and p.name != "summary.json"
    }


@pytest.fixture
def whole(tmp_path: Path) -> Path:
    """A wheels/ tree as one machine makes it: three passed cells, two sharing the driver 2 wheel, and a failed one."""
    tree = tmp_path / "whole"
    store = ResultStore(tree / "results")
    for cell, status in zip(CELLS, STATUS, strict=True):
        store.save(cell_result(cell, status, wheels_dir=tree, tag=f"{cell.python_tag}-{cell.python_tag}-linux_x86_64"))
    return tree


def split(whole: Path, dest: Path, cell_ids: list[str]) -> Path:
    """The tree one CI machine would upload: only its cells' records, wheels and logs."""
    for cell_id in cell_ids:
        result = ResultStore(whole / "results").load(cell_id)
        assert result is not None
        for rel in [result.log] + [w.path for w in (result.wheel, result.sdk_wheel) if w]:
            assert rel is not None
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(whole / rel, dest / rel)
        (dest / "results" / "cells").mkdir(parents=True, exist_ok=True)
        shutil.copy2(whole / "results" / "cells" / f"{cell_id}.json", dest / "results" / "cells")
    return dest


@pytest.fixture
def machines(whole: Path, tmp_path: Path) -> list[Path]:
    return [split(whole, tmp_path / f"machine{i}", [cell.id]) for i, cell in enumerate(CELLS)]


def test_split_trees_merge_back_into_the_whole(whole: Path, machines: list[Path], tmp_path: Path) -> None:
    into = tmp_path / "merged"
    report = merge_wheel_trees(machines, into)
    assert files(into) == files(whole)
    assert [r.id for r in report.cells] == sorted(c.id for c in CELLS)
    assert report.wheels == 5  # three plugin wheels, the driver 1 and the driver 2 wheel
    summary = json.loads((into / "results" / "summary.json").read_text())
    assert summary["counts"] == {"passed": 3, "failed": 1}

    # Merging the same trees again changes nothing and copies nothing.
    before = {p: p.stat().st_mtime_ns for p in into.rglob("*.whl")}
    again = merge_wheel_trees(machines, into)
    assert again.copied == 0 and files(into) == files(whole)
    assert before == {p: p.stat().st_mtime_ns for p in into.rglob("*.whl")}


def run_cli(*args: str) -> int:
    return main(["merge-results", *args])


def test_cli_merges_and_says_what(machines: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    into = tmp_path / "merged"
    assert run_cli(*map(str, machines), "--into", str(into)) == 0
    out = capsys.readouterr().out
    assert "4 cell record(s), 5 wheel(s) checked against their records" in out


def test_missing_source_directory_fails_and_writes_nothing(
    machines: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    into = tmp_path / "merged"
    absent = tmp_path / "artifacts" / "cell-nothing"
    assert run_cli(str(machines[0]), str(absent), "--into", str(into)) == MergeError.exit_code
    err = capsys.readouterr().err
    assert f"{absent}: no such directory" in err and "nothing was merged" in err
    assert not into.exists()


def test_source_without_records_fails(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / "torch2.13").mkdir(parents=True)
    with pytest.raises(MergeError, match="no cell records"):
        merge_wheel_trees([empty], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_a_wheel_that_is_not_what_its_record_says_refuses_the_whole_merge(machines: list[Path], tmp_path: Path) -> None:
    wheel = next((machines[1] / "torch2.13").glob("*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    into = tmp_path / "merged"
    with pytest.raises(MergeError) as caught:
        merge_wheel_trees(machines, into)
    assert f"{wheel}: sha256" in str(caught.value) and CELLS[1].id in str(caught.value)
    assert not into.exists()  # not even the good machines' cells


def test_a_missing_wheel_refuses_the_merge(machines: list[Path], tmp_path: Path) -> None:
    next((machines[0] / "torch2.13").glob("*.whl")).unlink()
    with pytest.raises(MergeError, match=r"wheel torch2\.13/.* is missing from"):
        merge_wheel_trees(machines, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_conflicting_records_for_one_cell_name_both_machines(whole: Path, machines: list[Path], tmp_path: Path) -> None:
    # A second machine built the same cell again: another record (and another wheel) for the same id.
    other = tmp_path / "other-machine"
    result = cell_result(CELLS[0], "passed", wheels_dir=other)
    result.finished = 2.0
    ResultStore(other / "results").save(result)
    into = tmp_path / "merged"
    with pytest.raises(MergeError) as caught:
        merge_wheel_trees([*machines, other], into)
    message = str(caught.value)
    assert f"cell {CELLS[0].id}: {machines[0]} and {other} hold different records" in message
    assert "keep one of the two" in message
    assert not into.exists()


def test_same_wheel_path_with_different_bytes_is_a_conflict(machines: list[Path], tmp_path: Path) -> None:
    # Two machines built the driver 2 wheel, not reproducibly: same name, other bytes (records agree with each file).
    driver_rel = ResultStore(machines[3] / "results").load(CELLS[3].id).sdk_wheel.path  # type: ignore[union-attr]
    changed = machines[3] / driver_rel
    changed.write_bytes(changed.read_bytes() + b"other build")
    record_path = machines[3] / "results" / "cells" / f"{CELLS[3].id}.json"
    record = json.loads(record_path.read_text())
    record["sdk_wheel"]["sha256"] = hashlib.sha256(changed.read_bytes()).hexdigest()
    record_path.write_text(json.dumps(record))
    with pytest.raises(MergeError, match=rf"{re.escape(driver_rel)} \(cell {CELLS[3].id}\): .* hold different files"):
        merge_wheel_trees(machines, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_a_log_is_no_part_of_a_builds_identity(machines: list[Path], tmp_path: Path) -> None:
    """The same record's log from two trees differs (logs carry timestamps): once called a reproducibility failure."""
    again = tmp_path / "again"
    shutil.copytree(machines[0], again)
    result = ResultStore(again / "results").load(CELLS[0].id)
    assert result is not None and result.log
    (again / result.log).write_text("# the same build, logged at another time\n")
    into = tmp_path / "merged"
    merge_wheel_trees([machines[0], again], into)
    assert (into / result.log).read_bytes() == (machines[0] / result.log).read_bytes()  # the first tree's


def test_what_the_destination_holds_must_agree_too(whole: Path, machines: list[Path], tmp_path: Path) -> None:
    into = tmp_path / "merged"
    merge_wheel_trees(machines[:1], into)
    kept = files(into)
    rebuilt = tmp_path / "rebuilt"
    result = cell_result(CELLS[0], "failed", wheels_dir=rebuilt)
    ResultStore(rebuilt / "results").save(result)
    with pytest.raises(MergeError, match=f"cell {CELLS[0].id}: {into} and {rebuilt} hold different records"):
        merge_wheel_trees([rebuilt, *machines[1:]], into)
    assert files(into) == kept


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda r: r.__setitem__("log", "../../etc/passwd"), "log: '../../etc/passwd' is not a plain relative path"),
        (
            lambda r: r["wheel"].__setitem__("path", "../outside.whl"),
            "wheel.path: '../outside.whl' is not a plain relative path",
        ),
        (lambda r: r.__setitem__("wheel", None), "passed but its record names no plugin wheel"),
        (lambda r: r.__setitem__("schema_version", 0), "schema_version: 0 is not 3"),
    ],
)
def test_bad_records_are_named(machines: list[Path], tmp_path: Path, damage, expected: str) -> None:  # type: ignore[no-untyped-def]
    record_path = machines[0] / "results" / "cells" / f"{CELLS[0].id}.json"
    record = json.loads(record_path.read_text())
    damage(record)
    record_path.write_text(json.dumps(record))
    with pytest.raises(MergeError, match=expected):
        merge_wheel_trees(machines, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_record_under_another_cells_name(machines: list[Path], tmp_path: Path) -> None:
    cells = machines[0] / "results" / "cells"
    (cells / f"{CELLS[0].id}.json").rename(cells / "torch2.13-cpu-cp311-drv9.json")
    with pytest.raises(MergeError, match=f"cell.id: '{CELLS[0].id}' is not 'torch2.13-cpu-cp311-drv9'"):
        merge_wheel_trees(machines, tmp_path / "merged")


def test_result_record_text_is_kept_byte_for_byte(machines: list[Path], tmp_path: Path) -> None:
    into = tmp_path / "merged"
    merge_wheel_trees(machines, into)
    for machine, cell in zip(machines, CELLS, strict=True):
        name = f"results/cells/{cell.id}.json"
        assert (into / name).read_bytes() == (machine / name).read_bytes()
        assert parse_record((into / name).read_text(), name).id == cell.id
