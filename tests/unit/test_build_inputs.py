"""What a build's and a cell's keys hold of the project's files: the smoke suite only in the cells', and nothing the
tool writes into a project that is its own source (`source: .`)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from torch_buildmatrix.builder.planning import Inputs, project_tree, without_block
from torch_buildmatrix.builder.runners.base import Runner
from torch_buildmatrix.builder.runners.docker import DockerRunner
from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.model.contract import README_END, README_START
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix

from conftest import VALID, WriteMatrix

LOCAL = cast(Runner, object.__new__(LocalRunner))  # only its name is asked
DOCKER = cast(Runner, object.__new__(DockerRunner))


def keys(matrix_path: Path) -> tuple[dict[str, str], str]:
    """The build's shared inputs and the cells' smoke-suite hash, computed afresh (nothing cached across calls)."""
    inputs = Inputs(load_matrix(matrix_path))
    return inputs.shared(LOCAL), inputs.smoke_tree()


def test_editing_a_smoke_test_changes_the_cells_key_and_not_the_builds(write_matrix: WriteMatrix) -> None:
    path = write_matrix()
    (path.parent / "plugin" / "emu.cpp").write_text("int x;\n")
    build_before, smoke_before = keys(path)
    (path.parent / "plugin" / "tests" / "test_smoke.py").write_text("def test_imports():\n    assert True\n")
    build_after, smoke_after = keys(path)
    assert build_after == build_before
    assert smoke_after != smoke_before
    (path.parent / "plugin" / "emu.cpp").write_text("int y;\n")
    assert keys(path)[0]["plugin_tree"] != build_before["plugin_tree"]
    assert keys(path)[1] == smoke_after


def test_the_sources_are_hashed_once_for_every_runner(write_matrix: WriteMatrix) -> None:
    path = write_matrix()
    inputs = Inputs(load_matrix(path))
    local = inputs.shared(LOCAL)
    (path.parent / "plugin" / "emu.cpp").write_text("int edited;\n")  # after the first runner's: a run sees none
    docker = inputs.shared(DOCKER)
    assert docker["plugin_tree"] == local["plugin_tree"] != keys(path)[0]["plugin_tree"]
    assert docker["build_code"] != local["build_code"]  # the epoch key stays per runner


def own_source_project(write_matrix: WriteMatrix) -> Matrix:
    """A project that is its own source: plugin.source '.', its README with the table block, docs/ beside it."""
    path = write_matrix(VALID.replace("source: plugin\n", "source: .\n", 1))
    root = path.parent
    (root / "setup.py").write_text("print('build')\n")
    (root / "README.md").write_text(f"# Project\n\n{README_START}\nold table\n{README_END}\n\nUsage.\n")
    (root / "docs").mkdir()
    return load_matrix(path)


def test_what_the_tool_writes_into_an_own_source_project_is_no_build_input(write_matrix: WriteMatrix) -> None:
    matrix = own_source_project(write_matrix)
    root = matrix.root
    before = project_tree(matrix)
    assert set(before) == {"plugin_tree", "readme"}
    (root / "docs" / "compatibility.md").write_text("| torch | 3.11 |\n")
    (root / "docs" / "compatibility.json").write_text("{}\n")
    readme = (root / "README.md").read_text()
    (root / "README.md").write_text(readme.replace("old table", "new table | ✓ |"))
    (root / "patches" / "pre-2.7" / "0001-shim.patch").write_text("--- a\n+++ b\n")  # keyed per release
    (root / "plugin" / "tests" / "test_more.py").write_text("def test_more():\n    pass\n")  # keyed per cell
    (root / "wheels" / "results").mkdir(parents=True)
    (root / "wheels" / "results" / "cell.json").write_text("{}\n")
    assert project_tree(matrix) == before


def test_an_own_source_projects_files_and_readme_text_stay_build_inputs(write_matrix: WriteMatrix) -> None:
    matrix = own_source_project(write_matrix)
    root = matrix.root
    before = project_tree(matrix)
    (root / "README.md").write_text((root / "README.md").read_text().replace("Usage.", "Usage, revised."))
    after_readme = project_tree(matrix)
    assert after_readme["readme"] != before["readme"]
    assert after_readme["plugin_tree"] == before["plugin_tree"]
    (root / "docs" / "guide.md").write_text("How to.\n")  # docs/ holds more than the tool's output
    assert project_tree(matrix)["plugin_tree"] != before["plugin_tree"]


def test_a_readme_block_is_left_out_only_between_a_pair_of_markers() -> None:
    assert without_block(f"a\n{README_START}\nx\n{README_END}\nb\n") == "a\n\nb\n"
    assert without_block(f"a\n{README_END}\nx\n{README_START}\n") == f"a\n{README_END}\nx\n{README_START}\n"
    assert without_block("no markers\n") == "no markers\n"


def test_a_project_with_its_source_in_a_folder_has_no_readme_input(write_matrix: WriteMatrix) -> None:
    path = write_matrix()
    (path.parent / "README.md").write_text(f"{README_START}\n{README_END}\n")
    assert set(project_tree(load_matrix(path))) == {"plugin_tree"}
