"""The Docker runner end to end: selection without an engine, the tiny project and the real plugin in containers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.runners.select import runner_for_cell
from torch_buildmatrix.docker import oci
from torch_buildmatrix.errors import EngineUnavailable
from torch_buildmatrix.model.cells import make_cell
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName

from conftest import TINY_CONTRACT, copy_project, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
REPO = Path(__file__).parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
TORCH_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
MATRIX = """\
schema-version: 2
plugin: {{distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{{torch_minor}}.drv.{{sdk_major}}"}}
sdk: {{kind: wheel, name: driver, id: "drv{{sdk_major}}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["1.4", "2.1"]}}
python: {pythons}
torch:
  - {{version: "2.13.0", variant: cpu, wheels: {wheels}}}
images:
{images}
runner: docker
"""
BOOKWORM = '  bookworm: {base: "debootstrap:bookworm", python: ["3.11"]}'
needs_engine = pytest.mark.skipif(
    not oci.server_version(), reason="no Docker engine answers `docker info` (start one: nox -s docker-engine)"
)


def tiny_project(root: Path, pythons: str = '["3.11"]', wheels: str = "pip-find-links", images: str = BOOKWORM) -> Path:
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX.format(pythons=pythons, wheels=wheels, images=images) + TINY_CONTRACT)
    return root


def build(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(root / "matrix.yaml"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=root,
        env=env or ENV,
    )


def record(root: Path, cell: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "wheels" / "results" / "cells" / f"{cell}.json").read_text())
    return data


# ---- no engine ---------------------------------------------------------------


@pytest.mark.integration
def test_missing_engine_docker_refused_auto_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"unix://{tmp_path / 'dead.sock'}"
    monkeypatch.setenv("DOCKER_HOST", dead)
    matrix = load_matrix(tiny_project(tmp_path / "plan") / "matrix.yaml")
    assert matrix.sdk is not None
    cell = make_cell(matrix, matrix.torch[0], Python.parse("3.11"), matrix.sdk.versions[-1])
    with pytest.raises(EngineUnavailable, match="no Docker engine answers `docker info`"):
        runner_for_cell(cell, matrix, RunnerName.DOCKER)
    runner, why = runner_for_cell(cell, matrix, RunnerName.AUTO)  # this machine's 3.11 builds it, no engine asked
    assert runner.name == "local" and why.startswith("local: ")

    root = tiny_project(tmp_path / "project")
    result = build(root, env={**ENV, "DOCKER_HOST": dead})
    assert result.returncode == EngineUnavailable.exit_code, result.stdout + result.stderr
    assert (
        "--runner docker, but no Docker engine answers" in result.stderr
        and "-m torch_buildmatrix engine" in " ".join(result.stderr.split())
    )
    assert "Traceback" not in result.stderr


# ---- real containers ---------------------------------------------------------


@pytest.mark.docker
@pytest.mark.integration
@needs_engine
def test_tiny_cells_in_docker_broken_cell_alone_then_noop(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "project")
    (root / "plugin" / "BREAK_DRIVER_1").write_text("")
    first = build(root)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "docker runner (asked for" in first.stdout
    broken, fine = record(root, "torch2.13-cpu-cp311-drv1"), record(root, "torch2.13-cpu-cp311-drv2")
    assert broken["status"] == "failed" and broken["failed_step"] == "build", broken
    assert "broken on purpose" in (root / "wheels" / broken["log"]).read_text()
    assert fine["status"] == "passed", fine
    assert fine["runner"] == "docker"
    # The same steps as the local runner's, each recorded as it ran: the image is the Docker runner's interpreter.
    assert [s["name"] for s in fine["steps"]] == ["source", "check", "image", "smoke-env", "smoke"]
    builds = {
        data["status"]: data
        for data in (json.loads(p.read_text()) for p in (root / "wheels" / "results" / "builds").glob("*.json"))
    }
    made, failed = builds["passed"], builds["failed"]
    assert [s["name"] for s in made["steps"]] == ["source", "image", "sdk", "build-env", "build", "check", "publish"]
    assert [(s["name"], s["status"]) for s in failed["steps"]][-2:] == [("build-env", "passed"), ("build", "failed")]
    assert made["torch_build"]["image"] == fine["torch_build"]["image"]
    assert fine["smoke"] == {"passed": 3, "failed": 0, "skipped": 0, "errors": 0}
    assert fine["features"] == {"tiny": "passed"}
    assert fine["torch_build"]["version"] == "2.13.0+cpu" and fine["torch_build"]["image"].startswith(
        "buildmatrix-builder:bookworm-"
    )
    # auditwheel gave it the platform tag glibc needs, not linux_x86_64.
    assert "manylinux" in fine["wheel"]["filename"] and (root / "wheels" / fine["wheel"]["path"]).is_file()
    assert (root / "wheels" / "driver" / "tiny_driver-2.1.0+tiny-py3-none-any.whl").is_file()

    again = build(root)
    assert again.stdout.count("up-to-date") == 4, again.stdout  # two builds, two cells


@pytest.mark.docker
@pytest.mark.integration
@needs_engine
def test_failing_smoke_suite_in_docker_keeps_counts(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "project")
    (root / "plugin" / "tests" / "FAIL_SMOKE").write_text("")
    result = build(root, "--sdk", "2")
    assert result.returncode == 1
    failed = record(root, "torch2.13-cpu-cp311-drv2")
    assert failed["failed_step"] == "smoke" and failed["smoke"]["failed"] == 1 and failed["smoke"]["passed"] == 2, (
        failed
    )
    builds = [json.loads(p.read_text()) for p in (root / "wheels" / "results" / "builds").glob("*.json")]
    assert [b["status"] for b in builds] == ["passed"], builds
    assert failed["wheel"] == builds[0]["wheel"]  # the wheel it tested, and failed


@pytest.mark.docker
@pytest.mark.integration
@needs_engine
def test_a_build_environment_that_cannot_be_made_names_its_step(tmp_path: Path) -> None:
    """A build requirement no index has: the build fails in `build-env`, recorded as that step ended (not guessed from
    a tool's output), its cell fails with it, and nothing is published."""
    root = tiny_project(tmp_path / "project")
    matrix = root / "matrix.yaml"
    text = matrix.read_text()
    assert "build: {version-file: PLUGIN_VERSION," in text
    matrix.write_text(text.replace("build: {", 'build: {requires: ["tiny-missing-requirement==1.0"], ', 1))
    result = build(root, "--sdk", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    [made] = [json.loads(p.read_text()) for p in (root / "wheels" / "results" / "builds").glob("*.json")]
    assert [(s["name"], s["status"]) for s in made["steps"]] == [
        ("source", "passed"),
        ("image", "passed"),
        ("sdk", "passed"),
        ("build-env", "failed"),
    ]
    assert made["failed_step"] == "build-env" and made["wheel"] is None
    assert "tiny-missing-requirement" in (root / "wheels" / made["log"]).read_text()
    cell = record(root, "torch2.13-cpu-cp311-drv2")
    assert cell["status"] == "failed" and cell["failed_step"] == "build-env" and cell["wheel"] is None, cell
    assert not list((root / "wheels").glob("torch2.13/*.whl"))


@pytest.mark.docker
@pytest.mark.integration
@needs_engine
def test_a_stopped_container_build_is_recorded_in_its_step_and_its_container_removed(tmp_path: Path) -> None:
    """SIGTERM while the build environment is being made in its container: the build is recorded as interrupted in
    `build-env`, its cell with it, and the container the killed docker client left running is removed."""
    import signal
    import time

    root = tiny_project(tmp_path / "project")
    log = root / "wheels" / "logs" / "builds" / "torch2.13-cpu-cp311-drv2.log"
    run = subprocess.Popen(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(root / "matrix.yaml"), "--sdk", "2"],
        cwd=root,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 600
    while not (log.is_file() and "cell.py build-env" in log.read_text(errors="replace")):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
        time.sleep(0.5)
    time.sleep(2)  # the container is up, installing torch
    run.send_signal(signal.SIGTERM)
    out = run.communicate(timeout=300)[0]
    assert run.returncode == 128 + signal.SIGTERM, out
    [made] = [json.loads(p.read_text()) for p in (root / "wheels" / "results" / "builds").glob("*.json")]
    assert made["status"] == "interrupted" and made["failed_step"] == "build-env", made
    assert [s["name"] for s in made["steps"]] == ["source", "image", "sdk", "build-env"]
    cell = record(root, "torch2.13-cpu-cp311-drv2")
    assert cell["status"] == "interrupted" and cell["failed_step"] == "build-env", cell
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={oci.OWNER_LABEL}={(root / 'build' / 'matrix').resolve()}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert left.stdout.split() == [], left.stdout


@pytest.mark.docker
@pytest.mark.integration
@needs_engine
def test_image_failures_fail_their_cells_only(tmp_path: Path) -> None:
    # Fake cp312/cp313 torch wheels give the matrix cells for Pythons whose images cannot be made;
    # only file names matter until a cell's image exists.
    links = tmp_path / "find-links"
    links.mkdir()
    real = Path("/opt/wheels") / TORCH_WHEEL
    if not real.is_file():
        pytest.skip(f"needs {real}")
    try:
        os.link(real, links / TORCH_WHEEL)
    except OSError:
        shutil.copy2(real, links / TORCH_WHEEL)
    for tag in ("cp312", "cp313"):
        (links / f"torch-2.13.0+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl").write_bytes(b"")
    images = "\n".join(
        [
            BOOKWORM,
            '  nosuite: {base: "debootstrap:no-such-suite", python: ["3.12"]}',
            '  wrongpython: {base: "debootstrap:bookworm", python: ["3.13"]}',
        ]
    )
    root = tiny_project(
        tmp_path / "project", pythons='["3.11", "3.12", "3.13"]', wheels=f"{{find-links: {links}}}", images=images
    )
    result = build(root, "--sdk", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert record(root, "torch2.13-cpu-cp311-drv2")["status"] == "passed"
    no_suite = record(root, "torch2.13-cpu-cp312-drv2")
    assert no_suite["failed_step"] == "image" and "debootstrap of 'no-such-suite'" in no_suite["error"], no_suite
    wrong = record(root, "torch2.13-cpu-cp313-drv2")
    assert wrong["failed_step"] == "image" and "cannot serve Python 3.13" in wrong["error"], wrong
    assert "Debian bookworm has no package python3.13," in wrong["error"], wrong  # names the suite and the package
    assert wrong["wheel"] is None and not list((root / "wheels").glob("**/*cp313*.whl"))


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
@needs_engine
def test_real_plugin_torch213_cp311_drv2_in_bookworm(tmp_path: Path) -> None:
    """The real plugin and driver, compiled, repaired and smoke-tested in the bookworm builder image."""
    root = copy_project(tmp_path / "project")
    result = run_cli(
        root,
        "build",
        "--matrix",
        str(root / "matrix.yaml"),
        "--torch",
        "2.13",
        "--python",
        "3.11",
        "--sdk",
        "2",
        "--runner",
        "docker",
    )
    cell = "torch2.13-cpu-cp311-drv2"
    result_record = record(root, cell)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert result_record["status"] == "passed" and result_record["runner"] == "docker"
    assert result_record["torch_build"]["image"].startswith("buildmatrix-builder:bookworm-")
    assert Version(result_record["torch_build"]["version"]).public == "2.13.0"
    assert "manylinux" in result_record["wheel"]["filename"]
    smoke = result_record["smoke"]
    assert smoke["failed"] == 0 and smoke["errors"] == 0 and smoke["passed"] > 50, smoke
