"""`buildmatrix init`: starter files from the package's templates, which load, and never over an existing file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from buildmatrix.model.matrix import load_matrix
from buildmatrix.starter import WORKFLOW, project_facts, starter_files

from conftest import run_cli

STARTER = ("matrix.yaml", "noxfile.py", str(WORKFLOW))


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_init_in_an_empty_project_gives_a_matrix_that_loads(tmp_path: Path) -> None:
    project = tmp_path / "my-ext"
    project.mkdir()
    result = run_cli(project, "init", timeout=120)
    assert result.returncode == 0, result.stderr
    assert tree(project) == sorted([".github", ".github/workflows", *STARTER, "tests", "tests/test_installed.py"])
    matrix = load_matrix(project / "matrix.yaml")
    assert matrix.plugin.distribution == "my-ext" and matrix.plugin.source.resolve() == project.resolve()
    assert matrix.plugin.smoke_tests == project / "tests"
    assert matrix.contract.build.version_env == "MY_EXT_VERSION"
    workflow = yaml.safe_load((project / WORKFLOW).read_text())
    assert set(workflow["jobs"]) == {"plan", "build", "cell", "merge", "publish", "deploy"}
    noxfile = (project / "noxfile.py").read_text()
    assert '"buildmatrix[docker]"' in noxfile and "def build_matrix" in noxfile
    compile(noxfile, "noxfile.py", "exec")
    # Every session the workflow runs is one the starter noxfile declares (the workflow is ours, which runs ours).
    import re

    sessions = set(re.findall(r'@nox\.session\(name="([\w-]+)"\)', noxfile))
    sessions |= set(re.findall(r"@nox\.session\n(?:@[^\n]*\n)*def (\w+)\(", noxfile))
    run = set(re.findall(r"nox (?:-R )?-s ([\w-]+)", (project / WORKFLOW).read_text()))
    assert run and run <= sessions, run - sessions


def test_init_reads_the_project_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "fast_ops"\nversion = "1.4.2"\n')
    (tmp_path / "test").mkdir()
    facts = project_facts(tmp_path)
    assert (facts.distribution, facts.version, facts.source, facts.tests) == ("fast_ops", "1.4.2", ".", "test")
    files = starter_files(tmp_path, facts)
    assert set(map(str, files)) == set(STARTER)  # the project has tests: none is written
    text = files[WORKFLOW]
    assert "hashFiles('**', '!wheels/**', '!build/**')" in text and "fast_ops" in text
    sub = project_facts(tmp_path, source="src", tests="src/tests")
    (tmp_path / "patches").mkdir()
    assert "hashFiles('src/**', 'patches/**')" in starter_files(tmp_path, sub)[WORKFLOW]


@pytest.mark.parametrize("existing", STARTER)
def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path, existing: str) -> None:
    (tmp_path / existing).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / existing).write_text("mine\n")
    before = tree(tmp_path)
    result = run_cli(tmp_path, "init", timeout=120)
    assert result.returncode == 2, result.stderr
    assert f"{existing} already exist" in result.stderr and "nothing was written" in result.stderr
    assert tree(tmp_path) == before and (tmp_path / existing).read_text() == "mine\n"


def test_a_bad_distribution_name_is_refused(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "init", "--distribution", "a/b", timeout=120)
    assert result.returncode == 2 and "is not a distribution name" in result.stderr
    assert tree(tmp_path) == []
