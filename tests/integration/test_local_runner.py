"""The local runner end to end on a tiny plugin-shaped project: real uv environments, compiler, torch 2.13 CPU wheel."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from conftest import TINY_CONTRACT

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
REPO = Path(__file__).parents[2]
# The CLI runs as a subprocess from the project directory, like a user would; find this checkout's package.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
MATRIX = (
    """\
schema-version: 2
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["1.4", "2.1"]}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: pip-find-links}
runner: local
"""
    + TINY_CONTRACT
)  # the tiny project's contract: test_faults builds it with this matrix too
CELLS = ["torch2.13-cpu-cp311-drv1", "torch2.13-cpu-cp311-drv2"]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX)
    return root


def build(
    root: Path, *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(root / "matrix.yaml"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
        env=env or ENV,
    )


def record(root: Path, name: str, kind: str = "cells") -> dict[str, Any]:
    """A cell's record (kind "builds": a build's; the tiny plugin is per Python, so its builds have its cells' ids)."""
    data: dict[str, Any] = json.loads((root / "wheels" / "results" / kind / f"{name}.json").read_text())
    return data


def wheel_files(root: Path) -> list[str]:
    wheels = root / "wheels"
    return sorted(str(p.relative_to(wheels)) for p in wheels.rglob("*.whl"))


def test_green_build_then_noop_rerun(tiny: Path) -> None:
    first = build(tiny)
    assert first.returncode == 0, first.stdout + first.stderr
    for cell in CELLS:
        result = record(tiny, cell)
        assert result["status"] == "passed"
        assert result["smoke"] == {"passed": 3, "failed": 0, "skipped": 0, "errors": 0}
        assert result["features"] == {"tiny": "passed"}
        assert result["torch_build"]["version"] == "2.13.0+cpu" and result["torch_build"]["cxx11_abi"] is True
        assert [s["name"] for s in result["steps"]] == ["source", "check", "interpreter", "smoke-env", "smoke"]
        made = record(tiny, cell, "builds")
        assert made["wheel"] == result["wheel"] and result["cell"]["build"]["id"] == cell
        assert [s["name"] for s in made["steps"]] == [
            "source",
            "interpreter",
            "sdk",
            "build-env",
            "build",
            "check",
            "publish",
        ]
    assert wheel_files(tiny) == [
        "driver/tiny_driver-1.4.0+tiny-py3-none-any.whl",
        "driver/tiny_driver-2.1.0+tiny-py3-none-any.whl",
        "torch2.13/tiny_plugin-0.1.0+torch.2.13.drv.1-cp311-cp311-linux_x86_64.whl",
        "torch2.13/tiny_plugin-0.1.0+torch.2.13.drv.2-cp311-cp311-linux_x86_64.whl",
    ]
    summary = json.loads((tiny / "wheels" / "results" / "summary.json").read_text())
    assert summary["counts"] == {"passed": 2, "failed": 0}
    # A passed build's and cell's scratch (environments, patched tree) are gone once they are recorded.
    assert not any((tiny / "build" / "matrix" / "cells" / cell).exists() for cell in CELLS)
    assert not any((tiny / "build" / "matrix" / "builds" / cell).exists() for cell in CELLS)

    mtimes = {p: p.stat().st_mtime_ns for p in (tiny / "wheels").rglob("*.whl")}
    start = time.monotonic()
    again = build(tiny)
    elapsed = time.monotonic() - start
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("up-to-date") == 4  # two builds, two cells
    assert elapsed < 30, f"no-op rerun took {elapsed:.1f} s"
    assert mtimes == {p: p.stat().st_mtime_ns for p in (tiny / "wheels").rglob("*.whl")}

    # A change to the plugin's sources makes both cells stale again.
    (tiny / "plugin" / "tiny_plugin" / "extra.py").write_text("X = 1\n")
    third = build(tiny, "--sdk", "2")
    assert third.returncode == 0 and "up-to-date" not in third.stdout


def test_started_through_nox_or_directly_builds_once(tiny: Path, tmp_path: Path) -> None:
    """`nox -s build-matrix` runs in nox's environment, first on PATH; `python -m torch_buildmatrix build` does not.
    Both choose one interpreter and one identity (minor and ABI), so switching between them is a no-op, not a
    rebuild."""
    session = tmp_path / "nox-session"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(session)], check=True)
    assert (session / "bin" / "python3.11").exists()
    through_nox = {**ENV, "PATH": os.pathsep.join([str(session / "bin"), ENV.get("PATH", "")])}
    first = build(tiny, "--sdk", "2", env=through_nox)
    assert first.returncode == 0, first.stdout + first.stderr
    made = record(tiny, CELLS[1])
    assert made["inputs"]["python"] == "cpython-3.11"
    assert str(session) not in json.dumps(made["inputs"])
    directly = build(tiny, "--sdk", "2")
    assert directly.returncode == 0, directly.stdout + directly.stderr
    assert directly.stdout.count("up-to-date") == 2  # its build and its cell
    assert record(tiny, CELLS[1]) == made


def test_broken_cell_fails_alone(tiny: Path) -> None:
    (tiny / "plugin" / "BREAK_DRIVER_1").write_text("")
    result = build(tiny)
    assert result.returncode == 1
    broken, fine = record(tiny, CELLS[0]), record(tiny, CELLS[1])
    assert broken["status"] == "failed" and broken["failed_step"] == "build"
    assert "broken on purpose" in (tiny / "wheels" / broken["log"]).read_text()
    assert fine["status"] == "passed" and fine["wheel"]["filename"].endswith(".whl")
    assert f"{CELLS[0]} failed in build" in result.stdout
    builds_dir = tiny / "build" / "matrix" / "builds"
    assert (builds_dir / CELLS[0] / "tree").is_dir() and not (
        builds_dir / CELLS[1]
    ).exists()  # failed ones stay to inspect
    # The failure is recorded for these inputs: a rerun does not rebuild it, --force does.
    assert build(tiny).stdout.count("up-to-date") == 4


def test_failing_smoke_suite_keeps_counts(tiny: Path) -> None:
    (tiny / "plugin" / "tests" / "FAIL_SMOKE").write_text("")
    result = build(tiny, "--sdk", "2")
    assert result.returncode == 1
    failed = record(tiny, CELLS[1])
    assert failed["failed_step"] == "smoke" and failed["smoke"]["failed"] == 1 and failed["smoke"]["passed"] == 2
    assert failed["wheel"] == record(tiny, CELLS[1], "builds")["wheel"]  # the wheel it tested, and failed


def test_each_cell_suite_has_a_temporary_directory_of_its_own(tiny: Path) -> None:
    """Caches in the temporary directory (Inductor's compiled graphs) must not carry from cell to cell or run to run:
    each suite gets a fresh TMPDIR, short enough for multiprocessing's Unix sockets, removed when the suite ends."""
    mark = f"tiny-temp-{uuid.uuid4().hex}"
    shared = Path(tempfile.gettempdir())
    (tiny / "plugin" / "tests" / "FAIL_SMOKE").write_text("")  # a failed cell keeps its scratch, to look into
    result = build(tiny, env={**ENV, "TINY_TEMP_MARK": mark})
    assert result.returncode == 1
    assert not (shared / mark).exists(), "the smoke suite wrote into the shared temporary directory"
    cells = tiny / "build" / "matrix" / "cells"
    used = [Path((cells / cell / "smoke" / mark).read_text()) for cell in CELLS]  # each suite's gettempdir()
    assert len(set(used)) == 2 and all(p.parent == shared and p.name.startswith("buildmatrix-smoke-") for p in used)
    assert not any(p.exists() for p in used)  # removed with the suite, even though the cell failed
    assert all(record(tiny, cell)["smoke"]["passed"] == 2 for cell in CELLS)  # the marking test passed


def test_fail_fast_starts_no_new_cell(tiny: Path) -> None:
    (tiny / "plugin" / "BREAK_DRIVER_1").write_text("")
    result = build(tiny, "--fail-fast")
    assert result.returncode == 1
    assert record(tiny, CELLS[0])["status"] == "failed"
    assert not (tiny / "wheels" / "results" / "cells" / f"{CELLS[1]}.json").exists()


def test_sigkill_mid_run_then_clean_resume(tiny: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(tiny / "matrix.yaml")],
        cwd=tiny,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=ENV,
    )
    # Kill while the second cell's build is made: the first build and cell are recorded, the second half done.
    deadline = time.monotonic() + 600
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(f"build {CELLS[1]}: build-env") or time.monotonic() > deadline:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert record(tiny, CELLS[0])["status"] == "passed"
    assert not (tiny / "wheels" / "results" / "cells" / f"{CELLS[1]}.json").exists()

    resumed = build(tiny)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"{CELLS[0]}: up-to-date" in resumed.stdout
    assert record(tiny, CELLS[1])["status"] == "passed"
    leftovers = [p for p in (tiny / "wheels").rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


def test_second_concurrent_run_is_refused(tiny: Path) -> None:
    from torch_buildmatrix.builder.workspace import RunLock, Workspace
    from torch_buildmatrix.errors import RunLocked

    with RunLock(Workspace.for_root(tiny)):
        result = build(tiny)
    assert result.returncode == RunLocked.exit_code
    assert "another build-matrix run" in result.stderr


def test_same_cell_built_in_two_directories_gives_the_same_bytes(tmp_path: Path) -> None:
    """No compiler cache to hand one build's object to the other: the build directory must not reach the wheel
    (debug information, __FILE__), or machines building in different places publish different bytes."""
    wheels = []
    for place in ("one", "somewhere/else/two"):
        root = tmp_path / place
        shutil.copytree(FIXTURE, root)
        (root / "matrix.yaml").write_text(MATRIX)
        result = subprocess.run(
            [sys.executable, "-m", "torch_buildmatrix", "build", "--sdk", "2"],
            capture_output=True, text=True, timeout=900, cwd=root, env={**ENV, "CCACHE_DISABLE": "1"}, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        [wheel] = (root / "wheels").rglob("tiny_plugin-*.whl")
        wheels.append(wheel.read_bytes())
    assert wheels[0] == wheels[1]
