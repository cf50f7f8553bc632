"""Every documented install command, run by real pip and real uv into real environments that already have a real
torch (2.4.1 from the registry, 2.13.0+cpu from the machine's find-links), from the generated site served over HTTP.

Two public indexes stand beside the site on 127.0.0.1: a clean one holding newer torch releases (tiny stand-ins named
`torch`, so an installer that wanted to upgrade torch could, and the test would see it), and a squatted one that also
holds look-alikes: torch-emu 99.0.0 and emu-driver 1.4.0, 2.1.0 and 2.99.0. Honest about the fakes: the plugin and
driver wheels are tiny stand-ins with the real names, versions, tags and requirements (torch==X.Y.*, emu-driver
>=N.M,<N+1); torch itself is real. "Ours" means the installed files are byte for byte the files of the wheel whose
sha256 the cell's record holds.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import os
import shlex
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_wheels import cell_result, interpreter_tag, make_wheel
from packaging.version import Version
from torch_envs import cached_torch_env, clone, python_of, torch_version

from buildmatrix.model.cells import expand
from buildmatrix.model.matrix import load_matrix
from buildmatrix.publish.site import write_site
from buildmatrix.publish.table import CompatTable, any_torch_command, build_table, install_commands

from conftest import VALID

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.version_info[:2] != (3, 11), reason="torch 2.13.0+cpu is on this machine for Python 3.11 only"
    ),
]
PYTHON = "3.11"
MATRIX = VALID.replace('python: ["3.9", "3.10", "3.11"]', f'python: ["{PYTHON}"]')
TORCH = {"torch2.4-cuda": "2.4.1", "torch2.13-cpu": "2.13.0+cpu"}  # release key -> what the environment has


@dataclass
class World:
    url: str  # http://127.0.0.1:PORT
    table: CompatTable
    wheels: Path  # the wheels directory the records point into

    @property
    def site(self) -> str:
        return f"{self.url}/site"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def public_index(root: Path, squatted: bool) -> None:
    """A PEP 503 index (directory listings serve as project pages): newer torch, and with `squatted` look-alikes."""
    for version in ("2.13.0", "2.15.0"):
        make_wheel(root / "torch", "torch", version)
    if squatted:
        make_wheel(root / "torch-emu", "torch-emu", "99.0.0", extra_files={"torch_emu/SQUATTER": "x"})
        for version in ("1.4.0", "2.1.0", "2.99.0"):
            make_wheel(root / "emu-driver", "emu-driver", version, extra_files={"emu_driver/SQUATTER": "x"})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("world")
    (root / "matrix").mkdir()
    for part in ("plugin/tests", "driver", "patches/pre-2.7"):
        (root / "matrix" / part).mkdir(parents=True)
    (root / "matrix" / "patches/pre-2.7/series").write_text("# empty\n")
    (root / "matrix" / "matrix.yaml").write_text(MATRIX)
    matrix = load_matrix(root / "matrix" / "matrix.yaml")
    available = {r: {Version(PYTHON)} for r in matrix.torch}
    cells = expand(matrix, available)
    wheels = root / "wheels"
    results = [
        cell_result(
            cell,
            wheels_dir=wheels,
            plugin_requires=[f"torch=={cell.torch.minor}.*"],
            tag=interpreter_tag(),
        )
        for cell in cells
    ]
    www = root / "www"
    public_index(www / "clean", squatted=False)
    public_index(www / "squatted", squatted=True)
    table = build_table(matrix, cells, results, available)
    report = write_site(table, wheels, www / "site")
    assert report.problems == [], report.problems
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(www)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield World(f"http://127.0.0.1:{server.server_address[1]}", table, wheels)
    finally:
        server.shutdown()
        server.server_close()


def environment(world: World, public: str, env: Path) -> dict[str, str]:
    """The machine's own index configuration is replaced by the stand-in public index; nothing is cached."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    return {
        **clean,
        "PATH": f"{env / 'bin'}{os.pathsep}{clean.get('PATH', '')}",  # `python` in $(...) is the user's
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": f"{world.url}/{public}/",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_NO_CONFIG": "1",
        "UV_INDEX_URL": f"{world.url}/{public}/",
        "UV_NO_CACHE": "1",
    }


def run(command: str, tool: str, env: Path, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The documented command through a shell (it may hold $(...)), as pip in the env or as `uv pip --python`."""
    assert command.startswith("pip install "), command
    python = shlex.quote(str(python_of(env)))
    prefix = f"{python} -m pip install" if tool == "pip" else f"uv pip install --python {python}"
    return subprocess.run(
        prefix + command.removeprefix("pip install"),
        shell=True,
        capture_output=True,
        text=True,
        env=variables,
        timeout=600,
        check=False,
    )


def record_hashes(wheel: Path) -> dict[str, str]:
    """RECORD of a wheel: path -> sha256 (urlsafe base64), for the files a user imports."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        lines = archive.read(name).decode().splitlines()
    out = {}
    for line in lines:
        path, digest, _size = line.rsplit(",", 2)
        if digest and ".dist-info/" not in path:
            out[path] = digest.removeprefix("sha256=")
    return out


def site_packages(env: Path) -> Path:
    return env / "lib" / f"python{PYTHON}" / "site-packages"


def installed_is_ours(world: World, env: Path, recorded: Path, sha256: str) -> bool:
    """The installed files are those of the recorded wheel, and that wheel has the record's sha256."""
    assert hashlib.sha256(recorded.read_bytes()).hexdigest() == sha256
    for path, digest in record_hashes(recorded).items():
        file = site_packages(env) / path
        if not file.is_file():
            return False
        got = base64.urlsafe_b64encode(hashlib.sha256(file.read_bytes()).digest()).rstrip(b"=").decode()
        if got != digest:
            return False
    return True


def versions(env: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m\n"
        "for n in ('torch', 'torch-emu', 'emu-driver'):\n"
        "    try: print(n, m.version(n))\n"
        "    except m.PackageNotFoundError: print(n, '-')"
    )
    out = subprocess.run([str(python_of(env)), "-c", code], capture_output=True, text=True, check=True).stdout
    return dict(line.split() for line in out.splitlines())


def expected_cell(world: World, release: str):  # type: ignore[no-untyped-def]
    """What a plain install must pick: the release's wheel for this Python with the newest driver."""
    cells = [c for c in world.table.cells if c.release == release and c.python == PYTHON and c.installable]
    return max(cells, key=lambda c: c.driver)


def commands(world: World, release: str) -> dict[str, str]:
    cell = expected_cell(world, release)
    made = install_commands(world.table, cell, world.site)
    return {
        "release index": made.release_index,
        "any torch": any_torch_command(world.table, world.site),
        "pinned index": made.pinned,
        "pinned find-links": made.find_links,
    }


def assert_ours(world: World, env: Path, release: str, before: str, result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    cell = expected_cell(world, release)
    assert cell.wheel is not None and cell.driver_wheel is not None
    assert torch_version(python_of(env)) == before  # torch untouched
    found = versions(env)
    assert (
        found["torch-emu"] == cell.wheel.filename.split("-")[1]
        and found["emu-driver"] == cell.driver_wheel.filename.split("-")[1]
    ), found
    assert installed_is_ours(world, env, world.wheels / cell.wheel.path, cell.wheel.sha256)
    assert installed_is_ours(world, env, world.wheels / cell.driver_wheel.path, cell.driver_wheel.sha256)


@pytest.mark.parametrize("release", list(TORCH))
@pytest.mark.parametrize("tool", ["pip", "uv"])
@pytest.mark.parametrize("kind", ["release index", "any torch"])
def test_plain_commands_keep_the_installed_torch(world: World, release: str, tool: str, kind: str) -> None:
    with clone(cached_torch_env(TORCH[release])) as env:
        before = torch_version(python_of(env))
        result = run(commands(world, release)[kind], tool, env, environment(world, "clean", env))
        assert_ours(world, env, release, before, result)


# (command, tool) -> who wins against look-alikes on the public index; the docs (markdown.LOOK_ALIKE_NOTE) say this.
SQUAT_OUTCOME = {
    ("release index", "pip"): "squatter",
    ("any torch", "pip"): "squatter",
    ("release index", "uv"): "ours",
    ("any torch", "uv"): "ours",
    ("pinned index", "pip"): "ours",
    ("pinned index", "uv"): "ours",
    ("pinned find-links", "pip"): "ours",
    ("pinned find-links", "uv"): "ours",
}


@pytest.mark.parametrize(("kind", "tool"), list(SQUAT_OUTCOME))
def test_documented_commands_against_look_alikes(world: World, kind: str, tool: str) -> None:
    release = "torch2.4-cuda"
    with clone(cached_torch_env(TORCH[release])) as env:
        before = torch_version(python_of(env))
        result = run(commands(world, release)[kind], tool, env, environment(world, "squatted", env))
        if SQUAT_OUTCOME[(kind, tool)] == "ours":
            assert_ours(world, env, release, before, result)
        else:  # what the docs warn about: pip merges indexes and takes the look-alike's higher version
            assert result.returncode == 0, result.stderr
            assert versions(env)["torch-emu"] == "99.0.0"
            assert (site_packages(env) / "torch_emu" / "SQUATTER").is_file()


def test_the_docs_warn_where_pip_can_pick_a_look_alike() -> None:
    from buildmatrix.publish.markdown import LOOK_ALIKE_NOTE

    assert "pip merges every index" in LOOK_ALIKE_NOTE and "use the pinned commands" in LOOK_ALIKE_NOTE
    assert {k for k, v in SQUAT_OUTCOME.items() if v == "squatter"} == {("release index", "pip"), ("any torch", "pip")}
