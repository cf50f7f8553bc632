"""Test tiers (smoke.tiers): the option as read, and the rule that picks each build's deep cell, as pure functions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from packaging.version import Version

from buildmatrix.errors import MatrixError
from buildmatrix.model.builds import deep_cell, plan_builds
from buildmatrix.model.cells import expand
from buildmatrix.model.contract import SmokeContract, SmokeTiers, Tier
from buildmatrix.model.matrix import TorchRelease, WheelSource, load_matrix
from buildmatrix.model.pythons import Python
from buildmatrix.model.vocab import WheelSourceKind

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
