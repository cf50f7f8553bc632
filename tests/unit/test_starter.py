"""`torch-buildmatrix init`: starter files from the package's templates, which load, and never over an existing file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.version import Version

from torch_buildmatrix import __version__
from torch_buildmatrix.errors import UserError
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.starter import (
    DEFAULT_REQUIREMENT,
    WORKFLOW,
    project_facts,
    requirement_as_installed,
    starter_files,
    write_starter,
)

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
    assert f'BUILDMATRIX = ["torch-buildmatrix[docker]=={__version__}", "uv"]' in noxfile  # this version, pinned
    assert 'ONLY_BINARY = "torch-buildmatrix"' in noxfile and "def build_matrix" in noxfile  # and a wheel only
    assert noxfile.count('session.install("--only-binary", ONLY_BINARY, *BUILDMATRIX)') == 5
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
    assert (facts.distribution, str(facts.version), str(facts.source), str(facts.tests)) == (
        "fast_ops",
        "1.4.2",
        ".",
        "test",
    )
    files = starter_files(tmp_path, facts)
    assert set(map(str, files)) == set(STARTER)  # the project has tests: none is written
    text = files[WORKFLOW]
    assert "hashFiles('**', '!wheels/**', '!build/**')" in text and "fast_ops" in text
    (tmp_path / "patches").mkdir()
    (tmp_path / "src").mkdir()
    sub = project_facts(tmp_path, source="src", tests="src/tests")
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


GIT = '{"url": "https://github.com/o/r", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}'


@pytest.mark.parametrize(
    ("direct_url", "version", "requirement"),
    [
        (None, __version__, DEFAULT_REQUIREMENT),  # from an index or a wheel: this version, by name
        (GIT, __version__, "torch-buildmatrix[docker] @ git+https://github.com/o/r@abc123"),  # as the guide installs
        (GIT, "0.0.1", DEFAULT_REQUIREMENT),  # the installed one is not the one running
        ('{"url": "file:///home/me/tbm", "dir_info": {"editable": true}}', __version__, DEFAULT_REQUIREMENT),
        ('{"url": "file:///tmp/tbm.whl", "archive_info": {}}', __version__, DEFAULT_REQUIREMENT),  # this machine's
        ("not json", __version__, DEFAULT_REQUIREMENT),
    ],
)
def test_the_default_requirement_never_leaves_the_bare_name_to_an_index(
    direct_url: str | None, version: str, requirement: str
) -> None:
    """Issue 37: an unpinned `torch-buildmatrix[docker]` would take whatever an index offers under that name."""
    assert f"torch-buildmatrix[docker]=={__version__}" == DEFAULT_REQUIREMENT
    assert requirement_as_installed(direct_url, version) == requirement


def test_a_direct_reference_is_built_as_given_and_a_name_is_a_wheel_only(tmp_path: Path) -> None:
    url = "torch-buildmatrix[docker] @ git+https://github.com/o/r@abc123"
    noxfile = starter_files(tmp_path, project_facts(tmp_path, requirement=url))[Path("noxfile.py")]
    assert 'ONLY_BINARY = ":none:"' in noxfile and f'"{url}"' in noxfile
    noxfile = starter_files(tmp_path, project_facts(tmp_path, requirement="torch_buildmatrix==0.2.0"))[
        Path("noxfile.py")
    ]
    assert 'ONLY_BINARY = "torch_buildmatrix"' in noxfile


# ---- init writes only what loads (issue 34) -------------------------------------------------------------------------


def written(root: Path) -> tuple[Matrix, str, str]:
    """The matrix init wrote (through the loader), its noxfile's requirement and its workflow's hashFiles globs."""
    matrix = load_matrix(root / "matrix.yaml")
    noxfile = (root / "noxfile.py").read_text()
    tree_ = ast.parse(noxfile)
    requirement = next(
        ast.literal_eval(node.value)[0]
        for node in tree_.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "BUILDMATRIX"
    )
    workflow = yaml.safe_load((root / WORKFLOW).read_text())
    keys = [
        step["with"]["key"]
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if "hashFiles(" in str(step.get("with", {}).get("key", ""))
    ]
    return matrix, requirement, keys[0]


def expression_args(key: str) -> list[str]:
    """The string literals of the key's hashFiles(...) call, as GitHub's expression parser reads them."""
    inner = re.search(r"hashFiles\((.*)\) \}\}", key)
    assert inner
    return [m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", inner.group(1))]


@pytest.mark.parametrize(
    ("args", "pyproject", "version"),
    [
        (["--version", "1.0"], "", "1.0"),
        (["--version", "2"], "", "2"),
        (["--version", "0.5"], "", "0.5"),
        ([], '[project]\nname = "x"\nversion = "1.0"\n', "1.0"),
        (["--distribution", "3d-ops"], "", "0.1.0"),
    ],
)
def test_versions_yaml_reads_as_numbers_and_digit_names_load(
    tmp_path: Path, args: list[str], pyproject: str, version: str
) -> None:
    if pyproject:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    result = run_cli(tmp_path, "init", *args, timeout=120)
    assert result.returncode == 0, result.stderr
    matrix, _requirement, _key = written(tmp_path)
    assert str(matrix.plugin.version) == version


def test_a_requirement_with_a_marker_writes_a_noxfile_that_parses(tmp_path: Path) -> None:
    requirement = 'pkg; python_version >= "3.11"'
    result = run_cli(tmp_path, "init", "--requirement", requirement, timeout=120)
    assert result.returncode == 0, result.stderr
    assert written(tmp_path)[1] == requirement


def test_a_source_with_a_quote_is_quoted_in_the_workflow_expression(tmp_path: Path) -> None:
    (tmp_path / "it's").mkdir()
    result = run_cli(tmp_path, "init", "--source", "it's", timeout=120)
    assert result.returncode == 0, result.stderr
    matrix, _requirement, key = written(tmp_path)
    assert expression_args(key) == ["it's/**"] and matrix.plugin.source == tmp_path / "it's"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--version", "1.0.x"], "not a PEP 440 version"),
        (["--version", "1.0+local"], "local label"),
        (["--requirement=-e ."], "not a PEP 508 requirement"),
        (["--requirement", '", "os"]; import os; os.system("x"); ["'], "not a PEP 508 requirement"),
        (["--source", "x') }}${{ secrets.TOKEN"], "allowed: a relative path"),
        (["--source", "src\n  run: evil"], "allowed: a relative path"),
        (["--source", "../elsewhere"], "outside the project"),
        (["--source", "missing"], "is not a directory"),
        (["--tests", "tests#x"], "allowed: a relative path"),
        (["--distribution=x-"], "not a distribution name"),
    ],
)
def test_what_init_cannot_represent_is_refused_before_anything_is_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    (tmp_path.parent / "elsewhere").mkdir(exist_ok=True)
    result = run_cli(tmp_path, "init", *args, timeout=120)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "nothing was written" in result.stderr
    assert tree(tmp_path) == ["keep.txt"]


path_part = st.from_regex(r"[A-Za-z0-9._'-]([A-Za-z0-9._' -]{0,8}[A-Za-z0-9._'-])?", fullmatch=True).filter(
    lambda p: p not in (".", "..")
)
requirements = st.sampled_from(
    [
        "torch-buildmatrix[docker]",
        'pkg; python_version >= "3.11"',
        "torch-buildmatrix @ https://example.org/b.whl",
        "a.b-c_d[x,y]>=1.0,<2 ; sys_platform == 'linux' and extra == \"t\"",
    ]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,12}[A-Za-z0-9])?", fullmatch=True),
    version=st.from_regex(
        r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}((a|b|rc)[0-9]{1,2})?(\.post[0-9])?(\.dev[0-9])?", fullmatch=True
    ),
    source=path_part,
    requirement=requirements,
)
def test_whatever_init_accepts_it_writes_files_that_load_as_given(
    tmp_path_factory: pytest.TempPathFactory, name: str, version: str, source: str, requirement: str
) -> None:
    root = tmp_path_factory.mktemp("init")
    (root / source).mkdir()
    facts = project_facts(root, distribution=name, version=version, source=source, requirement=requirement)
    files = starter_files(root, facts)
    write_starter(root, files, facts)
    matrix, written_requirement, key = written(root)
    assert matrix.plugin.distribution == name and matrix.plugin.version == Version(version)
    assert matrix.plugin.source == root / source and Requirement(written_requirement) == Requirement(requirement)
    assert expression_args(key) == [f"{source}/**"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(max_size=30), field=st.sampled_from(["distribution", "version", "source", "tests", "requirement"]))
def test_a_hostile_value_is_refused_or_written_so_that_it_loads(
    tmp_path_factory: pytest.TempPathFactory, value: str, field: str
) -> None:
    root = tmp_path_factory.mktemp("init")
    try:
        facts = project_facts(root, **{field: value})
        files = starter_files(root, facts)
        write_starter(root, files, facts)
    except UserError as exc:
        assert "nothing was written" in str(exc)
        assert list(root.iterdir()) == []
        return
    matrix, requirement, _key = written(root)
    assert requirement == str(facts.requirement) and matrix.plugin.distribution == facts.distribution
