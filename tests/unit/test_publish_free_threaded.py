"""Free-threaded cells on the page and in the docs: 3.13t is a column of its own next to 3.13, and a choice whose
Python the release's wheel does not install on (a cp39-abi3 wheel on a free-threaded 3.13t) is refused with the
reason, never given a command."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fake_wheels import cell_result

from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.advice import install_choice
from torch_buildmatrix.publish.markdown import grid, legend
from torch_buildmatrix.publish.overlay import build_table
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.table import CompatTable

from conftest import VALID, WriteMatrix

P = Python.parse
MATRIX = (
    VALID.replace('python: ["3.9", "3.10", "3.11"]', 'python: ["3.12", "3.13", "3.13t", "3.14"]')
    .replace('versions: ["1.4", "2.1"]', 'versions: ["2.1"]')
    .replace(
        VALID[VALID.index("torch:") : VALID.index("runner:")],
        'torch:\n  - version: "2.8.0"\n    python: ["3.13", "3.13t"]\n  - version: "2.9.1"\n    python: ["3.14"]\n',
    )
    + "build:\n  per-python: false\n"
)
# What the registry publishes: 2.9.1 has cp313t wheels too, but the matrix picks its newest Python only.
OFFERED = {"2.8.0": {"3.12", "3.13", "3.13t"}, "2.9.1": {"3.12", "3.13", "3.13t", "3.14", "3.14t"}}


def table_of(write_matrix: WriteMatrix, wheels: Path, tag: str, failed: tuple[str, ...] = ()) -> CompatTable:
    """Every cell passed with one wheel per build tagged `tag`, except the `failed` ones."""
    matrix = load_matrix(write_matrix(MATRIX))
    offered = {r: {P(p) for p in OFFERED[str(r.version)]} for r in matrix.torch}
    cells = expand(matrix, offered)
    assert [c.id for c in cells] == [
        "torch2.8-cuda-cp313-drv2",
        "torch2.8-cuda-cp313t-drv2",
        "torch2.9-cuda-cp314-drv2",
    ]
    results = [
        cell_result(c, "failed") if c.id in failed else cell_result(c, wheels_dir=wheels, tag=tag) for c in cells
    ]
    return build_table(matrix, cells, results, offered)


def test_the_free_threaded_column_stands_next_to_its_minor(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    table = table_of(write_matrix, tmp_path / "wheels", "py3-none-linux_x86_64")
    assert table.pythons == ("3.12", "3.13", "3.13t", "3.14")
    text = grid(table)
    assert "| torch | driver | Python 3.12 | Python 3.13 | Python 3.13t | Python 3.14 |" in text
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if "(cuda)" in line}
    assert rows["| 2.8.0 (cuda)"].endswith("| — | ✓ 90 (2 skipped) | ✓ 90 (2 skipped) | — |")
    assert rows["| 2.9.1 (cuda)"].endswith("| — | — | — | ✓ 90 (2 skipped) |")  # 2.9.1's cp313t: not in the matrix
    assert "Python 3.13t: CPython's free-threaded build (no GIL)" in legend(table)
    page = site_page(table)
    heads = re.findall(r"<th>Python ([^<]+)</th>", page)
    assert heads == ["3.12", "3.13", "3.13t", "3.14"]
    assert 'id="free-threaded"' in page and "free-threaded build (no GIL)" in page
    # The same table without a free-threaded Python says nothing of it.
    plain = CompatTable.from_dict(
        {**table.to_dict(), "pythons": ["3.12", "3.13", "3.14"], "cells": [c.to_dict() for c in table.cells][::2]}
    )
    assert "free-threaded" not in legend(plain) and 'id="free-threaded"' not in site_page(plain)


def test_a_wheel_that_installs_on_a_free_threaded_python_is_offered(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """py3-none (no CPython API): the 3.13t cell installs its own tested wheel, and torch 2.9.1 on 3.13t (not in the
    matrix) gets the nearest choice's commands, as any other Python not in the matrix does."""
    table = table_of(write_matrix, tmp_path / "wheels", "py3-none-linux_x86_64")
    exact = install_choice(table, "torch2.8-cuda", "3.13t", "drv2", site="https://w.example")
    assert exact.exact and exact.cell == "torch2.8-cuda-cp313t-drv2" and "Refused" not in exact.note
    assert "torch-emu==0.1.0+torch.2.8.drv.2" in exact.index_command
    other = install_choice(table, "torch2.9-cuda", "3.13t", "drv2", site="https://w.example")
    assert not other.exact and other.cell == "torch2.9-cuda-cp314-drv2" and other.index_command
    assert other.note.endswith("Nearest supported choice: torch 2.9.1, Python 3.14, driver 2")


def test_a_free_threaded_python_the_release_wheel_refuses_gets_no_command(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    """An abi3 wheel does not install on a free-threaded build (no limited API there): the choice is refused with the
    wheel, its tags and the interpreter's ABI named, and no command at all (the engine fails such a cell's check)."""
    table = table_of(write_matrix, tmp_path / "wheels", "cp39-abi3-linux_x86_64", failed=("torch2.8-cuda-cp313t-drv2",))
    for release, version in (("torch2.9-cuda", "2.9.1"), ("torch2.8-cuda", "2.8.0")):
        choice = install_choice(table, release, "3.13t", "drv2", site="https://w.example")
        assert choice.cell is None and not choice.exact, choice
        assert (choice.index_command, choice.find_links_command, choice.release_index_command) == ("", "", "")
        wheel = f"torch_emu-0.1.0+torch.{version.rsplit('.', 1)[0]}.drv.2-cp39-abi3-linux_x86_64.whl"
        assert (
            f"Refused: torch {version}'s wheel {wheel} (cp39-abi3-linux_x86_64) does not install on a free-threaded "
            "Python 3.13t (cp313t); pip and uv refuse it there" in choice.note
        ), choice.note
    assert choice.note.startswith("torch 2.8.0, Python 3.13t, driver 2: failed in step smoke. Refused")
    assert choice.note.endswith("Nearest supported choice: torch 2.8.0, Python 3.13, driver 2")
    # The Pythons the abi3 wheel covers are still offered it.
    assert install_choice(table, "torch2.8-cuda", "3.13", "drv2").exact
    offered = install_choice(table, "torch2.9-cuda", "3.13", "drv2")
    assert offered.cell == "torch2.9-cuda-cp314-drv2" and offered.index_command and "Refused" not in offered.note
    # The page embeds the same refusal: the selector shows the reason and no command for that choice.
    page = site_page(table)
    embedded = re.search(r'<script id="choices" type="application/json">(.*?)</script>', page, re.S)
    assert embedded is not None
    refused = json.loads(embedded.group(1))["choices"]["torch2.9-cuda|3.13t|drv2"]
    assert refused["cell"] is None and refused["index_command"] == "" and "Refused" in refused["note"]
