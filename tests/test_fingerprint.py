"""What counts as a cell input: source trees by content, and the build code without the reporting modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import buildmatrix
from buildmatrix.builder.engine import NOT_BUILD_CODE, RUNNER_MODULES, build_code_exclusions
from buildmatrix.util.fingerprint import tree_hash

PACKAGE = Path(buildmatrix.__file__).parent


def test_tree_hash_follows_content_and_names_but_not_build_outputs(tmp_path: Path) -> None:
    (tmp_path / "a.cpp").write_text("int a;")
    (tmp_path / "build").mkdir()
    first = tree_hash(tmp_path)
    (tmp_path / "build" / "a.o").write_bytes(b"\0")
    assert tree_hash(tmp_path) == first
    (tmp_path / "a.cpp").write_text("int b;")
    assert tree_hash(tmp_path) != first
    changed = tree_hash(tmp_path)
    (tmp_path / "a.cpp").rename(tmp_path / "b.cpp")
    assert tree_hash(tmp_path) != changed


def test_excluded_files_do_not_count(tmp_path: Path) -> None:
    (tmp_path / "build.py").write_text("x = 1")
    (tmp_path / "report.py").write_text("y = 1")
    before = tree_hash(tmp_path, exclude=frozenset({"report.py"}))
    (tmp_path / "report.py").write_text("y = 2")
    assert tree_hash(tmp_path, exclude=frozenset({"report.py"})) == before
    (tmp_path / "build.py").write_text("x = 2")
    assert tree_hash(tmp_path, exclude=frozenset({"report.py"})) != before


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("buildmatrix"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _module_name(rel: str) -> str:
    return "buildmatrix." + rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def test_every_excluded_module_exists() -> None:
    for name in NOT_BUILD_CODE.union(*RUNNER_MODULES.values()):
        assert (PACKAGE / name).is_file(), f"{name} is named in engine.py but is not in {PACKAGE}"


@pytest.mark.parametrize("runner", sorted(RUNNER_MODULES))
def test_build_code_of_a_runner_never_imports_what_its_hash_leaves_out(runner: str) -> None:
    """The exclusion is only sound while nothing that runs during the runner's builds reaches those modules."""
    left_out = build_code_exclusions(runner)
    excluded = {_module_name(name) for name in left_out}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in left_out:
            continue
        reached = _imported_modules(path) & excluded
        assert not reached, f"{rel} is build code of the {runner} runner but imports {sorted(reached)}"


def test_runner_modules_count_for_their_own_runner_only() -> None:
    assert "builder/runners/local.py" not in build_code_exclusions("local")
    assert "builder/runners/local.py" in build_code_exclusions("docker")
    assert "builder/runners/docker.py" in build_code_exclusions("local")
    assert "builder/runners/docker.py" not in build_code_exclusions("docker")
