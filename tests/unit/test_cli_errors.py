"""The error contract end to end: `python -m torch_buildmatrix` as a subprocess exits with the documented code, prints
one message naming what is wrong, no traceback, and leaves nothing behind (docs/reference/exit-codes.md)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from registry_server import Answers

from torch_buildmatrix.builder.workspace import RunLock, Workspace
from torch_buildmatrix.errors import (
    EngineUnavailable,
    MatrixError,
    RegistryError,
    RunLocked,
    UnsupportedArchitecture,
    UserError,
)

from conftest import REPO, TINY_CONTRACT, copy_project, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
# A tiny project whose torch is an empty file in a local find-links directory: commands get as far as running a cell
# without the network or a real torch.
TINY = """\
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: {find-links: WHEELHOUSE}}
"""
INDEXED = """\
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.4.1", variant: cuda, wheels: {index: "INDEX"}}
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "wheelhouse").mkdir()
    (root / "wheelhouse" / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (root / "matrix.yaml").write_text(TINY.replace("WHEELHOUSE", str(root / "wheelhouse")) + TINY_CONTRACT)
    return root


@pytest.fixture
def only_our_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This machine's pip find-links would be a torch source for `outdated` too; these tests choose theirs."""
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def assert_one_error(result, code: int, message: str) -> None:  # type: ignore[no-untyped-def]
    out = result.stdout + result.stderr
    assert result.returncode == code, out
    assert message in out, out
    assert "Traceback" not in out and "ValueError" not in out and "KeyError" not in out, out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "--jobs", "0"], "argument --jobs/-j: expected an integer >= 1, got 0"),
        (["build", "-j", "many"], "argument --jobs/-j: expected an integer >= 1, got 'many'"),
        (["build", "--retries", "-1"], "argument --retries: expected an integer >= 0, got -1"),
        (["build", "--sdk", "9"], "the selection matches no cell of the matrix"),
        (["build", "--runner", "cloud"], "argument --runner: invalid choice: 'cloud' (choose from 'auto', 'local',"),
        (["patches", "edit"], "`patches edit` needs a torch release, e.g. `patches edit 2.4`"),
        (["build", "--torch", "9.9"], "the selection matches no cell of the matrix"),
    ],
)
def test_bad_arguments_are_usage_errors_and_touch_nothing(tiny: Path, args: list[str], message: str) -> None:
    before = files_under(tiny)
    result = run_cli(tiny, *args, timeout=120)
    assert_one_error(result, UserError.exit_code, message)
    assert not {p for p in files_under(tiny) - before if not p.startswith("build/cache/")}  # nothing built, no record
    assert not (tiny / "wheels").exists()


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("torch-files-not-a-list.json", "a PEP 691 answer without a list of files"),
        ("torch-file-without-url.json", "files[0] of the PEP 691 answer is not a file with a filename and a url"),
    ],
)
def test_a_registry_answering_nonsense_is_a_located_error_and_is_not_cached(
    tmp_path: Path, answers: Answers, answer: str, problem: str
) -> None:
    """A torch source whose index answers something that is not a project page: matrix.yaml's entry is named."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(INDEXED.replace("INDEX", answers.url.rstrip("/")))
    answers.use(answer)
    result = run_cli(root, "matrix", timeout=120)
    assert_one_error(result, MatrixError.exit_code, problem)
    assert re.search(
        r"matrix\.yaml:7: torch\[0\]\.wheels: cannot read http://127\.0\.0\.1:\d+/simple/torch/", result.stderr
    )
    assert not list((root / "build" / "cache" / "registry").glob("*.json"))  # the nonsense is not kept as an answer


@pytest.mark.usefixtures("only_our_sources")
def test_outdated_against_a_registry_answering_nonsense_writes_nothing(tiny: Path, answers: Answers) -> None:
    answers.use("torch-file-without-url.json")
    before = (tiny / "matrix.yaml").read_bytes()
    result = run_cli(tiny, "outdated", "--apply", "--index-url", answers.url, timeout=120)
    assert_one_error(result, RegistryError.exit_code, "files[0] of the PEP 691 answer is not a file")
    assert (tiny / "matrix.yaml").read_bytes() == before
    assert not (tiny / "build" / "outdated").exists()
    assert not list((tiny / "build" / "cache" / "registry").glob("*.json"))


@pytest.mark.usefixtures("only_our_sources")
def test_a_report_path_that_cannot_exist_is_named_not_a_traceback(tiny: Path, answers: Answers) -> None:
    before = (tiny / "matrix.yaml").read_bytes()
    result = run_cli(tiny, "outdated", "--index-url", answers.url, "--report", "/proc/none/report.md", timeout=120)
    assert_one_error(result, UserError.exit_code, "/proc/none: No such file or directory")
    assert (tiny / "matrix.yaml").read_bytes() == before and not (tiny / "build" / "outdated").exists()


def test_a_second_run_on_the_same_workspace_is_refused(tiny: Path) -> None:
    with RunLock(Workspace.for_root(tiny)):
        result = run_cli(tiny, "build", "--runner", "local", timeout=120)
    assert_one_error(result, RunLocked.exit_code, "another build-matrix run (pid")
    assert not (tiny / "wheels" / "results").exists() and not (tiny / "build" / "cells").exists()


def test_docker_runner_without_an_engine_is_refused_before_building(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'dead.sock'}")
    result = run_cli(tiny, "build", "--runner", "docker", timeout=120)
    assert_one_error(result, EngineUnavailable.exit_code, "no Docker engine answers `docker info`")
    assert not (tiny / "wheels").exists() and not (tiny / "build" / "cells").exists()


def test_docker_runner_on_an_architecture_no_image_serves_is_refused(tiny: Path, tmp_path: Path) -> None:
    """On a riscv64 machine (platform.machine() says so, through a sitecustomize; its torch wheel an empty file),
    --runner docker exits 13, never emulating x86_64: before any engine is asked (DOCKER_HOST is dead), nothing
    written."""
    import os

    (tiny / "wheelhouse" / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_riscv64.whl").write_bytes(b"")

    site = tmp_path / "riscv"
    site.mkdir()
    (site / "sitecustomize.py").write_text('import platform\nplatform.machine = lambda: "riscv64"\n')
    path = os.pathsep.join(filter(None, [str(site), str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "DOCKER_HOST": f"unix://{tmp_path / 'dead.sock'}"}
    result = run_cli(tiny, "build", "--runner", "docker", timeout=120, env=env)
    assert_one_error(result, UnsupportedArchitecture.exit_code, "this machine is riscv64")
    assert "builder images serve aarch64, x86_64" in result.stderr and "--runner local" in result.stderr
    assert not (tiny / "wheels").exists() and not (tiny / "build" / "cells").exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            "readme",
            "README.md: README needs exactly one <!-- compat-table:start --> ... <!-- compat-table:end --> pair",
        ),
        ("table", "docs/compatibility.json: unreadable (JSONDecodeError"),
    ],
)
def test_compat_check_names_the_doc_it_cannot_read(tmp_path: Path, damage: str, message: str) -> None:
    """A README without its markers, or a damaged docs/compatibility.json: one line naming the file, nothing
    rewritten."""
    root = copy_project(tmp_path / "project")
    if damage == "readme":
        readme = root / "README.md"
        readme.write_text(readme.read_text().replace("<!-- compat-table:start -->", ""))
    else:
        (root / "docs" / "compatibility.json").write_text('{"schema_version": 1, "cells": [')
    docs = [p for p in sorted((root / "docs").rglob("*")) if p.is_file()]
    before = {p: p.read_bytes() for p in (root / "README.md", *docs)}
    result = run_cli(root, "compat-table", "--check", timeout=120)
    assert_one_error(result, UserError.exit_code, message)
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.usefixtures("only_our_sources")
def test_outdated_behind_a_captive_portal_is_an_error_not_up_to_date(tiny: Path) -> None:
    """A portal answers 200 with its login page for every URL: never 'up to date', nothing cached or written."""
    from registry_server import serving

    before = (tiny / "matrix.yaml").read_bytes()
    portal = b"<html><body><a href='/login'>Sign in to use this network</a></body></html>"
    with serving(portal, "text/html") as seen:
        result = run_cli(tiny, "outdated", "--apply", "--index-url", seen[0] + "simple/", timeout=120)
    assert_one_error(result, RegistryError.exit_code, "answered a page that lists no wheel for torch")
    assert "up to date" not in result.stdout and seen[1:] == ["/simple/torch/"]
    assert (tiny / "matrix.yaml").read_bytes() == before and not (tiny / "build" / "outdated").exists()
    assert not list((tiny / "build" / "cache" / "registry").glob("*.json"))
