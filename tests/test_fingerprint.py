"""What counts as a cell input: source trees by content, and the build code without the reporting modules."""

from __future__ import annotations

import ast
from pathlib import Path

import buildmatrix
from buildmatrix.engine import NOT_BUILD_CODE
from buildmatrix.fingerprint import tree_hash

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


def test_modules_left_out_of_the_build_code_exist_and_no_build_module_imports_them() -> None:
    """The exclusion is only sound while nothing that runs during a build reaches those modules."""
    for name in NOT_BUILD_CODE:
        assert (PACKAGE / name).is_file(), f"NOT_BUILD_CODE names {name}, which is not in {PACKAGE}"
    excluded = {"buildmatrix." + name.removesuffix(".py") for name in NOT_BUILD_CODE}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in NOT_BUILD_CODE:
            continue
        reached = _imported_modules(path) & excluded
        assert not reached, f"{rel} is build code but imports {sorted(reached)}; take them out of NOT_BUILD_CODE"
