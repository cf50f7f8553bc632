"""Test tiers (smoke.tiers): the option as read, and the rule that picks each build's deep cell, as pure functions."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.records.model import BuildResult, CellResult, SmokeCounts, TierResult, WheelRecord
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.runners.base import SmokeRun
from torch_buildmatrix.builder.tiers import combined_features, judge_deep, settle, settle_records, unsettled
from torch_buildmatrix.errors import MatrixError, RecordError, StepFailed
from torch_buildmatrix.model.builds import deep_cell, plan_builds
from torch_buildmatrix.model.cellkey import CellKey
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.contract import SmokeContract, SmokeTiers, Tier
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import FailureClass, RunnerName, Status, TierStatus, WheelSourceKind

from conftest import VALID, WriteMatrix

P = Python.parse


@dataclass(frozen=True)
class FakeCell:
    id: str
    torch: TorchRelease
    python: Python


def _release(version: str, variant: str = "cuda") -> TorchRelease:
    return TorchRelease(Version(version), variant, WheelSource(WheelSourceKind.REGISTRY), None, ())


R213, R213CPU, R215 = _release("2.13.0"), _release("2.13.0", "cpu"), _release("2.15.0")


def cells(*spec: tuple[TorchRelease, str]) -> list[FakeCell]:
    return [FakeCell(f"{r.version}-{r.variant}-{p}", r, P(p)) for r, p in spec]


@pytest.mark.parametrize(
    ("release", "members", "preference", "expected"),
    [
        # The oldest Python with the GIL, whatever the matrix order.
        (R215, cells((R215, "3.13"), (R215, "3.11"), (R215, "3.12")), (), "2.15.0-cuda-3.11"),
        # Never a free-threaded one while another is there, even an older one.
        (R215, cells((R215, "3.13t"), (R215, "3.14")), (), "2.15.0-cuda-3.14"),
        # ...unless it is the only one.
        (R215, cells((R215, "3.13t")), (), "2.15.0-cuda-3.13t"),
        (R215, cells((R215, "3.14t"), (R215, "3.13t")), (), "2.15.0-cuda-3.13t"),
        # The cells of the release the build is made against first (a stable-ABI build's later releases, another
        # variant sharing the build), even where another release's cell has an older Python.
        (R213, cells((R213, "3.14"), (R213CPU, "3.11")), (), "2.13.0-cuda-3.14"),
        (R213, cells((R215, "3.11"), (R213, "3.12")), (), "2.13.0-cuda-3.12"),
        # None of them of that release (a probe's cells): all of them.
        (R213, cells((R215, "3.12"), (R215, "3.11")), (), "2.15.0-cuda-3.11"),
        # Cells of one Python (two variants of the release share a build): the first in matrix order.
        (R213, cells((R213, "3.11"), (R213, "3.11")), (), "2.13.0-cuda-3.11"),
        # deep-python: the first preferred Python the build has.
        (R215, cells((R215, "3.11"), (R215, "3.12"), (R215, "3.13")), (P("3.13"), P("3.12")), "2.15.0-cuda-3.13"),
        (R215, cells((R215, "3.11"), (R215, "3.12")), (P("3.13"), P("3.12")), "2.15.0-cuda-3.12"),
        # A free-threaded one when asked for.
        (R215, cells((R215, "3.13"), (R215, "3.13t")), (P("3.13t"),), "2.15.0-cuda-3.13t"),
        # None of the preferred Pythons: the rule.
        (R215, cells((R215, "3.12"), (R215, "3.11")), (P("3.14"),), "2.15.0-cuda-3.11"),
        # A preferred Python only another release's cell has does not pull the deep tier off the build's release.
        (R213, cells((R213, "3.12"), (R215, "3.14")), (P("3.14"),), "2.13.0-cuda-3.12"),
    ],
)
def test_deep_cell_rule(
    release: TorchRelease, members: list[FakeCell], preference: tuple[Python, ...], expected: str
) -> None:
    assert deep_cell(release, members, preference) == expected


def test_a_build_without_cells_has_no_deep_cell() -> None:
    with pytest.raises(ValueError):
        deep_cell(R215, [])


TIERS = 'smoke:\n  tiers:\n    quick: ["-m", "not deep"]\n    deep: ["-m", "deep"]\n'


def test_without_tiers_the_whole_suite_runs_on_every_cell(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(VALID))
    assert matrix.contract.smoke.tiers is None
    assert matrix.contract.smoke.pytest_args("/f.json", Tier.DEEP) == []
    builds = plan_builds(matrix, expand(matrix, {r: {P("3.10"), P("3.11")} for r in matrix.torch}))
    assert all(b.deep_cell is None and "deep_cell" not in b.as_dict() for b in builds.values())


def test_tiers_are_read_and_select_after_smoke_args(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(
        write_matrix(
            VALID
            + 'smoke:\n  args: ["--feat={features}"]\n  tiers:\n    quick: ["-m", "not deep"]\n'
            + '    deep: ["-m", "deep"]\n    deep-python: ["3.12", "3.13t"]\n'
        )
    )
    smoke = matrix.contract.smoke
    assert smoke.tiers == SmokeTiers(("-m", "not deep"), ("-m", "deep"), (P("3.12"), P("3.13t")))
    assert smoke.pytest_args("/f.json", Tier.QUICK) == ["--feat=/f.json", "-m", "not deep"]
    assert smoke.pytest_args("/f.json", Tier.DEEP) == ["--feat=/f.json", "-m", "deep"]
    assert smoke.pytest_args("/f.json") == ["--feat=/f.json"]
    assert SmokeContract().pytest_args("/f.json", Tier.QUICK) == []


def test_every_build_gets_one_deep_cell_among_its_own(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(VALID + TIERS + "build: {per-python: false}\n"))
    builds = plan_builds(matrix, expand(matrix, {r: {P("3.10"), P("3.11")} for r in matrix.torch}))
    assert len(builds) == 4  # two releases x two driver versions, each tested on 3.10 and 3.11
    for build in builds.values():
        assert len(build.cells) == 2 and build.deep_cell in build.cells and "-cp310-" in str(build.deep_cell)
        assert build.as_dict()["deep_cell"] == build.deep_cell


@pytest.mark.parametrize(
    ("tiers", "key", "message"),
    [
        ('    quick: ["-m", "not deep"]\n', "smoke.tiers", "missing required key 'deep'"),
        ('    deep: ["-m", "deep"]\n', "smoke.tiers", "missing required key 'quick'"),
        ("    quick: []\n    deep: []\n", "smoke.tiers.deep", "needs a pytest selection"),
        ('    quick: []\n    deep: ["-m", deep]\n    deep-python: ["3.1x"]\n', "smoke.tiers.deep-python[0]", "3.1x"),
        ('    quick: []\n    deep: ["-m", deep]\n    deep-cell: "3.12"\n', "smoke.tiers.deep-cell", "unknown key"),
    ],
)
def test_tier_errors_name_the_key(write_matrix: WriteMatrix, tiers: str, key: str, message: str) -> None:
    with pytest.raises(MatrixError) as raised:
        load_matrix(write_matrix(VALID + "smoke:\n  tiers:\n" + tiers))
    problems = raised.value.problems
    assert any(p.key == key and message in p.message for p in problems), problems


# ---- records, the deep tier's verdict and how it settles a build's cells -------------------------------------------

CELL_A = CellKey(Version("2.13.0"), "cpu", P("3.11"), None, "", "torch.2.13")
CELL_B = replace(CELL_A, python=P("3.12"))
DEEP_PASSED = TierResult(CELL_A.id, TierStatus.PASSED, SmokeCounts(5, 0, 1, 0), {"ops": "passed: 5/6"}, seconds=2.5)
DEEP_FAILED = TierResult(
    CELL_A.id,
    TierStatus.FAILED,
    SmokeCounts(4, 1, 0, 0),
    {},
    "1 failed, 0 errors, 4 passed",
    FailureClass.DETERMINISTIC,
)
DEEP_NOT_RUN = TierResult(CELL_A.id, TierStatus.NOT_RUN, SmokeCounts(0, 0, 6, 0))


def cell_result(key: CellKey, status: Status = Status.PASSED, **changes: Any) -> CellResult:
    made = CellResult(key, "h", {}, RunnerName.LOCAL, status, smoke=SmokeCounts(3, 0, 0, 0), started=1.0)
    return replace(made, **changes)


def test_records_carry_the_deep_tier_and_read_back(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    for deep in (DEEP_PASSED, DEEP_FAILED, DEEP_NOT_RUN):
        original = cell_result(CELL_B, deep=deep)
        store.save(original)
        assert store.load(CELL_B.id) == original
    # Without tiers a record is what it always was: no `deep` key, read back as None.
    store.save(cell_result(CELL_A))
    assert "deep" not in json.loads(store.path(CELL_A.id).read_text())
    assert store.load(CELL_A.id) == cell_result(CELL_A)


@pytest.mark.parametrize(
    ("deep", "message"),
    [
        ({"cell": CELL_A.id, "status": "skipped"}, "deep.status"),
        ({"cell": "../x", "status": "passed"}, "deep.cell"),
        ({"status": "passed"}, "missing key(s) cell"),
        ({"cell": CELL_A.id, "status": "passed", "verdict": 1}, "unknown key(s) verdict"),
        ({"cell": CELL_A.id, "status": "passed", "features": {"<b>": "passed"}}, "deep.features"),
    ],
)
def test_a_damaged_deep_tier_is_a_damaged_record(tmp_path: Path, deep: dict[str, Any], message: str) -> None:
    store = ResultStore(tmp_path)
    store.save(cell_result(CELL_A))
    path = store.path(CELL_A.id)
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "deep": deep}))
    with pytest.raises(RecordError, match=message.replace("(", r"\(").replace(")", r"\)")):
        store.load(CELL_A.id)


def _junit(path: Path, tests: int, failures: int = 0, skipped: int = 0) -> Path:
    path.write_text(
        f'<testsuites><testsuite tests="{tests}" failures="{failures}" skipped="{skipped}" errors="0"/></testsuites>'
    )
    return path


@pytest.mark.parametrize(
    ("counts", "exit_code", "expected"),
    [
        ((3, 0, 0), None, TierStatus.PASSED),
        ((3, 0, 2), None, TierStatus.PASSED),  # one test checked something
        ((3, 0, 3), None, TierStatus.NOT_RUN),  # every test skipped: never "passed"
        ((0, 0, 0), "exit code 5: pytest", TierStatus.NOT_RUN),  # pytest selected nothing (the local runner's words)
        ((0, 0, 0), "pytest exit code 5", TierStatus.NOT_RUN),  # (the Docker runner's)
        ((0, 0, 0), "exit code 4: pytest", TierStatus.FAILED),  # pytest could not start (a configuration error)
        ((3, 1, 0), "exit code 1: pytest", TierStatus.FAILED),
    ],
)
def test_deep_verdict(
    tmp_path: Path, counts: tuple[int, int, int], exit_code: str | None, expected: TierStatus
) -> None:
    failure = StepFailed("smoke", exit_code) if exit_code else None
    run = SmokeRun(_junit(tmp_path / "junit.xml", *counts), tmp_path / "none.json", failure)
    verdict = judge_deep(run, CELL_A.id, 1.0)
    assert verdict.status == expected and verdict.cell == CELL_A.id
    assert (verdict.error is not None) == (expected == TierStatus.FAILED)


def test_a_deep_tier_without_a_report_failed(tmp_path: Path) -> None:
    run = SmokeRun(tmp_path / "missing.xml", tmp_path / "none.json", StepFailed("smoke", "pytest exit code 4"))
    assert judge_deep(run, CELL_A.id, 1.0).status == TierStatus.FAILED


def test_a_transient_deep_failure_is_raised_as_the_deep_step(tmp_path: Path) -> None:
    timeout = StepFailed("smoke", "timed out", "", FailureClass.TRANSIENT)
    with pytest.raises(StepFailed) as raised:
        judge_deep(SmokeRun(tmp_path / "j.xml", tmp_path / "f.json", timeout), CELL_A.id, 1.0)
    assert raised.value.step == "deep" and raised.value.failure_class == FailureClass.TRANSIENT


FAILED_BY_DEEP: dict[str, Any] = {
    "status": Status.FAILED,
    "failed_step": "deep",
    "error": f"the deep tier of build torch2.13-cpu failed on cell {CELL_A.id}: 1 failed, 0 errors, 4 passed",
    "failure_class": FailureClass.DETERMINISTIC,
}
OWN_FAILURE: dict[str, Any] = {
    "status": Status.FAILED,
    "failed_step": "smoke",
    "error": "1 failed",
    "failure_class": None,
}


@pytest.mark.parametrize(
    ("deep", "before", "after"),
    [
        (DEEP_PASSED, {}, {}),
        (DEEP_NOT_RUN, {}, {}),
        (DEEP_FAILED, {}, FAILED_BY_DEEP),  # a deep failure fails the build's other cells
        (DEEP_FAILED, OWN_FAILURE, OWN_FAILURE),  # a cell that failed on its own keeps its own failure
        (DEEP_PASSED, FAILED_BY_DEEP, {"status": Status.PASSED, "failed_step": None, "error": None}),  # given back
        (DEEP_NOT_RUN, FAILED_BY_DEEP, {"status": Status.PASSED, "failed_step": None, "error": None}),
        (None, FAILED_BY_DEEP, {"status": Status.PASSED, "failed_step": None, "error": None}),
        (DEEP_PASSED, OWN_FAILURE, OWN_FAILURE),
    ],
)
def test_settle(deep: TierResult | None, before: dict[str, Any], after: dict[str, Any]) -> None:
    own = cell_result(CELL_A, deep=deep, **(OWN_FAILURE if before is OWN_FAILURE else {}))
    other = cell_result(CELL_B, **before)
    changed = {c.id: c for c in settle("torch2.13-cpu", deep, [own, other])}
    settled_other = changed.get(CELL_B.id, other)
    assert settled_other.deep == deep
    expected = cell_result(CELL_B, deep=deep, **{**before, **after})
    if after.get("status") == Status.PASSED:
        expected = replace(expected, failure_class=None)
    assert settled_other == expected
    assert CELL_A.id not in changed  # the deep cell's own run judged it; it carries its own tier already
    assert settle("torch2.13-cpu", deep, [settled_other]) == []  # idempotent


def test_combined_features() -> None:
    deep = replace(DEEP_PASSED, features={"ops": "passed: 5/6", "models": "failed", "compile": "passed"})
    own = {"compile": "not available: no compiler", "import": "passed", "models": "passed"}
    assert combined_features(own, deep) == {
        "compile": "passed",
        "import": "passed",
        "models": "failed",
        "ops": "passed: 5/6",
    }
    assert combined_features(own, None) == own


def test_the_fan_out_marks_each_builds_deep_cell_job(write_matrix: WriteMatrix) -> None:
    from torch_buildmatrix.report_matrix import github_matrix

    for tiers, expected in ((TIERS, True), ("", False)):
        matrix = load_matrix(write_matrix(VALID + tiers + "build: {per-python: false}\n"))
        cells = expand(matrix, {r: {P("3.10"), P("3.11")} for r in matrix.torch})
        builds = list(plan_builds(matrix, cells).values())
        entries = github_matrix(cells, builds, dict.fromkeys([P("3.10"), P("3.11")], RunnerName.LOCAL))
        include = entries["cells"]["include"]
        if not expected:  # without tiers the workflow's matrix is what it was
            assert all("deep" not in e for e in include)
            continue
        deep = [e["cell"] for e in include if e["deep"]]
        assert sorted(deep) == sorted(str(b.deep_cell) for b in builds) and len(deep) == len(builds)


def test_settle_records_finds_the_deep_cell_by_its_record() -> None:
    wheel = WheelRecord("tiny-0.1.0+torch.2.13-py3-none-any.whl", "ab" * 32, "torch2.13/tiny.whl")
    deep_cell = cell_result(CELL_A, Status.FAILED, failed_step="deep", deep=DEEP_FAILED, wheel=wheel)
    other = cell_result(CELL_B, wheel=wheel)
    stale = cell_result(replace(CELL_B, python=P("3.13")), wheel=replace(wheel, sha256="cd" * 32))
    build = BuildResult(CELL_A.build, "h", {}, RunnerName.LOCAL, status=Status.PASSED, wheel=wheel)
    cells, builds = settle_records([deep_cell, other, stale], [build])
    assert [c.id for c in cells] == [CELL_B.id] and cells[0].failed_step == "deep"  # not the stale record
    assert builds == [replace(build, deep=DEEP_FAILED)]
    # What merge-results compares: a settled record and its job's own agree; a record of another verdict does not.
    assert unsettled(cells[0]) == unsettled(other) == other and unsettled(builds[0]) == build
    assert unsettled(replace(other, smoke=SmokeCounts(2, 1, 0, 0))) != unsettled(cells[0])
    # No record of the deep cell in the tree (its job's artifact missing): nothing is settled.
    assert settle_records([other], [build]) == ([], [])
