"""What counts as a cell input: source trees by content, and the build code (engine and runner, with their imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import torch_buildmatrix
from torch_buildmatrix.builder.buildcode import ENGINE_MODULES, build_code
from torch_buildmatrix.builder.runners.base import Runner
from torch_buildmatrix.builder.runners.docker import DockerRunner
from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.util.fingerprint import tree_hash
from torch_buildmatrix.vocab import RunnerName

PACKAGE = Path(torch_buildmatrix.__file__).parent


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
    """Written here again, not taken from buildcode.py: the test checks that module's answer independently."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch_buildmatrix"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _module_name(rel: str) -> str:
    return "torch_buildmatrix." + rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _build_code(runner: type[Runner]) -> frozenset[str]:
    return build_code((*ENGINE_MODULES, *runner.build_modules))


RUNNERS: dict[RunnerName, type[Runner]] = {RunnerName.LOCAL: LocalRunner, RunnerName.DOCKER: DockerRunner}


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_build_code_of_a_runner_never_imports_what_its_hash_leaves_out(runner: RunnerName) -> None:
    """Sound only while nothing that runs during the runner's builds reaches a module outside its build code:
    every package module a build-code file imports (anywhere in it), and every package on the way, is build code."""
    counted = _build_code(RUNNERS[runner])
    left_out = {
        _module_name(p.relative_to(PACKAGE).as_posix())
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).as_posix() not in counted
    }
    for rel in sorted(counted):
        assert (PACKAGE / rel).is_file(), f"{rel} is counted as build code but is not in {PACKAGE}"
        reached = {m for m in _imported_modules(PACKAGE / rel) for p in _parents(m) if p in left_out}
        assert not reached, f"{rel} is build code of the {runner} runner but imports {sorted(reached)}"


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_the_runners_declared_modules_and_the_engine_are_build_code(runner: RunnerName) -> None:
    counted = _build_code(RUNNERS[runner])
    for module in (*ENGINE_MODULES, *RUNNERS[runner].build_modules):
        path = PACKAGE / (module.removeprefix("torch_buildmatrix.").replace(".", "/") + ".py")
        assert path.relative_to(PACKAGE).as_posix() in counted
    # What the engine does for every runner: the wheel check, the smoke verdict, the records.
    assert {"builder/wheelcheck.py", "builder/smoke.py", "builder/records/model.py", "util/process.py"} <= counted


def test_runner_modules_count_for_their_own_runner_only() -> None:
    local, docker = _build_code(LocalRunner), _build_code(DockerRunner)
    assert "builder/runners/local.py" in local and "builder/runners/local.py" not in docker
    assert "builder/runners/docker.py" in docker and "builder/runners/docker.py" not in local
    assert {"docker/oci.py", "docker/images.py"} <= docker - local


def test_reporting_publishing_and_the_cli_are_not_build_code() -> None:
    """Editing them cannot change a wheel or a smoke verdict, so it must not rebuild every cell."""
    never = {
        "cli/app.py",
        "cli/cells.py",
        "builder/buildrun.py",
        "builder/selection.py",
        "builder/update.py",
        "progress.py",
        "report_matrix.py",
        "builder/runners/select.py",
        "builder/probe.py",
        "builder/patchtool.py",
        "docker/engine.py",
        "publish/table.py",
        "publish/site.py",
        "publish/index.py",
    }
    for runner in RUNNERS.values():
        assert not never & _build_code(runner)


def test_build_code_follows_imports_inside_functions(tmp_path: Path) -> None:
    """A function-level import runs during a build as surely as a top-level one."""
    package = tmp_path / "torch_buildmatrix"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "root.py").write_text("def f():\n    from torch_buildmatrix.sub import late\n    return late\n")
    (package / "sub" / "late.py").write_text("import torch_buildmatrix.sub.later\n")
    (package / "sub" / "later.py").write_text("X = 1\n")
    (package / "unrelated.py").write_text("X = 2\n")
    assert build_code(["torch_buildmatrix.root"], package) == {
        "__init__.py",
        "root.py",
        "sub/__init__.py",
        "sub/late.py",
        "sub/later.py",
    }


def test_editing_build_code_changes_the_hash_and_other_code_does_not(tmp_path: Path) -> None:
    package = tmp_path / "torch_buildmatrix"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "engine.py").write_text("from torch_buildmatrix import steps\n")
    (package / "steps.py").write_text("X = 1\n")
    (package / "report.py").write_text("Y = 1\n")
    counted = build_code(["torch_buildmatrix.engine"], package)
    before = tree_hash(package, include=counted)
    (package / "report.py").write_text("Y = 2\n")
    assert tree_hash(package, include=build_code(["torch_buildmatrix.engine"], package)) == before
    (package / "steps.py").write_text("X = 2\n")
    assert tree_hash(package, include=build_code(["torch_buildmatrix.engine"], package)) != before


def test_file_hashes_hash_each_file_once_until_it_changes(tmp_path: Path) -> None:
    """A build's wheel is checked for the build and each of its cells in one run: hashed once, unless rewritten."""
    from torch_buildmatrix.util.fingerprint import FileHashes, file_sha256

    wheel = tmp_path / "a.whl"
    wheel.write_bytes(b"one")
    hashes = FileHashes()
    first = hashes.of(wheel)
    assert first == file_sha256(wheel)
    wheel.write_bytes(b"other bytes")
    assert hashes.of(wheel) == file_sha256(wheel) != first
    copy = tmp_path / "b.whl"
    copy.write_bytes(b"other bytes")
    assert hashes.of(copy) == hashes.of(wheel)
