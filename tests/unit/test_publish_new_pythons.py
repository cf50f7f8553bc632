"""The page, the docs and the wheel index on recorded results with cp314 and cp315 cells (torch 2.13's CUDA entry on
3.14 beside its CPU one on 3.11, torch 2.15 on 3.14 and 3.15), and `torch_emu.doctor --site` reading that site."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fake_wheels import cell_result
from packaging.version import Version

from torch_buildmatrix.model.cells import Cell, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.advice import install_choice
from torch_buildmatrix.publish.index import page_anchors
from torch_buildmatrix.publish.markdown import grid, install_section
from torch_buildmatrix.publish.overlay import build_table
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.site import write_site
from torch_buildmatrix.publish.table import CompatTable

from conftest import VALID, WriteMatrix

P = Python.parse  # a Python of the matrix: P("3.11"), P("3.13t")

V = Version
TORCH = VALID[VALID.index("torch:") : VALID.index("runner:")]
NEW = """\
torch:
  - version: "2.13.0"
    variant: cpu
    wheels: pip-find-links
    python: ["3.11"]
  - version: "2.13.0"
    python: ["3.14"]
  - version: "2.15.0"
exclude:
  - {python: "3.14", sdk: "1"}
  - {python: "3.15", sdk: "1"}
images:
  forky: {base: "debootstrap:forky", python: ["3.14", "3.15"]}
"""
PASSED = [
    "torch2.13-cpu-cp311-drv2",
    "torch2.13-cuda-cp314-drv2",
    "torch2.15-cuda-cp314-drv2",
    "torch2.15-cuda-cp315-drv2",
]


def new_matrix(write_matrix: WriteMatrix) -> tuple[Matrix, list[Cell], dict]:  # type: ignore[type-arg]
    text = VALID.replace('python: ["3.9", "3.10", "3.11"]', 'python: ["3.11", "3.13", "3.14", "3.15"]')
    matrix = load_matrix(write_matrix(text.replace(TORCH, NEW)))
    cpu, cuda, newest = matrix.torch
    offered = {
        cpu: {P("3.11")},
        cuda: {
            P("3.10"),
            P("3.11"),
            P("3.12"),
            P("3.13"),
            P("3.14"),
        },
        newest: {
            P("3.11"),
            P("3.12"),
            P("3.13"),
            P("3.14"),
            P("3.15"),
        },
    }
    return matrix, expand(matrix, offered), offered


def recorded_table(write_matrix: WriteMatrix, wheels: Path) -> CompatTable:
    matrix, cells, offered = new_matrix(write_matrix)
    results = [
        cell_result(c, wheels_dir=wheels, tag=f"{c.python_tag}-{c.python_tag}-linux_x86_64")
        for c in cells
        if c.id in PASSED
    ]
    results.append(cell_result(next(c for c in cells if c.id == "torch2.15-cuda-cp313-drv2"), "failed"))
    return build_table(matrix, cells, results, offered)


def test_the_docs_grid_has_a_column_per_python_and_a_row_per_variant(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    table = recorded_table(write_matrix, tmp_path / "wheels")
    text = grid(table)
    assert "| torch | driver | Python 3.11 | Python 3.13 | Python 3.14 | Python 3.15 |" in text
    rows = {line.split(" | ")[0] + " | " + line.split(" | ")[1]: line for line in text.splitlines() if "(" in line}
    assert rows["| 2.13.0 (cpu) | 2.1"].endswith("| ✓ 90 (2 skipped) | — | — | — |")
    assert rows["| 2.13.0 (cuda) | 2.1"].endswith("| — | — | ✓ 90 (2 skipped) | — |")
    assert rows["| 2.15.0 (cuda) | 2.1"].endswith("| not built | ✗ smoke | ✓ 90 (2 skipped) | ✓ 90 (2 skipped) |")
    assert rows["| 2.15.0 (cuda) | 1.4"].endswith("| not built | not built | — | — |")  # driver 1 stays off 3.14+
    section = install_section(table)
    assert "torch-emu==0.1.0+torch.2.15.drv.2" in section and "torch-emu==0.1.0+torch.2.13.drv.2" in section


def test_the_page_and_the_index_serve_the_cp314_and_cp315_wheels(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    table = recorded_table(write_matrix, wheels)
    page = site_page(table)
    for python in ("3.11", "3.13", "3.14", "3.15"):
        assert f">Python {python}<" in page, python
    exact = install_choice(table, "torch2.13-cuda", "3.14", "drv2", site="https://w.example")
    assert exact.exact and exact.cell == "torch2.13-cuda-cp314-drv2"
    assert "torch-emu==0.1.0+torch.2.13.drv.2" in exact.index_command
    assert "https://w.example/torch2.13/simple/" in exact.release_index_command
    report = write_site(table, wheels, wheels / "site")
    assert report.problems == [] and report.published
    site = wheels / "site"
    names = sorted(
        a["href"].split("#")[0].rsplit("/", 1)[-1] for a in page_anchors((site / "torch2.13/index.html").read_text())
    )
    plugin = [n for n in names if n.startswith("torch_emu")]
    # Both variants of torch 2.13 share the release's index: one wheel per Python, never the same file twice.
    assert plugin == [
        "torch_emu-0.1.0+torch.2.13.drv.2-cp311-cp311-linux_x86_64.whl",
        "torch_emu-0.1.0+torch.2.13.drv.2-cp314-cp314-linux_x86_64.whl",
    ]
    newest = [
        a["href"].split("#")[0].rsplit("/", 1)[-1]
        for a in page_anchors((site / "torch2.15/simple/torch-emu/index.html").read_text())
    ]
    assert sorted(newest) == [
        "torch_emu-0.1.0+torch.2.15.drv.2-cp314-cp314-linux_x86_64.whl",
        "torch_emu-0.1.0+torch.2.15.drv.2-cp315-cp315-linux_x86_64.whl",
    ]
    published = json.loads((site / "compatibility.json").read_text())
    assert CompatTable.from_dict(published) == table


@pytest.mark.skipif(sys.version_info[:2] in ((3, 14), (3, 15)), reason="needs a Python torch 2.15's wheels leave out")
def test_doctor_names_the_pythons_with_wheels_for_the_installed_torch(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    from doctor_env import doctor, fake_install

    wheels = tmp_path / "wheels"
    write_site(recorded_table(write_matrix, wheels), wheels, wheels / "site")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    done = doctor(fake_install(tmp_path, "2.15.0", "2, 1"), "--site", (wheels / "site").as_uri())
    assert done.returncode == 1 and done.stderr == "", done.stdout + done.stderr
    said = done.stdout.replace("\n    ", " ")
    assert f"no torch_emu is published for torch 2.15 on Python {python} (for torch 2.15: Python 3.14, 3.15;" in said, (
        said
    )
