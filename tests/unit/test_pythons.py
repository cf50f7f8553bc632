"""The Python axis: "3.13t" is the free-threaded 3.13, a Python of its own from matrix.yaml to cell ids and images."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.runners.containers import image_for
from torch_buildmatrix.builder.runners.select import serving_image
from torch_buildmatrix.errors import InterpreterNotFound, MatrixError
from torch_buildmatrix.model.cells import Selection, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import pythons_from_filenames

from conftest import WriteMatrix

P = Python.parse


@pytest.mark.parametrize(
    ("text", "version", "free_threaded", "tag", "name"),
    [
        ("3.11", "3.11", False, "cp311", "python3.11"),
        ("3.13t", "3.13", True, "cp313t", "python3.13t"),
        ("3.9", "3.9", False, "cp39", "python3.9"),
        (" 3.15t ", "3.15", True, "cp315t", "python3.15t"),
    ],
)
def test_parse(text: str, version: str, free_threaded: bool, tag: str, name: str) -> None:
    python = P(text)
    assert (python.version, python.free_threaded, python.tag, python.executable_name) == (
        Version(version),
        free_threaded,
        tag,
        name,
    )
    assert P(str(python)) == python and python.series == version


@pytest.mark.parametrize("text", ["3", "3.13.1", "3.13T", "3.13tt", "py3.13", "t3.13", "3.x", ""])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Python minor"):
        P(text)


def test_order_puts_each_free_threaded_build_after_its_gil_build() -> None:
    assert sorted(map(P, ["3.14", "3.13t", "3.9", "3.13", "3.14t", "3.10"])) == list(
        map(P, ["3.9", "3.10", "3.13", "3.13t", "3.14", "3.14t"])
    )
    assert P("3.13t").with_gil == P("3.13") and P("3.13") != P("3.13t")


# torch's published free-threaded tags (registry, linux x86_64): cp313t for 2.7-2.12.0, cp314t from 2.9, cp315t 2.15.
REGISTRY_FILES = [
    (f"torch-{version}-{tag}-{abi}-manylinux_2_28_x86_64.whl", f"u{i}")
    for i, (version, tag, abi) in enumerate(
        [
            ("2.7.1", "cp313", "cp313"),
            ("2.7.1", "cp313", "cp313t"),
            ("2.10.0", "cp313", "cp313t"),
            ("2.10.0", "cp314", "cp314"),
            ("2.10.0", "cp314", "cp314t"),
            ("2.12.1", "cp314", "cp314t"),
            ("2.15.0", "cp315", "cp315t"),
            ("2.15.0", "cp315", "abi3"),  # never a torch wheel, and no Python of its own
        ]
    )
]


@pytest.mark.parametrize(
    ("version", "pythons"),
    [
        ("2.7.1", ["3.13", "3.13t"]),
        ("2.10.0", ["3.13t", "3.14", "3.14t"]),
        ("2.12.1", ["3.14t"]),
        ("2.15.0", ["3.15t"]),
    ],
)
def test_the_registry_reads_free_threaded_tags_apart(version: str, pythons: list[str]) -> None:
    found = pythons_from_filenames(REGISTRY_FILES, Version(version), "x86_64")
    assert sorted(str(w.python) for w in found) == pythons


MATRIX = """\
schema-version: 2
plugin: {distribution: my-ext, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}
python: ["3.12", "3.13", "3.13t", "3.14t"]
torch:
  - version: "2.10.0"
  - version: "2.12.1"
    python: ["3.13t"]
images:
  trixie: {base: "debootstrap:trixie", python: ["3.13"]}
  trixie-ft: {base: "debootstrap:trixie", python: ["3.13t"]}
"""


def test_free_threaded_cells_are_chosen_like_the_others(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(MATRIX))
    assert matrix.python == (P("3.12"), P("3.13"), P("3.13t"), P("3.14t"))
    ten, twelve = matrix.torch
    published = {ten: {P("3.12"), P("3.13"), P("3.13t"), P("3.14")}, twelve: {P("3.13t"), P("3.14t")}}
    cells = expand(matrix, published)
    assert [c.id for c in cells] == [
        "torch2.10-cuda-cp312",
        "torch2.10-cuda-cp313",
        "torch2.10-cuda-cp313t",
        "torch2.12-cuda-cp313t",
    ]
    record = cells[2].as_dict()
    assert record["python"] == "3.13t" and record["id"] == "torch2.10-cuda-cp313t"
    assert [c.id for c in Selection(python=("3.13t",)).apply(cells)] == [
        "torch2.10-cuda-cp313t",
        "torch2.12-cuda-cp313t",
    ]
    assert [c.id for c in Selection(python=("cp313",)).apply(cells)] == ["torch2.10-cuda-cp313"]
    # an image serves the Python it lists, the free-threaded build apart from the GIL one
    assert image_for(cells[1].python, None, matrix).name == "trixie"
    assert image_for(cells[2].python, None, matrix).name == "trixie-ft"
    assert serving_image(P("3.13t"), matrix) is not None and serving_image(P("3.12"), matrix) is None
    with pytest.raises(InterpreterNotFound, match=r"no image in matrix.yaml serves Python 3\.12"):
        image_for(cells[0].python, None, matrix)


def test_a_free_threaded_python_the_release_does_not_publish_is_located(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(MATRIX))
    ten, twelve = matrix.torch
    with pytest.raises(MatrixError) as info:
        expand(matrix, {ten: {P("3.13")}, twelve: {P("3.14t")}})
    [problem] = info.value.problems
    assert problem.key == "torch[1].python[0]" and "publishes no wheel for Python 3.13t" in problem.message


@pytest.mark.parametrize("bad", ['"3.13x"', '"3.13.1"', "3.13"])
def test_a_bad_python_is_a_located_error(write_matrix: WriteMatrix, bad: str) -> None:
    path: Path = write_matrix(MATRIX.replace('"3.14t"]', f"{bad}]"))
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    assert [p.key for p in info.value.problems] == ["python[3]"]
