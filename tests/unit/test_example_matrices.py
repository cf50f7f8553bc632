"""The example projects' matrices (examples/) load and expand as their READMEs say (their builds: test_examples.py)."""

from __future__ import annotations

import pytest

from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix

from conftest import REPO

EXAMPLES = REPO / "examples"


@pytest.mark.parametrize("name", ["segment-ops", "tacc-backend", "cmake-ops", "property-tests"])
def test_each_example_matrix_loads_and_expands(name: str) -> None:
    matrix = load_matrix(EXAMPLES / name / "matrix.yaml")
    pythons = {release: set(release.python or ()) for release in matrix.torch}
    cells = expand(matrix, pythons)
    assert cells and all(c.torch.version.release >= (2, 4) for c in cells)


def test_segment_ops_spans_three_releases_and_declares_no_sdk() -> None:
    matrix = load_matrix(EXAMPLES / "segment-ops" / "matrix.yaml")
    assert len({r.minor for r in matrix.torch}) >= 3 and matrix.sdk is None
    assert matrix.contract.build.version_env == "SEGOPS_VERSION"


def test_segment_ops_builds_against_the_stable_abi_from_2_10_in_one_build() -> None:
    matrix = load_matrix(EXAMPLES / "segment-ops" / "matrix.yaml")
    assert str(matrix.contract.build.stable_abi) == "2.10" and not matrix.contract.build.per_variant
    cells = expand(matrix, {release: set(release.python or ()) for release in matrix.torch})
    assert {c.id: c.build.id for c in cells} == {
        "torch2.4-cuda-cp311": "torch2.4-cuda-cp311",
        "torch2.7-cuda-cp313": "torch2.7-cuda-cp313",
        "torch2.10-cuda-cp311": "torch2.10-cuda-stable-cp311",
        "torch2.13-cpu-cp311": "torch2.10-cuda-stable-cp311",
        "torch2.15-cuda-cp311": "torch2.10-cuda-stable-cp311",
    }


def test_property_tests_smoke_requires_what_its_test_group_says() -> None:
    """The example's two statements of its tests' needs (pyproject.toml's `test` group, matrix.yaml's smoke.requires)
    agree: pytest aside, the same requirements."""
    import tomllib

    matrix = load_matrix(EXAMPLES / "property-tests" / "matrix.yaml")
    group = tomllib.loads((EXAMPLES / "property-tests" / "pyproject.toml").read_text())["dependency-groups"]["test"]
    assert sorted(r for r in matrix.contract.smoke.requires if r != "pytest") == sorted(group)
