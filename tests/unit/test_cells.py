"""Expansion of a matrix into cells: intersection with published Pythons, exclude/include, selection, ids."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from torch_buildmatrix.errors import MatrixError
from torch_buildmatrix.model.cellkey import LABEL_TEXT, TORCH_FIELDS, CellKey, Naming, Template
from torch_buildmatrix.model.cells import Cell, Selection, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix, TorchRelease, WheelSource
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import WheelSourceKind

from conftest import VALID, WriteMatrix

P = Python.parse  # a Python of the matrix: P("3.11"), P("3.13t")

V = Version
PUBLISHED = {
    "2.4.1": {
        P("3.8"),
        P("3.9"),
        P("3.10"),
        P("3.11"),
        P("3.12"),
    },
    "2.13.0": {P("3.11")},
}


def available(matrix: Matrix, table: dict[str, set[Python]] = PUBLISHED) -> dict[TorchRelease, set[Python]]:
    return {r: table[str(r.version)] for r in matrix.torch}


def ids(cells: list[Cell]) -> list[str]:
    return [c.id for c in cells]


def test_expansion_intersects_with_published_pythons(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    assert ids(expand(matrix, available(matrix))) == [
        "torch2.4-cuda-cp39-drv1",
        "torch2.4-cuda-cp39-drv2",
        "torch2.4-cuda-cp310-drv1",
        "torch2.4-cuda-cp310-drv2",
        "torch2.4-cuda-cp311-drv1",
        "torch2.4-cuda-cp311-drv2",
        "torch2.13-cpu-cp311-drv1",
        "torch2.13-cpu-cp311-drv2",
    ]


def test_declared_python_a_release_lacks_is_an_error(write_matrix: WriteMatrix) -> None:
    text = VALID.replace("    wheels: pip-find-links", '    wheels: pip-find-links\n    python: ["3.11", "3.9"]')
    matrix = load_matrix(write_matrix(text))
    with pytest.raises(MatrixError) as info:
        expand(matrix, available(matrix))
    message = str(info.value.problems[0])
    assert "matrix.yaml:22: torch[1].python[1]" in message
    assert "publishes no wheel for Python 3.9 (published: 3.11)" in message


@pytest.mark.parametrize(
    ("rules", "expected_missing", "expected_count"),
    [
        ('exclude: [{torch: "2.4", python: "3.9"}]', ["torch2.4-cuda-cp39-drv1", "torch2.4-cuda-cp39-drv2"], 6),
        ('exclude: [{sdk: "1"}]', ["torch2.4-cuda-cp39-drv1", "torch2.13-cpu-cp311-drv1"], 4),
        ("exclude: [{variant: cpu}]", ["torch2.13-cpu-cp311-drv2"], 6),
        ('exclude: [{torch: ">=2.5"}]', ["torch2.13-cpu-cp311-drv1"], 6),
    ],
)
def test_exclude(write_matrix: WriteMatrix, rules: str, expected_missing: list[str], expected_count: int) -> None:
    matrix = load_matrix(write_matrix(VALID + rules + "\n"))
    cells = ids(expand(matrix, available(matrix)))
    assert len(cells) == expected_count
    assert not set(expected_missing) & set(cells)


def test_include_adds_a_python_outside_the_global_list(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(VALID + 'include: [{torch: "2.4", python: "3.12", sdk: "2"}]\n'))
    assert "torch2.4-cuda-cp312-drv2" in ids(expand(matrix, available(matrix)))


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ('{torch: "2.4", python: "3.7", sdk: "2"}', "publishes no wheel for Python 3.7"),
        ('{torch: "2.9", python: "3.11", sdk: "2"}', "matches no torch release"),
        ('{torch: "2.4", python: "3.11", sdk: "3"}', "sdk 3 is not in sdk.versions"),
    ],
)
def test_bad_include(write_matrix: WriteMatrix, rule: str, message: str) -> None:
    matrix = load_matrix(write_matrix(VALID + f"include: [{rule}]\n"))
    with pytest.raises(MatrixError, match=message):
        expand(matrix, available(matrix))


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (Selection(torch=("2.13",)), ["torch2.13-cpu-cp311-drv1", "torch2.13-cpu-cp311-drv2"]),
        (Selection(torch=("2.4",), python=("3.10",), sdk=("2",)), ["torch2.4-cuda-cp310-drv2"]),
        (Selection(python=("cp311",), sdk=("2.1",)), ["torch2.4-cuda-cp311-drv2", "torch2.13-cpu-cp311-drv2"]),
        (Selection(variant=("cpu",), sdk=("1",)), ["torch2.13-cpu-cp311-drv1"]),
        (Selection(variant=("cpu",), sdk=("drv1",)), ["torch2.13-cpu-cp311-drv1"]),  # the id part selects too
        (Selection(torch=("2.5",)), []),
    ],
)
def test_selection(write_matrix: WriteMatrix, selection: Selection, expected: list[str]) -> None:
    matrix = load_matrix(write_matrix())
    assert ids(selection.apply(expand(matrix, available(matrix)))) == expected


def test_cell_naming(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    cell = expand(matrix, available(matrix))[-1]
    assert cell.local_version_label == "torch.2.13.drv.2"
    assert cell.as_dict()["python"] == "3.11" and cell.python_tag == "cp311"


pythons = st.sets(st.sampled_from([P(f"3.{m}{t}") for m in range(8, 15) for t in ("", "t")]))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the matrix file is read-only here
@given(published_24=pythons, published_213=pythons)
def test_expansion_properties(write_matrix: WriteMatrix, published_24: set[Python], published_213: set[Python]) -> None:
    matrix = load_matrix(write_matrix())
    table = {"2.4.1": published_24, "2.13.0": published_213}
    dropped = [f"torch[{i}]" for i, r in enumerate(matrix.torch) if not table[str(r.version)] & set(matrix.python)]
    if dropped:  # a release none of whose Pythons is shipped is an error, never silently left out
        with pytest.raises(MatrixError) as info:
            expand(matrix, available(matrix, table))
        assert [p.key for p in info.value.problems] == dropped
        return
    cells = expand(matrix, available(matrix, table))
    # ids are unique, every cell's Python is both declared and published, and both drivers appear per pair
    assert len(set(ids(cells))) == len(cells)
    for cell in cells:
        assert cell.python in matrix.python
        assert cell.python in (published_24 if cell.torch.minor == "2.4" else published_213)
    assert len(cells) == 2 * (len(published_24 & set(matrix.python)) + len(published_213 & set(matrix.python)))


def test_cell_key_round_trips_and_is_what_records_hold(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    for cell in expand(matrix, available(matrix)):
        key = cell.key
        assert CellKey.from_dict(cell.as_dict()) == key and key.id == cell.id
        assert key.to_dict(cell.torch.patches) == cell.as_dict()
        assert key.variant == cell.torch.variant and key.python == P(key.python_minor)


def test_cell_key_differs_for_an_older_matrix(write_matrix: WriteMatrix) -> None:
    """Same id, other torch patch release, SDK version, label scheme or build: not the same cell."""
    matrix = load_matrix(write_matrix())
    key = expand(matrix, available(matrix))[0].key
    assert key.sdk is not None
    assert replace(key, torch=V("2.4.0")).id == key.id and replace(key, torch=V("2.4.0")) != key
    assert replace(key, sdk=V(f"{key.sdk.major}.99")) != key
    relabeled = replace(key, label="pt24", built_by=replace(key.build, label="pt24"))
    assert relabeled.id == key.id and relabeled != key
    shared = replace(key, built_by=replace(key.build, python=None))  # one build for every Python now
    assert shared.id == key.id and shared != key and shared.build.id == "torch2.4-cuda-drv1"
    with pytest.raises(ValueError, match="is not its build's label"):
        replace(key, label="pt24")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"id": "torch2.13-cpu-cp311", "torch": "2.13.0", "variant": "cpu", "python": "3.11"}, "label: expected"),
        (
            {"id": "a", "torch": "2.13.0", "variant": "ROCm", "python": "3.11", "label": "x"},
            "variant: 'ROCm' is not a variant name",
        ),
        (
            {"id": "a", "torch": "2.x", "variant": "cpu", "python": "3.11", "sdk": "2.1", "label": "x"},
            "torch: '2.x' is not a version",
        ),
        (
            {"id": "x", "torch": "2.13.0", "variant": "cpu", "python": "3.11", "sdk": "2.1", "label": "x"},
            "id: 'x' is not torch2.13-cpu-cp311-<sdk part>",
        ),
        (
            {"id": "torch2.13-cpu-cp311-drv2", "torch": "2.13.0", "variant": "cpu", "python": "3.11", "label": "x"},
            "id: 'torch2.13-cpu-cp311-drv2' is not 'torch2.13-cpu-cp311'",  # an SDK part, but no SDK version
        ),
        (
            {"id": "torch2.13-cpu-cp311", "torch": "2.13.0", "variant": "cpu", "python": "3.11", "label": "Torch!"},
            "label: 'Torch!' is not a PEP 440 local label",
        ),
    ],
)
def test_cell_key_rejects_what_is_not_one(data: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        CellKey.from_dict(data)


EMU_LABEL = Template.parse("torch.{torch_minor}.drv.{sdk_major}", {**TORCH_FIELDS, "sdk_major": "2"}, LABEL_TEXT)


def label(minor: str, sdk_major: int, template: Template = EMU_LABEL) -> str:
    release = TorchRelease(V(f"{minor}.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
    return Naming(template).local_label(release, V(f"{sdk_major}.0"))


def test_our_local_labels_sort_numerically_past_nine() -> None:
    """An installer takes the highest version: with labels as text, drv10 < drv2 and torch2.10 < torch2.9."""
    ordered = [("2.4", 2), ("2.4", 9), ("2.4", 10), ("2.9", 1), ("2.10", 1), ("2.10", 2), ("2.15", 1), ("3.0", 1)]
    versions = [Version(f"0.1.0+{label(minor, driver)}") for minor, driver in ordered]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert Version("0.1.0+torch2.4.drv10") < Version("0.1.0+torch2.4.drv2")  # the scheme this one replaced


@given(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
def test_label_order_is_the_numeric_order(minor_a: int, drv_a: int, minor_b: int, drv_b: int) -> None:
    a = Version(f"0.1.0+{label(f'2.{minor_a}', drv_a)}")
    b = Version(f"0.1.0+{label(f'2.{minor_b}', drv_b)}")
    assert (a < b) == ((minor_a, drv_a) < (minor_b, drv_b))
    assert (a.local or "").split(".")[1:3] == ["2", str(minor_a)]  # torch line and driver stay parseable fields


@pytest.mark.parametrize(
    ("minor", "driver", "expected"),
    [("2.13", 2, "torch.2.13.drv.2"), ("2.4", 1, "torch.2.4.drv.1"), ("3.0", 10, "torch.3.0.drv.10")],
)
def test_the_label_is_spelled_once(write_matrix: WriteMatrix, minor: str, driver: int, expected: str) -> None:
    assert label(minor, driver) == expected
    matrix = load_matrix(write_matrix())
    assert matrix.sdk is not None
    release = replace(matrix.torch[0], version=V(f"{minor}.1"))
    sdk = replace(matrix.sdk.versions[0], version=V(f"{driver}.0"))
    assert matrix.naming.key(release, P("3.12"), sdk).local_version_label == expected


def test_an_include_that_gives_two_variants_one_wheel_name_is_refused(write_matrix: WriteMatrix) -> None:
    """torch 2.13 as CPU on cp311 and CUDA on cp310; an include of CUDA on cp311 would publish the CPU cell's file."""
    text = VALID.replace(
        "    wheels: pip-find-links\n",
        '    wheels: pip-find-links\n    python: ["3.11"]\n  - version: "2.13.0"\n    python: ["3.10"]\n',
    )
    matrix = load_matrix(write_matrix(text + 'include: [{torch: "2.13", variant: cuda, python: "3.11", sdk: "2"}]\n'))
    cpu, cuda = (r for r in matrix.torch if r.minor == "2.13")
    offered = {
        matrix.torch[0]: PUBLISHED["2.4.1"],
        cpu: {P("3.11")},
        cuda: {P("3.10"), P("3.11")},
    }
    with pytest.raises(MatrixError) as info:
        expand(matrix, offered)
    [problem] = info.value.problems
    assert problem.key == "include[0]" and problem.line == 26
    assert "torch2.13-cuda-cp311-drv2 and torch2.13-cpu-cp311-drv2 would publish one wheel file name" in str(problem)
    # Without the include, both variants expand, each on its own Python.
    plain = load_matrix(write_matrix(text))
    cells = ids(
        expand(
            plain,
            {
                plain.torch[0]: PUBLISHED["2.4.1"],
                plain.torch[1]: {P("3.11")},
                plain.torch[2]: {P("3.10"), P("3.11")},
            },
        )
    )
    assert [c for c in cells if c.startswith("torch2.13")] == [
        "torch2.13-cpu-cp311-drv1",
        "torch2.13-cpu-cp311-drv2",
        "torch2.13-cuda-cp310-drv1",
        "torch2.13-cuda-cp310-drv2",
    ]


def test_an_include_without_a_variant_that_adds_both_variants_on_one_python_is_refused(
    write_matrix: WriteMatrix,
) -> None:
    """An include rule without `variant` matches the CPU and the CUDA entry of torch 2.13: it adds two cells that
    build the same wheel file; the duplicate check once compared only against the cells before the rule."""
    text = VALID.replace(
        "    wheels: pip-find-links\n",
        '    wheels: pip-find-links\n    python: ["3.11"]\n  - version: "2.13.0"\n    python: ["3.10"]\n',
    )
    matrix = load_matrix(write_matrix(text + 'include: [{torch: "2.13", python: "3.9", sdk: "2"}]\n'))
    cpu, cuda = (r for r in matrix.torch if r.minor == "2.13")
    offered = {matrix.torch[0]: PUBLISHED["2.4.1"], cpu: {P("3.9"), P("3.11")}, cuda: {P("3.9"), P("3.10")}}
    with pytest.raises(MatrixError) as info:
        expand(matrix, offered)
    [problem] = info.value.problems
    assert problem.key == "include[0]"
    assert "torch2.13-cuda-cp39-drv2 and torch2.13-cpu-cp39-drv2 would publish one wheel file name" in str(problem)
