"""Runner selection with the world: auto with no Docker engine for the image cells is refused; the CLI on the tiny
fixture prints the plan, and its refusals write nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.builder.runners.select import plan_runners, runners_for
from torch_buildmatrix.errors import EngineUnavailable, InterpreterNotFound
from torch_buildmatrix.model.cells import Cell, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName

from conftest import TINY_CONTRACT, VALID, WriteMatrix, run_cli

P = Python.parse  # a Python of the matrix: P("3.11"), P("3.13t")

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
pytestmark = pytest.mark.skipif(HERE != "3.11", reason="the tests name this interpreter as the local Python 3.11")
REPO = Path(__file__).parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "tiny"
IMAGES = """\
images:
  bookworm: {base: "debootstrap:bookworm", python: ["3.11"]}
  forky: {base: "debootstrap:forky", python: ["3.14", "3.15"]}
"""


@pytest.fixture
def interpreters(tmp_path: Path) -> LocalRunner:
    """A LocalRunner that finds only this Python 3.11 (a PATH of one directory, no pyenv)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.11").symlink_to(sys.executable)
    empty = tmp_path / "no-pyenv"
    empty.mkdir()
    return LocalRunner(search_path=str(bin_dir), pyenv_root=empty)


def project_cells(write_matrix: WriteMatrix, images: str = IMAGES) -> tuple[Matrix, list[Cell]]:
    text = VALID.replace('python: ["3.9", "3.10", "3.11"]', 'python: ["3.10", "3.11", "3.14"]') + images
    matrix = load_matrix(write_matrix(text))
    offered = {
        matrix.torch[0]: {P("3.10"), P("3.11")},
        matrix.torch[1]: {P("3.11"), P("3.14")},
    }
    return matrix, [c for c in expand(matrix, offered) if c.sdk is not None and c.sdk.major == 2]


@pytest.mark.integration
def test_auto_with_no_engine_for_the_image_cells_is_refused(
    write_matrix: WriteMatrix, interpreters: LocalRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'dead.sock'}")
    matrix, cells = project_cells(write_matrix)
    plan = plan_runners([c for c in cells if c.python != P("3.10")], matrix, RunnerName.AUTO, interpreters)
    with pytest.raises(EngineUnavailable) as info:
        runners_for(plan, matrix)
    message = str(info.value)
    assert message.startswith("docker: no local 3.14; image forky serves it, but no Docker engine answers")
    assert "or leave those Pythons out (--python)" in message
    local_only = plan_runners(cells[1:3], matrix, RunnerName.AUTO, interpreters)
    runners, why = runners_for(local_only, matrix)  # no Docker cell: the engine is never asked
    assert list(runners) == [RunnerName.LOCAL] and why == "local runner"


# ---- the CLI on the tiny fixture: the plan is printed, refusals write nothing ------------------------------------

TINY = """\
schema-version: 2
plugin: {{distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{{torch_minor}}.drv.{{sdk_major}}"}}
sdk: {{kind: wheel, name: driver, id: "drv{{sdk_major}}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}}
python: {pythons}
torch:
  - {{version: "2.13.0", variant: cpu, wheels: {{find-links: {links}}}}}
images:
  forky: {{base: "debootstrap:forky", python: ["3.14", "3.15"]}}
runner: auto
"""


def tiny_project(tmp_path: Path, pythons: str) -> Path:
    links = tmp_path / "find-links"
    links.mkdir()
    for tag in ("cp39", "cp311", "cp314"):  # only the names matter: nothing is built
        (links / f"torch-2.13.0+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl").write_bytes(b"")
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(TINY.format(pythons=pythons, links=links) + TINY_CONTRACT)
    return root


def cli(root: Path, tmp_path: Path, *args: str, docker_host: str = "") -> subprocess.CompletedProcess[str]:
    """The CLI with only this Python 3.11 to find (one PATH directory, no pyenv)."""
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        (bin_dir / "python3.11").symlink_to(sys.executable)
        (tmp_path / "no-pyenv").mkdir()
    env = {
        "PATH": str(bin_dir),
        "PYENV_ROOT": str(tmp_path / "no-pyenv"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO),
        "COLUMNS": "250",
        **({"DOCKER_HOST": docker_host} if docker_host else {}),
    }
    return run_cli(root, *args, "--matrix", str(root / "matrix.yaml"), timeout=120, env=env)


def untouched(root: Path) -> bool:
    return not (root / "wheels").exists() and not (root / "build").exists()


@pytest.mark.integration
def test_cli_plan_and_local_refusal_write_nothing(tmp_path: Path) -> None:
    root = tiny_project(tmp_path, '["3.11", "3.14"]')
    listed = cli(root, tmp_path, "matrix")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert f"local: {tmp_path / 'bin' / 'python3.11'}" in listed.stdout
    assert "docker: no local 3.14; image forky serves it" in listed.stdout

    refused = cli(root, tmp_path, "build", "--runner", "local")
    assert refused.returncode == InterpreterNotFound.exit_code == 4, refused.stdout + refused.stderr
    assert "no interpreter for 3.14: build it with --runner docker (image forky serves it)" in refused.stderr
    assert "Traceback" not in refused.stderr
    # The plan is printed first: each cell's runner and why.
    assert f"local: {tmp_path / 'bin' / 'python3.11'}: torch2.13-cpu-cp311-drv2" in refused.stdout
    assert (
        "no interpreter for 3.14: build it with --runner docker (image forky serves it): torch2.13-cpu-cp314-drv2"
        in (refused.stdout)
    )
    assert untouched(root)

    # --runner docker with no engine stops the run before anything is written (under auto, the local cells build and
    # the others are recorded as not built: test_no_engine.py).
    no_engine = cli(root, tmp_path, "build", "--runner", "docker", docker_host=f"unix://{tmp_path / 'dead.sock'}")
    assert no_engine.returncode == EngineUnavailable.exit_code, no_engine.stdout + no_engine.stderr
    assert "--runner docker, but no Docker engine answers" in no_engine.stderr
    assert untouched(root)


@pytest.mark.integration
def test_cli_refuses_a_python_neither_local_nor_served(tmp_path: Path) -> None:
    root = tiny_project(tmp_path, '["3.9", "3.11"]')
    refused = cli(root, tmp_path, "build")
    assert refused.returncode == 4, refused.stdout + refused.stderr
    said = refused.stderr.replace("\n", " ")
    assert (
        "no CPython 3.9 interpreter found" in said and "no image serves Python 3.9 (images: forky (3.14, 3.15))" in said
    )
    assert untouched(root)


@pytest.mark.integration
def test_github_plan_gives_each_cell_the_runner_build_would(tmp_path: Path) -> None:
    """The workflow's plan: a cell whose Python the planning machine has is local, one only an image serves is
    docker; a Python neither serves stops the plan with no JSON for the workflow to read."""
    root = tiny_project(tmp_path, '["3.11", "3.14"]')
    planned = cli(root, tmp_path, "matrix", "--github")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    runners = {entry["cell"]: entry["runner"] for entry in json.loads(planned.stdout)["cells"]["include"]}
    assert runners == {"torch2.13-cpu-cp311-drv2": "local", "torch2.13-cpu-cp314-drv2": "docker"}

    (tmp_path / "unserved").mkdir()
    unserved = tiny_project(tmp_path / "unserved", '["3.9", "3.11"]')
    refused = cli(unserved, tmp_path, "matrix", "--github")
    assert refused.returncode == InterpreterNotFound.exit_code, refused.stdout + refused.stderr
    assert refused.stdout == ""
    assert "no image serves Python 3.9" in refused.stderr.replace("\n", " ")
