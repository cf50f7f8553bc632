"""Records and merged trees come from other machines and are distrusted: every hostile or damaged record is a
RecordError naming its file and key (exit 7 for compat-table, a rebuild for build, a refused merge), never a traceback;
symlinks and special files are never followed, copied or published; record strings never become Markdown markup."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_wheels import cell_of, cell_result
from packaging.version import Version

from torch_buildmatrix.builder.merge import merge_wheel_trees
from torch_buildmatrix.builder.records.parse import RecordRules
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.errors import MergeError, RecordError
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.vocab import WheelSourceKind

from conftest import run_cli

RELEASE = TorchRelease(Version("2.13.0"), "cpu", WheelSource(WheelSourceKind.FIND_LINKS, "/wheels"), None, ())
CELL = cell_of(RELEASE, "3.11", "2.1")
RULES = RecordRules("torch-emu", "emu-driver", "driver")
TAG = "cp311-cp311-linux_x86_64"


def passed_tree(root: Path) -> Path:
    """A wheels/ tree with the passed cell's record, wheels and log."""
    ResultStore(root / "results").save(cell_result(CELL, wheels_dir=root, tag=TAG))
    return root


def record_of(root: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "results" / "cells" / f"{CELL.id}.json").read_text())
    return data


Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = record
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[int(last) if isinstance(target, list) else last] = value

    return edit


DEEP: Any = "x"
for _ in range(20):
    DEEP = {"k": DEEP}

# One hostile or damaged record each: the edit, and what the error names.
HOSTILE: list[tuple[str, Edit, str]] = [
    ("failed step with README's end marker", _set("failed_step", "smoke | <!-- compat-table:end -->"), "not a step"),
    ("a step of no vocabulary", _set("steps", [{"name": "exploit", "status": "passed", "seconds": 1}]), "not a step"),
    ("feature name with markup", _set("features", {"<b>ops</b>|x": "passed"}), "is not a feature key"),
    ("feature name with a newline", _set("features", {"ops\n| x": "passed"}), "is not a feature key"),
    ("feature outcome of no vocabulary", _set("features", {"ops": "exploded"}), "is not an outcome"),
    ("an error of 20 000 characters", _set("error", "e" * 20000), "a string of 20000 characters (at most 16384)"),
    ("a wheel filename of 1000 characters", _set("wheel.filename", "w" * 1000), "wheel.filename: a string of 1000"),
    ("inputs 20 levels deep", _set("inputs", DEEP), "inputs: more than 1000 values or 8 levels"),
    ("a negative step time", _set("steps", [{"name": "build", "status": "passed", "seconds": -1}]), "out of range"),
    ("a count beyond 10**9", _set("smoke.passed", 10**12), "expected a count (an integer from 0 to 10**9)"),
    ("a million attempts", _set("attempts", 10**6), "expected 1 to 1000 attempts"),
    ("a start in the year 10 000", _set("started", 3e11), "started: 300000000000.0 is out of range"),
]


@pytest.mark.parametrize(("case", "edit", "problem"), HOSTILE, ids=[c for c, _e, _p in HOSTILE])
def test_a_hostile_record_is_a_record_error_naming_the_key(tmp_path: Path, case: str, edit: Edit, problem: str) -> None:
    root = passed_tree(tmp_path)
    record = record_of(root)
    edit(record)
    path = root / "results" / "cells" / f"{CELL.id}.json"
    path.write_text(json.dumps(record))
    with pytest.raises(RecordError) as raised:
        ResultStore(root / "results", RULES).load(CELL.id)
    assert raised.value.source == str(path) and problem in raised.value.problem, raised.value.problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"started": ' + "9" * 5000 + "}", "an integer of 5000 digits (at most 18)"),
        ('{"started": NaN}', "NaN is not a JSON number"),
        ('{"started": -Infinity}', "-Infinity is not a JSON number"),
        ("[" * 100000, "not valid JSON"),
        ('{"a": 1', "not valid JSON"),
    ],
)
def test_numbers_python_would_choke_on_are_refused_before_conversion(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "cells" / f"{CELL.id}.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(RecordError) as raised:
        ResultStore(tmp_path).load(CELL.id)
    assert problem in raised.value.problem, raised.value.problem


def test_a_record_that_is_a_symlink_not_utf8_or_too_large_is_damaged(tmp_path: Path) -> None:
    root = passed_tree(tmp_path)
    path = root / "results" / "cells" / f"{CELL.id}.json"
    good = path.read_bytes()
    store = ResultStore(root / "results", RULES)
    path.write_bytes(good.replace(b'"passed"', b'"pass\xe9d"', 1))
    with pytest.raises(RecordError, match="not UTF-8"):
        store.load(CELL.id)
    path.unlink()
    (tmp_path / "elsewhere.json").write_bytes(good)
    path.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(RecordError, match="is a symlink"):
        store.load(CELL.id)
    path.unlink()
    path.write_bytes(good[:-2] + b" " * (1 << 20) + good[-2:])
    with pytest.raises(RecordError, match="is larger than 1048576 bytes"):
        store.load(CELL.id)


def test_wheels_are_checked_against_the_cell(tmp_path: Path) -> None:
    """The plugin wheel's distribution and tags (they must install on the cell's Python), the driver's distribution."""
    root = passed_tree(tmp_path)
    path = root / "results" / "cells" / f"{CELL.id}.json"
    good = path.read_text()
    store = ResultStore(root / "results", RULES)
    assert store.load(CELL.id) is not None
    cases = {
        "torch_emu-": ("evil_emu-", "is not a wheel of torch-emu"),
        "cp311-cp311-linux": ("cp312-cp312-linux", "its tags do not install on the cell's Python 3.11"),
        "emu_driver-": ("evil_driver-", "is not a wheel of emu-driver"),
    }
    for old, (new, problem) in cases.items():
        path.write_text(good.replace(old, new))
        with pytest.raises(RecordError, match=problem):
            store.load(CELL.id)
    path.write_text(good.replace(TAG, "py3-none-any"))  # a py3-none wheel installs on any Python
    assert store.load(CELL.id) is not None


def test_record_strings_never_become_markdown_markup() -> None:
    from torch_buildmatrix.publish.markdown import md

    hostile = "smoke | <!-- compat-table:end --> [x](javascript:1) `code` *bold* _it_\nnext"
    shown = md(hostile)
    assert "<" not in shown and "\n" not in shown and "| " not in shown.replace("\\| ", "")
    assert shown.count("\\|") == 1 and "\\[x\\]" in shown and "\\`code\\`" in shown


def test_compat_table_renders_hostile_strings_as_text_and_its_readme_stays_whole(tmp_path: Path) -> None:
    """A table whose strings carry markup (as a tampered compatibility.json would): one row per cell line, the README
    section with exactly one pair of markers, so every later compat-table still finds them."""
    import dataclasses

    from torch_buildmatrix.model.contract import README_END
    from torch_buildmatrix.publish.markdown import grid, readme_section, replace_readme_section
    from torch_buildmatrix.publish.table import CompatCell, CompatTable, FeatureSupport, Release, SdkColumn, SdkInfo
    from torch_buildmatrix.vocab import FeatureState, SdkKind, Status

    release = Release(
        "torch2.13-cpu",
        "2.13",
        "2.13.0",
        "cpu",
        "2.13.0+cpu",
        "registry",
        ("3.11",),
        {"ops": FeatureSupport(FeatureState.PARTIAL, f"driver 2 only {README_END} | x")},
    )
    cell = CompatCell(CELL.key, Status.FAILED, "torch-emu==0.1.0+torch.2.13.drv.2", failed_step=f"smoke|{README_END}")
    sdk = SdkInfo(SdkKind.WHEEL, "driver", "driver API", "emu-driver")
    table = CompatTable("torch-emu", "0.1.0", sdk, ("3.11",), (SdkColumn("drv2", "2.1"),), (release,), (cell,))
    rows = grid(table).splitlines()
    assert len(rows) == 3 and all(row.replace("\\|", "").count("|") == 4 for row in rows), rows
    readme = replace_readme_section(
        "# x\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n", readme_section(table)
    )
    assert readme.count(README_END) == 1
    again = replace_readme_section(readme, readme_section(dataclasses.replace(table, site_url="https://x.test")))
    assert again.count(README_END) == 1


# ---- merged trees -------------------------------------------------------------------------------------------------


def test_a_log_linked_to_a_file_outside_is_refused_and_nothing_is_merged(tmp_path: Path) -> None:
    source = passed_tree(tmp_path / "artifact")
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0\n")
    log = source / "logs" / f"{CELL.id}.log"
    log.unlink()
    log.symlink_to(secret)
    into = tmp_path / "merged"
    with pytest.raises(MergeError) as raised:
        merge_wheel_trees([source], into, RULES)
    assert f"logs/{CELL.id}.log is a symlink" in str(raised.value)
    assert not into.exists()  # nothing written, the secret least of all


@pytest.mark.parametrize("kind", ["symlinked directory", "fifo", "symlinked record", "not utf-8", "big integer"])
def test_special_files_and_damaged_records_in_a_tree_refuse_the_merge(tmp_path: Path, kind: str) -> None:
    source = passed_tree(tmp_path / "artifact")
    record = source / "results" / "cells" / f"{CELL.id}.json"
    if kind == "symlinked directory":
        real = tmp_path / "real-torch"
        shutil.move(source / "torch2.13", real)
        (source / "torch2.13").symlink_to(real)
        expected = "is a symlink"
    elif kind == "fifo":
        wheel = next((source / "torch2.13").iterdir())
        wheel.unlink()
        os.mkfifo(wheel)  # reading it would block the merge forever
        expected = "is not a regular file"
    elif kind == "symlinked record":
        shutil.move(record, tmp_path / "record.json")
        record.symlink_to(tmp_path / "record.json")
        expected = "is a symlink"
    elif kind == "not utf-8":
        record.write_bytes(record.read_bytes().replace(b'"passed"', b'"pass\xffed"', 1))
        expected = "not UTF-8"
    else:
        record.write_text(record.read_text().replace('"finished": 1.0', '"finished": ' + "7" * 5000))
        expected = "an integer of 5000 digits"
    into = tmp_path / "merged"
    with pytest.raises(MergeError, match=expected):
        merge_wheel_trees([source], into, RULES)
    assert not into.exists()


def test_nothing_is_written_through_a_symlink_in_the_destination(tmp_path: Path) -> None:
    source = passed_tree(tmp_path / "artifact")
    into = tmp_path / "merged"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    into.mkdir()
    (into / "logs").symlink_to(elsewhere)
    with pytest.raises(MergeError, match="a symlink in the destination"):
        merge_wheel_trees([source], into, RULES)
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in into.iterdir()) == ["logs"]


def test_merge_results_cli_checks_records_against_the_projects_matrix(tmp_path: Path) -> None:
    """With the project's matrix.yaml, a record of another project's wheel is refused: exit 11, nothing merged."""
    from conftest import VALID

    (tmp_path / "matrix.yaml").write_text(VALID.replace("distribution: torch-emu", "distribution: other-plugin"))
    (tmp_path / "plugin" / "tests").mkdir(parents=True)
    (tmp_path / "plugin" / "tests" / "test_smoke.py").write_text("")
    (tmp_path / "driver").mkdir()
    (tmp_path / "patches" / "pre-2.7").mkdir(parents=True)
    (tmp_path / "patches" / "pre-2.7" / "series").write_text("")
    source = passed_tree(tmp_path / "artifact")
    done = run_cli(tmp_path, "merge-results", str(source), "--into", "merged", timeout=120)
    assert done.returncode == MergeError.exit_code, done.stdout + done.stderr
    assert "is not a wheel of other-plugin" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "merged").exists()


FIND_LINKS_MATRIX = """\
schema-version: 2
plugin: {distribution: torch-emu, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: emu-driver, source: driver, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: {find-links: LINKS}}
"""


def find_links_project(root: Path) -> Path:
    """A project whose one cell is CELL, its torch from a find-links directory (nothing read from the network)."""
    (root / "links").mkdir(parents=True)
    (root / "links" / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (root / "matrix.yaml").write_text(FIND_LINKS_MATRIX.replace("LINKS", str(root / "links")))
    (root / "plugin" / "tests").mkdir(parents=True)
    (root / "plugin" / "tests" / "test_smoke.py").write_text("")
    (root / "driver").mkdir()
    (root / "README.md").write_text("# x\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    return root


def test_compat_table_with_a_record_holding_a_5000_digit_integer_is_exit_7(tmp_path: Path) -> None:
    root = find_links_project(tmp_path)
    wheels = passed_tree(root / "wheels")
    assert run_cli(root, "compat-table", timeout=120).returncode == 0
    live = sorted(p.name for p in (wheels / "site").iterdir())
    record = wheels / "results" / "cells" / f"{CELL.id}.json"
    record.write_text(record.read_text().replace('"finished": 1.0', '"finished": ' + "7" * 5000))
    docs = (root / "docs" / "compatibility.json").read_bytes()
    done = run_cli(root, "compat-table", timeout=120)
    assert done.returncode == RecordError.exit_code, done.stdout + done.stderr
    assert f"{record}: not a record (an integer of 5000 digits" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in (wheels / "site").iterdir()) == live
    assert (root / "docs" / "compatibility.json").read_bytes() == docs


def test_a_damaged_record_of_any_kind_is_rebuilt_by_build(tmp_path: Path) -> None:
    from test_engine import setup_project

    from torch_buildmatrix.builder.records.model import BuildResult, CellResult
    from torch_buildmatrix.builder.runners.base import CellRunners
    from torch_buildmatrix.builder.runners.local import LocalRunner
    from torch_buildmatrix.vocab import RunnerName

    engine, [cell] = setup_project(tmp_path)
    engine.runners = CellRunners(LocalRunner(), {})  # a real interpreter, so the cell can be planned
    [build] = engine.builds_of([cell])
    made = BuildResult(cell.build, "h" * 64, {}, RunnerName.LOCAL)  # its build failed with these inputs
    first = engine.plan_cell(cell, build, made)
    engine.store.save(CellResult(cell.key, first.inputs_hash, first.inputs, RunnerName.LOCAL, finished=1.0))
    assert engine.plan_cell(cell, build, made).reusable is not None  # a deterministic failure is kept
    path = engine.store.path(cell.id)
    path.write_text(path.read_text().replace('"finished": 1.0', '"finished": ' + "7" * 5000))
    planned = engine.plan_cell(cell, build, made)
    assert planned.reusable is None and "an integer of 5000 digits" in str(engine.damaged[cell.id])


def test_every_step_the_code_records_is_in_the_step_vocabulary() -> None:
    """A record naming a step outside Step is damaged: so every step the builder names must be in it."""
    import re

    from torch_buildmatrix.vocab import Step

    package = Path(__file__).parents[2] / "torch_buildmatrix"
    named = {
        m
        for path in package.rglob("*.py")
        for m in re.findall(r'(?:\.step\(|StepFailed\()\s*"([a-z-]+)"', path.read_text())
    }
    assert named and named <= {s.value for s in Step}, named - {s.value for s in Step}
