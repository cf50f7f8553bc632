"""Each cell's runner: auto sends a Python with no local interpreter to the image that serves it, the rest stay local;
--runner local refuses such a cell before anything is written; the plan says which runner and why."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.builder.runners.select import (
    ENGINE_COMMAND,
    RunnerChoice,
    RunnerPlan,
    plan_runners,
    runners_for,
    runners_or_unbuilt,
)
from torch_buildmatrix.docker import oci
from torch_buildmatrix.docker.engine import EngineReport
from torch_buildmatrix.errors import EngineUnavailable, InterpreterNotFound
from torch_buildmatrix.model.cells import Cell, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName

from conftest import VALID, WriteMatrix

P = Python.parse  # a Python of the matrix: P("3.11"), P("3.13t")

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
pytestmark = pytest.mark.skipif(HERE != "3.11", reason="the tests name this interpreter as the local Python 3.11")
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


def reasons(plan_cells: list[Cell], plan: object) -> dict[str, str]:
    return {c.id: plan.choice(c).reason for c in plan_cells}  # type: ignore[attr-defined]


def test_auto_keeps_local_pythons_local_and_sends_the_others_to_their_image(
    write_matrix: WriteMatrix, interpreters: LocalRunner
) -> None:
    matrix, cells = project_cells(write_matrix)
    plan = plan_runners(cells, matrix, RunnerName.AUTO, interpreters)
    local = f"local: {interpreters.interpreter(cells[1].python).executable}"
    assert reasons(cells[1:], plan) == {
        "torch2.4-cuda-cp311-drv2": local,
        "torch2.13-cpu-cp311-drv2": local,
        "torch2.13-cpu-cp314-drv2": "docker: no local 3.14; image forky serves it",
    }
    assert local.endswith("/bin/python3.11")
    assert plan.choice(cells[-1]) == RunnerChoice(RunnerName.DOCKER, "docker: no local 3.14; image forky serves it")
    # 3.10: neither a local interpreter nor an image: no runner, and the plan names the images and their Pythons.
    [problem] = plan.problems
    assert plan.choice(cells[0]).runner is None and plan.choice(cells[0]).reason == problem
    assert "no CPython 3.10 interpreter found" in problem
    assert "no image serves Python 3.10 (images: bookworm (3.11), forky (3.14, 3.15))" in problem
    with pytest.raises(InterpreterNotFound) as info:
        plan.check()
    assert info.value.exit_code == 4 and str(info.value) == problem


def test_auto_plan_of_buildable_cells_uses_both_runners(write_matrix: WriteMatrix, interpreters: LocalRunner) -> None:
    matrix, cells = project_cells(write_matrix)
    buildable = [c for c in cells if c.python != P("3.10")]
    plan = plan_runners(buildable, matrix, RunnerName.AUTO, interpreters)
    assert plan.problems == () and plan.runners == (RunnerName.LOCAL, RunnerName.DOCKER)
    plan.check()  # nothing to refuse
    assert plan.local is interpreters  # the run builds with the interpreters the plan found


def test_runner_local_refuses_a_python_only_an_image_serves(
    write_matrix: WriteMatrix, interpreters: LocalRunner
) -> None:
    matrix, cells = project_cells(write_matrix)
    plan = plan_runners([c for c in cells if c.python != P("3.10")], matrix, RunnerName.LOCAL, interpreters)
    assert plan.problems == ("no interpreter for 3.14: build it with --runner docker (image forky serves it)",)
    assert plan.runners == (RunnerName.LOCAL,)
    with pytest.raises(InterpreterNotFound, match=r"^no interpreter for 3\.14: build it with --runner docker"):
        runners_for(plan, matrix)


def test_runner_docker_needs_an_image_for_every_python(write_matrix: WriteMatrix, interpreters: LocalRunner) -> None:
    matrix, cells = project_cells(write_matrix)
    plan = plan_runners(cells, matrix, RunnerName.DOCKER, interpreters)
    assert plan.choice(cells[1]).reason == "docker: asked for; image bookworm serves 3.11"
    assert plan.choice(cells[-1]).reason == "docker: asked for; image forky serves 3.14"
    assert plan.problems == (
        "no image serves Python 3.10 (images: bookworm (3.11), forky (3.14, 3.15)): add it to an image's python list",
    )
    no_images = project_cells(write_matrix, images="")[0]
    assert plan_runners(cells[-1:], no_images, RunnerName.DOCKER, interpreters).problems == (
        "no image serves Python 3.14 (no images in matrix.yaml): add it to an image's python list",
    )


# ---- no engine answering: start one, or leave only the image's Pythons unbuilt (issue 37 item 0) --------------------


def no_engine_plan(write_matrix: WriteMatrix, interpreters: LocalRunner) -> tuple[Matrix, RunnerPlan]:
    matrix, cells = project_cells(write_matrix)
    return matrix, plan_runners([c for c in cells if c.python != P("3.10")], matrix, RunnerName.AUTO, interpreters)


def test_a_missing_engine_is_started_and_every_cell_builds(
    write_matrix: WriteMatrix, interpreters: LocalRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe says no engine answers, ensure_engine starts one: the run gets both runners, and says what it did."""
    from torch_buildmatrix.docker import engine

    matrix, plan = no_engine_plan(write_matrix, interpreters)
    answers = iter(["Cannot connect to the Docker daemon"])  # the first probe; every later one: the engine answers
    monkeypatch.setattr(oci, "engine_problem", lambda *a, **k: next(answers, ""))
    monkeypatch.setattr(oci, "server_version", lambda *a, **k: "27.0")
    started = EngineReport(actions=["started `dockerd` in the background as root"])
    monkeypatch.setattr(engine, "ensure_engine", lambda log, **k: started)
    chosen = runners_or_unbuilt(plan, matrix, tmp_path / "dockerd.log")
    assert set(chosen.runners) == {RunnerName.LOCAL, RunnerName.DOCKER} and chosen.unbuilt == {}
    assert chosen.engine_actions == ("started `dockerd` in the background as root",)
    assert "docker runner (engine 27.0" in chosen.why


def test_an_engine_that_cannot_start_leaves_the_images_pythons_unbuilt_with_a_command_that_works(
    write_matrix: WriteMatrix, interpreters: LocalRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not startable here: local cells still build; 3.14 (only an image serves it) is left unbuilt, and its reason
    gives a command that starts an engine with this interpreter, which has the tool, not the system's python3."""
    from torch_buildmatrix.docker import engine

    matrix, plan = no_engine_plan(write_matrix, interpreters)
    monkeypatch.setattr(oci, "engine_problem", lambda *a, **k: "Cannot connect to the Docker daemon")

    def cannot(log: Path, **k: object) -> EngineReport:
        raise EngineUnavailable("not Debian: start Docker your own way")

    monkeypatch.setattr(engine, "ensure_engine", cannot)
    chosen = runners_or_unbuilt(plan, matrix, tmp_path / "dockerd.log")
    assert list(chosen.runners) == [RunnerName.LOCAL] and list(chosen.unbuilt) == [P("3.14")]
    reason = chosen.unbuilt[P("3.14")]
    assert "Cannot connect to the Docker daemon" in reason and "not Debian" in reason
    assert f"Start one with `sudo {sys.executable} -m torch_buildmatrix engine`" in reason  # never `sudo python3`
    assert f"`{ENGINE_COMMAND}`" in reason
    assert chosen.why == "local runner; no Docker engine: 1 Python(s) left unbuilt"
