"""The real plugin on the cheap torch 2.13 CPU cells: built, checked and smoke-tested through the local runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="session")
def real_cells(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real plugin built and smoke-tested on the cheap torch 2.13 CPU cells (both drivers), once per session.

    Returns the project copy's root: wheels/, wheels/results/ and wheels/logs/ hold what a release engineer gets.
    """
    from conftest import copy_project, run_cli

    root = copy_project(tmp_path_factory.mktemp("real") / "project", never_published=True)
    result = run_cli(
        root, "build", "--matrix", str(root / "matrix.yaml"), "--torch", "2.13", "--python", "3.11", "--runner", "local"
    )
    (root / "build-output.txt").write_text(result.stdout + result.stderr)
    return root


def plugin_version(project: Path) -> str:
    """The version the cells are built at: matrix.yaml's plugin.version, the only place it is written."""
    from torch_buildmatrix.model.loader import load_matrix

    return str(load_matrix(project / "matrix.yaml").plugin.version)


@pytest.mark.parametrize("driver", ["1", "2"])
def test_cell_is_green(real_cells: Path, driver: str) -> None:
    record = json.loads(
        (real_cells / "wheels" / "results" / "cells" / f"torch2.13-cpu-cp311-drv{driver}.json").read_text()
    )
    log = (real_cells / "wheels" / record["log"]).read_text()
    assert record["status"] == "passed", f"{record['failed_step']}: {record['error']}\n{log[-6000:]}"
    smoke = record["smoke"]
    assert smoke["failed"] == 0 and smoke["errors"] == 0 and smoke["passed"] >= 20, smoke
    assert record["torch_build"]["version"] == "2.13.0+cpu" and record["torch_build"]["cxx11_abi"] is True
    version = plugin_version(real_cells)
    # No CPython API in the compiled part: one py3-none wheel serves every Python of the release.
    assert record["wheel"]["filename"].startswith(f"torch_emu-{version}+torch.2.13.drv.{driver}-py3-none-")
    assert (real_cells / "wheels" / record["wheel"]["path"]).is_file()
    assert record["sdk_wheel"]["filename"].startswith("emu_driver-")
    assert record["sdk_wheel"]["path"].startswith("driver/")  # the same site URL as before the SDK was general


def test_noop_rerun_rebuilds_nothing(real_cells: Path) -> None:
    from conftest import run_cli

    again = run_cli(
        real_cells,
        "build",
        "--matrix",
        str(real_cells / "matrix.yaml"),
        "--torch",
        "2.13",
        "--python",
        "3.11",
        "--runner",
        "local",
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("up-to-date") == 4  # the two builds and the two cells that test them


def test_page_command_installs_the_real_wheel_beside_torch_2_13(real_cells: Path, tmp_path: Path) -> None:
    """The generated site, served over HTTP: with torch 2.13 installed, the page's command for 2.13 installs the
    real torch-emu wheel and its driver, torch stays as it was, and emu computes."""
    import functools
    import http.server
    import os
    import subprocess
    import threading

    from torch_buildmatrix.model.registry import pip_configured_find_links
    from torch_buildmatrix.publish.advice import install_choice
    from torch_buildmatrix.publish.table import CompatTable

    from conftest import run_cli

    done = run_cli(real_cells, "compat-table", "--matrix", str(real_cells / "matrix.yaml"), "--offline")
    assert done.returncode == 0, done.stdout + done.stderr
    site = real_cells / "wheels" / "site"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        table = CompatTable.from_json((site / "compatibility.json").read_text())
        choice = install_choice(table, "torch2.13-cpu", "3.11", "drv2", site=url)
        assert choice.exact, choice.note
        venv = tmp_path / "user"
        subprocess.run(["uv", "venv", "-q", "--seed", "--python", "3.11", str(venv)], check=True, timeout=120)
        python = venv / "bin" / "python"
        links = [arg for location in pip_configured_find_links() for arg in ("--find-links", location)]
        subprocess.run(
            ["uv", "pip", "install", "-q", "--python", str(python), *links, "torch==2.13.0+cpu"],
            check=True,
            timeout=900,
        )
        env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        words = choice.index_command.split()
        assert words[:2] == ["pip", "install"]
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", *words[2:]],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
        check = (
            "import torch, torch_emu; print(torch.__version__, torch_emu.__version__, "
            "torch.ones(3, device='emu').add(1).sum().item())"
        )
        out = subprocess.run([str(python), "-c", check], check=False, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["2.13.0+cpu", f"{plugin_version(real_cells)}+torch.2.13.drv.2", "6.0"]
        doctor = subprocess.run(
            [str(python), "-m", "torch_emu.doctor"], check=False, capture_output=True, text=True, timeout=120
        )
        assert doctor.returncode == 0 and "verdict: OK" in doctor.stdout, doctor.stdout + doctor.stderr
    finally:
        server.shutdown()


def other_installation(series: str, used: Path) -> Path | None:
    """A CPython of `series` from another installation than `used` (a Debian one beside pyenv's, or the reverse),
    looked for the way the local runner looks: each PATH directory, then pyenv."""
    import os

    from torch_buildmatrix.builder.interpreters import find_interpreter
    from torch_buildmatrix.errors import InterpreterNotFound
    from torch_buildmatrix.model.pythons import Python

    python = Python.parse(series)
    searches = [(directory, None) for directory in os.environ.get("PATH", "").split(os.pathsep) if directory]
    for path_env, pyenv_root in [*searches, ("", "auto")]:
        try:
            found = find_interpreter(python, path_env=path_env, pyenv_root=pyenv_root).executable
        except InterpreterNotFound:
            continue
        if found.resolve() != used.resolve():
            return found
    return None


def test_another_python_builds_the_same_wheel(real_cells: Path, tmp_path: Path) -> None:
    """One build per torch ABI serves every Python only if the building Python leaves nothing in the bytes: built
    again by another CPython 3.11 installation (its own sysconfig flags, prefix and LDSHARED), the 2.13 wheel is the
    same file, byte for byte."""
    import os

    from torch_buildmatrix.builder.interpreters import find_interpreter
    from torch_buildmatrix.model.pythons import Python

    from conftest import copy_project, run_cli

    used = find_interpreter(Python.parse("3.11")).executable  # as real_cells' run chose, in this same environment
    other = other_installation("3.11", used)
    if other is None:
        pytest.skip(f"one CPython 3.11 installation only ({used}): no second interpreter to build with")
    first = copy_project(tmp_path / "project", never_published=True)
    chosen = tmp_path / "interpreter"
    chosen.mkdir()
    (chosen / "python3.11").symlink_to(other)

    # The local runner takes the newest 3.11 it finds on PATH and under pyenv: to build with the other one, it must be
    # the only one there. PATH keeps its directories but those with another 3.11 outside a virtual environment
    # (pyenv's shims, the used one's bin), and pyenv's root is an empty directory.
    def another_311(directory: str) -> bool:
        found = Path(directory) / "python3.11"
        in_venv = (Path(directory).parent / "pyvenv.cfg").is_file()
        return found.exists() and not in_venv and found.resolve() != other.resolve()

    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not another_311(d)]
    no_pyenv = tmp_path / "no-pyenv"
    no_pyenv.mkdir()
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(chosen), *kept]),
        "PYENV_ROOT": str(no_pyenv),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH")])),
    }
    assert find_interpreter(Python.parse("3.11"), path_env=env["PATH"], pyenv_root=no_pyenv).executable == chosen / (
        "python3.11"
    )
    # The build only (what a CI build job runs): the bytes are the question here, and real_cells smoke-tested them.
    done = run_cli(
        first, "build", "--matrix", str(first / "matrix.yaml"), "--torch", "2.13", "--python", "3.11", "--sdk", "2",
        "--runner", "local", "--builds-only", env=env,
    )  # fmt: skip
    build = "torch2.13-cpu-drv2"
    again = json.loads((first / "wheels" / "results" / "builds" / f"{build}.json").read_text())
    log = (first / "wheels" / again["log"]).read_text()
    assert done.returncode == 0 and again["status"] == "passed", done.stdout + done.stderr + log[-4000:]
    assert str(chosen / "python3.11") in log  # the build environment was made from the other interpreter
    assert not (first / "wheels" / "results" / "cells").exists() or not any(
        (first / "wheels" / "results" / "cells").iterdir()
    )
    record = json.loads((real_cells / "wheels" / "results" / "builds" / f"{build}.json").read_text())
    assert again["wheel"]["filename"] == record["wheel"]["filename"]
    rebuilt = (first / "wheels" / again["wheel"]["path"]).read_bytes()
    assert rebuilt == (real_cells / "wheels" / record["wheel"]["path"]).read_bytes(), (used, other)
