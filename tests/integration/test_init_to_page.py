"""From `init` to a published page with no edit to what `init` wrote, as a newcomer goes: a setup.py extension and an
extension built with CMake (examples/cmake-ops without its matrix.yaml), each on the cheap torch 2.13 CPU cell.

`init` reads the project and writes its matrix.yaml (name, version, relabel or not, the torch pin, ninja, no README
block without markers); `build` then builds and smoke-tests the cell, and `compat-table` publishes the site and the
compatibility docs. Nothing in between is edited: what `init` wrote must be enough.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_cli

pytestmark = pytest.mark.integration

SITE = "https://wheels.example.org/newcomer"

SETUP_PY = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="tiny-ops",
    version="0.3.1",
    ext_modules=[CppExtension("tiny_ops._C", ["csrc/ops.cpp"])],
    cmdclass={"build_ext": BuildExtension},
    packages=["tiny_ops"],
)
"""

# One operator through torch's dispatcher, and the module Python imports: torch/library.h, not torch/extension.h
# (a unit with extension.h compiles for about 50 s).
OPS_CPP = """\
#include <Python.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <torch/library.h>

at::Tensor twice(const at::Tensor& x) { return at::add(x, x); }

TORCH_LIBRARY(tiny_ops, m) { m.def("twice(Tensor x) -> Tensor", twice); }

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""

INIT_PY = "import torch\n\nfrom . import _C  # noqa: F401  (registers torch.ops.tiny_ops)\n"

TEST_PY = """\
import torch
import tiny_ops  # noqa: F401


def test_twice() -> None:
    assert torch.ops.tiny_ops.twice(torch.arange(3.0)).tolist() == [0.0, 2.0, 4.0]
"""


def setup_py_project(root: Path) -> Path:
    for name, text in {
        "setup.py": SETUP_PY,
        "csrc/ops.cpp": OPS_CPP,
        "tiny_ops/__init__.py": INIT_PY,
        "tests/test_ops.py": TEST_PY,
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def cmake_project(root: Path) -> Path:
    shutil.copytree(
        REPO / "examples" / "cmake-ops",
        root,
        ignore=shutil.ignore_patterns("build", "wheels", "*.egg-info", "__pycache__", "*.so", "matrix.yaml"),
    )
    return root


def init_build_publish(project: Path, distribution: str) -> dict[str, object]:
    """init, build the 2.13 CPU cell, compat-table: each must pass; returns the cell's record."""
    written = run_cli(project, "init", timeout=300)
    assert written.returncode == 0, written.stdout + written.stderr
    assert (project / "matrix.yaml").is_file()
    built = run_cli(project, "build", "--torch", "2.13", "--python", "3.11", "--jobs", "1")
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    (record_file,) = (project / "wheels" / "results" / "cells").glob("torch2.13-cpu-cp311*.json")
    record: dict[str, object] = json.loads(record_file.read_text())
    assert record["status"] == "passed", record
    table = run_cli(project, "compat-table", "--offline", "--site-url", SITE, timeout=600)
    assert table.returncode == 0, table.stdout + table.stderr
    site = project / "wheels" / "site"
    (wheel,) = (project / "wheels" / "torch2.13").glob("*.whl")
    page = (site / "index.html").read_text()
    assert distribution in page and "2.13" in page
    index = (site / "torch2.13" / "simple" / distribution / "index.html").read_text()
    assert wheel.name in index  # the site serves the cell's wheel
    assert (project / "docs" / "compatibility.md").is_file()
    assert not (project / "README.md").exists() or "compat-table:start" not in (project / "README.md").read_text()
    return record


def test_a_setup_py_extension_goes_from_init_to_a_published_page(tmp_path: Path) -> None:
    project = setup_py_project(tmp_path / "tiny-ops")
    init_build_publish(project, "tiny-ops")
    (wheel,) = (project / "wheels" / "torch2.13").glob("*.whl")
    assert wheel.name.startswith("tiny_ops-0.3.1+")  # its own version, relabelled with the cell's label


def test_a_cmake_extension_goes_from_init_to_a_published_page(tmp_path: Path) -> None:
    project = cmake_project(tmp_path / "cmake-ops")
    init_build_publish(project, "cmake-ops")
    (wheel,) = (project / "wheels" / "torch2.13").glob("*.whl")
    assert wheel.name.startswith("cmake_ops-0.1.0+")
