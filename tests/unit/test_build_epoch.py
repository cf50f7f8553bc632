"""The build epoch: keys hold it instead of the tool's source; the code hash ignores layout; the lint check and its
re-confirm and bump."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from fake_wheels import cell_of, cell_result
from packaging.version import Version

import torch_buildmatrix
from torch_buildmatrix.builder import epoch
from torch_buildmatrix.builder.buildcode import ENGINE_MODULES, code_text
from torch_buildmatrix.builder.epoch import CodeHashes, build_code_hash, confirm, confirm_problem, epoch_key, rewritten
from torch_buildmatrix.builder.planning import Inputs
from torch_buildmatrix.builder.records.model import BuildResult
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.runners.base import Runner
from torch_buildmatrix.builder.runners.docker import DockerRunner
from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.vocab import RunnerName, WheelSourceKind

from conftest import WriteMatrix

PACKAGE = Path(torch_buildmatrix.__file__).parent
REPO = Path(__file__).resolve().parents[2]  # the checkout (nox installs the package into its environment)
RELEASE = TorchRelease(Version("2.13.0"), "cpu", WheelSource(WheelSourceKind.FIND_LINKS, "/wheels"), None, ())
CELL = cell_of(RELEASE, "3.11", "2.1")
ROOTS = (*ENGINE_MODULES, *LocalRunner.build_modules, *DockerRunner.build_modules)
# A smaller build code, for the tests of the rules (the whole one takes a second to hash on a loaded machine).
UTIL = tuple(
    f"torch_buildmatrix.util.{p.stem}" for p in sorted((PACKAGE / "util").glob("*.py")) if p.stem != "__init__"
)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the package, to edit."""
    copy = tmp_path / "torch_buildmatrix"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_epoch_one_keys_are_the_source_hashes_records_held_and_later_epochs_a_number() -> None:
    """Records made before epochs hold the tree hash of their runner's build code: epoch 1 is that, per runner."""
    assert epoch_key("local", 1) == epoch.EPOCH_1_KEYS["local"] != epoch_key("docker", 1)
    assert epoch_key("docker", 1) == epoch.EPOCH_1_KEYS["docker"]
    assert epoch_key("local", 2) == epoch_key("docker", 2) == "epoch 2"
    assert epoch_key("local", 3) != epoch_key("local", 2)


def test_keys_hold_the_epoch_and_not_the_code(write_matrix: WriteMatrix) -> None:
    inputs = Inputs(load_matrix(write_matrix()))
    for runner in (LocalRunner, DockerRunner):
        shared = inputs.shared(cast(Runner, object.__new__(runner)))  # only its name is asked
        assert shared["build_code"] == epoch_key(runner.name)
        assert epoch.BUILD_CODE_SHA256 not in shared.values()


def _reformat(path: Path) -> None:
    """Every line laid out anew, comments gone, quotes changed: what any formatter may do, and more."""
    path.write_text("# reformatted\n" + ast.unparse(ast.parse(path.read_text())) + "\n")


def test_reformatting_comments_and_docstrings_leave_the_code_hash(package: Path) -> None:
    before = build_code_hash(UTIL, package)
    for module in sorted((package / "util").glob("*.py")):
        _reformat(module)
    process = package / "util" / "process.py"
    text = process.read_text()
    process.write_text(text.replace('"""', '"""A docstring reworded. ', 1) + "\n# a comment\n")
    assert build_code_hash(UTIL, package) == before


def test_a_change_of_code_changes_the_hash_and_other_modules_do_not(package: Path) -> None:
    before = build_code_hash(UTIL, package)
    (package / "publish" / "table.py").write_text((package / "publish" / "table.py").read_text() + "\nX = 1\n")
    assert build_code_hash(UTIL, package) == before  # not build code
    (package / "util" / "process.py").write_text((package / "util" / "process.py").read_text() + "\nX = 1\n")
    assert build_code_hash(UTIL, package) != before


def test_the_epoch_file_does_not_count_in_its_own_hash(package: Path) -> None:
    before = build_code_hash(("torch_buildmatrix.builder.epoch",), package)
    confirm("f" * 64, bump=True, package_dir=package)
    assert build_code_hash(("torch_buildmatrix.builder.epoch",), package) == before


def test_the_code_text_leaves_positions_and_empty_fields_out() -> None:
    """Records carry the hash and lint compares it: written as ast.dump writes it, Python 3.12 (type_params) and 3.13
    (empty fields left out) would call all code changed. The same text on every supported Python."""
    tree = ast.parse("def f(x):\n    return x\n")
    assert code_text(tree) == (
        "Module(body=[FunctionDef(name='f',args=arguments(args=[arg(arg='x')]),"
        "body=[Return(value=Name(id='x',ctx=Load()))])])"
    )


def test_the_lint_check_fails_until_re_confirmed_or_bumped(package: Path) -> None:
    confirmed = build_code_hash(UTIL, package)
    assert confirm_problem(confirmed, confirmed, 1) == ""
    (package / "util" / "process.py").write_text((package / "util" / "process.py").read_text() + "\nX = 1\n")
    changed = build_code_hash(UTIL, package)
    problem = confirm_problem(changed, confirmed, 1)
    assert changed in problem and confirmed in problem
    assert "nox -s build-epoch -- --bump" in problem and "nox -s build-epoch`" in problem
    assert confirm(changed, bump=False, package_dir=package) == epoch.BUILD_EPOCH  # re-confirmed: same epoch
    text = (package / "builder" / "epoch.py").read_text()
    assert f'BUILD_CODE_SHA256 = "{changed}"' in text and f"BUILD_EPOCH = {epoch.BUILD_EPOCH}\n" in text
    assert confirm(changed, bump=True, package_dir=package) == epoch.BUILD_EPOCH + 1
    assert f"BUILD_EPOCH = {epoch.BUILD_EPOCH + 1}\n" in (package / "builder" / "epoch.py").read_text()


def test_the_lint_script_checks_this_checkout() -> None:
    """`nox -s lint` runs it: it passes exactly when this checkout's build code is the confirmed one."""
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_epoch.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    current = build_code_hash(ROOTS)
    assert run.returncode == (0 if current == epoch.BUILD_CODE_SHA256 else 1), run.stdout
    assert current in run.stdout


def test_rewriting_needs_both_lines() -> None:
    before, after = 'BUILD_EPOCH = 1\nBUILD_CODE_SHA256 = "x"\n', 'BUILD_EPOCH = 4\nBUILD_CODE_SHA256 = "y"\n'
    assert rewritten(before, 4, "y") == after
    with pytest.raises(ValueError, match="BUILD_CODE_SHA256"):
        rewritten("BUILD_EPOCH = 1\n", 2, "y")


def test_code_hashes_are_cached_by_the_package_content(package: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "build-code.json"
    first = CodeHashes(cache, package).of(UTIL)
    assert first == build_code_hash(UTIL, package) and cache.is_file()
    (package / "util" / "process.py").write_text((package / "util" / "process.py").read_text() + "\nX = 1\n")
    assert CodeHashes(cache, package).of(UTIL) == build_code_hash(UTIL, package) != first
    cache.write_text("{damaged")
    assert CodeHashes(cache, package).of(UTIL) == build_code_hash(UTIL, package)


def test_records_carry_the_code_hash_and_older_records_read_without_it(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    cell = cell_result(CELL, "failed", wheels_dir=tmp_path)
    build = BuildResult(CELL.build, "h", {}, RunnerName.LOCAL, python="3.11", build_code="c" * 64)
    cell.build_code = "d" * 64
    store.save(cell)
    store.save_build(build)
    assert (back := store.load(CELL.id)) is not None and back.build_code == "d" * 64
    assert (made := store.load_build(build.id)) is not None and made.build_code == "c" * 64
    cell.build_code = None  # as every record before epochs: the key is absent, and it reads as unknown
    store.save(cell)
    assert '"build_code"' not in (tmp_path / "results" / "cells" / f"{CELL.id}.json").read_text()
    assert (old := store.load(CELL.id)) is not None and old.build_code is None
