"""Every documented install command, run by real pip and real uv into real environments that already have a real
torch (2.4.1 from the registry, 2.13.0+cpu from the machine's find-links), from the generated site served over HTTP.
One real cp314 cell (torch 2.15, built in the forky image) is installed the same way inside that image, the only place
a Python 3.14 runs here.

Two public indexes stand beside the site on 127.0.0.1: a clean one holding newer torch releases (tiny stand-ins named
`torch`, so an installer that wanted to upgrade torch could, and the test would see it), and a squatted one that also
holds look-alikes: torch-emu 99.0.0 and emu-driver 1.4.0, 2.1.0 and 2.99.0. Honest about the fakes: the plugin and
driver wheels are tiny stand-ins with the real names, versions, tags and requirements (torch==X.Y.*, emu-driver
>=N.M,<N+1); torch itself is real. "Ours" means the installed files are byte for byte the files of the wheel whose
sha256 the cell's record holds.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_wheels import cell_result, interpreter_tag
from install_harness import environment, installed_is_ours, public_index, run, site_packages
from loopback_http import served
from packaging.version import Version
from torch_envs import cached_torch_env, clone, python_of, torch_version

from torch_buildmatrix.builder.records.model import CellResult
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.toolenv import uv_cache_dir
from torch_buildmatrix.docker import oci
from torch_buildmatrix.docker.images import passed_env
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.advice import any_torch_command, install_commands
from torch_buildmatrix.publish.overlay import build_table
from torch_buildmatrix.publish.site import write_site
from torch_buildmatrix.publish.table import CompatCell, CompatTable
from torch_buildmatrix.vocab import Status

from conftest import REPO, VALID

pytestmark = [pytest.mark.integration]
needs_local_311 = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="torch 2.13.0+cpu is on this machine for Python 3.11 only"
)
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


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("world")
    (root / "matrix").mkdir()
    for part in ("plugin/tests", "driver", "patches/pre-2.7"):
        (root / "matrix" / part).mkdir(parents=True)
    (root / "matrix" / "patches/pre-2.7/series").write_text("# empty\n")
    (root / "matrix" / "plugin/tests/test_smoke.py").write_text("")
    (root / "matrix" / "matrix.yaml").write_text(MATRIX)
    matrix = load_matrix(root / "matrix" / "matrix.yaml")
    available = {r: {Python.parse(PYTHON)} for r in matrix.torch}
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
    with served(www) as url:
        yield World(url, table, wheels)


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
    return max(cells, key=lambda c: c.key.sdk or Version("0"))


def commands(world: World, release: str) -> dict[str, str]:
    cell = expected_cell(world, release)
    made = install_commands(world.table, cell, world.site)
    any_torch = any_torch_command(world.table, world.site)
    assert any_torch is not None  # the matrix's wheels pin torch (check.torch-pin: release-line)
    return {
        "release index": made.release_index,
        "any torch": any_torch,
        "pinned index": made.pinned,
        "pinned find-links": made.find_links,
    }


def assert_ours(world: World, env: Path, release: str, before: str, result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    cell = expected_cell(world, release)
    assert cell.wheel is not None and cell.sdk_wheel is not None
    assert torch_version(python_of(env)) == before  # torch untouched
    found = versions(env)
    assert (
        found["torch-emu"] == cell.wheel.filename.split("-")[1]
        and found["emu-driver"] == cell.sdk_wheel.filename.split("-")[1]
    ), found
    assert installed_is_ours(site_packages(env, PYTHON), world.wheels / cell.wheel.path, cell.wheel.sha256)
    assert installed_is_ours(site_packages(env, PYTHON), world.wheels / cell.sdk_wheel.path, cell.sdk_wheel.sha256)


@needs_local_311
@pytest.mark.parametrize("release", list(TORCH))
@pytest.mark.parametrize("tool", ["pip", "uv"])
@pytest.mark.parametrize("kind", ["release index", "any torch"])
def test_plain_commands_keep_the_installed_torch(world: World, release: str, tool: str, kind: str) -> None:
    with clone(cached_torch_env(TORCH[release])) as env:
        before = torch_version(python_of(env))
        result = run(commands(world, release)[kind], tool, env, environment(f"{world.url}/clean/", env))
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


@needs_local_311
@pytest.mark.parametrize(("kind", "tool"), list(SQUAT_OUTCOME))
def test_documented_commands_against_look_alikes(world: World, kind: str, tool: str) -> None:
    release = "torch2.4-cuda"
    with clone(cached_torch_env(TORCH[release])) as env:
        before = torch_version(python_of(env))
        result = run(commands(world, release)[kind], tool, env, environment(f"{world.url}/squatted/", env))
        if SQUAT_OUTCOME[(kind, tool)] == "ours":
            assert_ours(world, env, release, before, result)
        else:  # what the docs warn about: pip merges indexes and takes the look-alike's higher version
            assert result.returncode == 0, result.stderr
            assert versions(env)["torch-emu"] == "99.0.0"
            assert (site_packages(env, PYTHON) / "torch_emu" / "SQUATTER").is_file()


def test_the_docs_warn_where_pip_can_pick_a_look_alike() -> None:
    from torch_buildmatrix.publish.markdown import look_alike_note

    note = look_alike_note(CompatTable.from_json((REPO / "docs" / "compatibility.json").read_text()))
    assert "pip merges every index" in note and "use the pinned commands" in note
    assert {k for k, v in SQUAT_OUTCOME.items() if v == "squatter"} == {("release index", "pip"), ("any torch", "pip")}


# ---- one real cp314 cell, installed inside the image that built it -------------------------------------------------

CP314_CELL = "torch2.15-cuda-cp314-drv2"
BUILD_CP314 = "python3 -m torch_buildmatrix build --runner docker --torch 2.15 --python 3.14 --sdk 2"


def real_cell_record(wheels: Path, cell_id: str) -> CellResult:
    """The passed record of a real cell with its wheels on disk, else a skip saying how to make it."""
    result = ResultStore(wheels / "results").load(cell_id)
    how = f"build it first (a ~3 GB CUDA download, shared through uv's cache): `{BUILD_CP314}`"
    if result is None:
        pytest.skip(f"no record of the real cell {cell_id} in {wheels}/results; {how}")
    if result.status != Status.PASSED or result.wheel is None or result.sdk_wheel is None:
        pytest.skip(f"the real cell {cell_id} did not pass ({result.status}: {result.error}); {how}")
    for wheel in (result.wheel, result.sdk_wheel):
        if not (wheels / wheel.path).is_file():
            pytest.skip(f"{wheels / wheel.path} (of {cell_id}'s record) is not on disk; {how}")
    return result


def docker(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


def installed_versions(site: Path) -> dict[str, str]:
    """Distribution versions in a site-packages this interpreter cannot run (Python 3.14's, read as files)."""
    import importlib.metadata

    return {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions(path=[str(site)])}


Inside = Callable[[str, dict[str, str]], subprocess.CompletedProcess[str]]


@contextlib.contextmanager
def container(image: str, env_dir: Path) -> Iterator[Inside]:
    """A container of `image` with env_dir at /env and uv's cache at /uv-cache; yields `sh -c` in it, with env."""
    name = f"install-cp314-{uuid.uuid4().hex[:8]}"
    # --network host: the container reaches the site on the host's loopback, and the host serves nothing outside.
    started = docker(
        "run", "--detach", "--rm", "--name", name, "--network", "host",
        f"--volume={env_dir}:/env", f"--volume={uv_cache_dir()}:/uv-cache", image, "sleep", "3600",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr

    def inside(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return docker("exec", *[f"--env={k}={v}" for k, v in env.items()], name, "sh", "-c", command)

    try:
        yield inside
    finally:
        docker("rm", "--force", name, timeout=120)
        # root-owned files from the container, ~5 GB of torch: never leave them to pytest's tmp rotation
        subprocess.run(["rm", "-rf", "--one-file-system", str(env_dir)], check=False)


def real_cp314_table(wheels: Path) -> tuple[CompatTable, CompatCell, str]:
    """The table of the one real cp314 cell (its record as built), with the image that built it; skips without."""
    result = real_cell_record(wheels, CP314_CELL)
    image = str(result.torch_build.get("image", ""))
    if not oci.server_version():
        pytest.skip("no Docker engine answers `docker info` (start one: nox -s docker-engine)")
    if not image or not oci.image_exists(image):
        pytest.skip(f"the image that built {CP314_CELL} ({image or 'not recorded'}) is gone; {BUILD_CP314}")
    matrix = load_matrix(REPO / "matrix.yaml")
    available = {r: set(r.python or matrix.python) for r in matrix.torch}
    cell = next((c for c in expand(matrix, available) if c.key == result.cell), None)
    if cell is None:
        pytest.skip(f"matrix.yaml no longer has the cell {CP314_CELL}")
    table = build_table(matrix, [cell], [result], {cell.torch: {cell.key.python}})
    compat = next(c for c in table.cells if c.key == cell.key)
    assert compat.wheel is not None and compat.sdk_wheel is not None
    return table, compat, image


@pytest.mark.docker
def test_the_plain_commands_install_a_real_cp314_cell_in_its_image(tmp_path: Path) -> None:
    """torch 2.15.0 (with its CUDA dependencies, from uv's cache, offline) in a Python 3.14 venv of the forky image
    that built the cell; then each plain documented command, with pip and with uv, from the site made of the cell's
    record: the cell's own wheels are installed, byte for byte, and torch stays."""
    wheels = REPO / "wheels"
    table, compat, image = real_cp314_table(wheels)
    assert compat.wheel is not None and compat.sdk_wheel is not None
    python = compat.key.python_minor
    public_index(tmp_path / "www" / "clean", squatted=False)
    report = write_site(table, wheels, tmp_path / "www" / "site")
    assert report.problems == [], report.problems
    with served(tmp_path / "www") as url, container(image, tmp_path / "env") as inside:
        assert inside(f"python{python} -m venv /env", {}).returncode == 0
        torch_req = f"torch=={compat.key.torch}"
        seconds = time.monotonic()
        fill = inside(
            f"uv pip install --offline --python /env/bin/python {shlex.quote(torch_req)}",
            {**passed_env(os.environ), "UV_CACHE_DIR": "/uv-cache", "UV_LINK_MODE": "copy"},
        )
        if fill.returncode != 0:
            pytest.skip(f"{torch_req} for cp{python.replace('.', '')} is not in uv's cache: {fill.stderr[-400:]}")
        print(f"torch with its dependencies copied from uv's cache in {time.monotonic() - seconds:.0f} s")
        site = site_packages(tmp_path / "env", python)
        before = installed_versions(site)["torch"]
        clean = {
            "PATH": "/env/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",  # `python` is the venv's
            "PIP_CONFIG_FILE": "/dev/null",
            "PIP_INDEX_URL": f"{url}/clean/",
            "PIP_NO_CACHE_DIR": "1",
            "UV_NO_CONFIG": "1",
            "UV_INDEX_URL": f"{url}/clean/",
            "UV_NO_CACHE": "1",
        }
        site_url = f"{url}/site"
        made = install_commands(table, compat, site_url)
        any_torch = any_torch_command(table, site_url)
        assert any_torch is not None
        for kind, command in (("release index", made.release_index), ("any torch", any_torch)):
            for tool, prefix in (("pip", "python -m pip install"), ("uv", "uv pip install --python /env/bin/python")):
                done = inside(prefix + command.removeprefix("pip install"), clean)
                assert done.returncode == 0, f"{kind} with {tool}: {done.stdout}{done.stderr}"
                found = installed_versions(site)
                assert found["torch"] == before, (kind, tool, found)
                assert found["torch-emu"] == compat.wheel.filename.split("-")[1], (kind, tool, found)
                assert installed_is_ours(site, wheels / compat.wheel.path, compat.wheel.sha256), (kind, tool)
                assert installed_is_ours(site, wheels / compat.sdk_wheel.path, compat.sdk_wheel.sha256)
                assert inside("python -m pip uninstall -y torch-emu emu-driver", clean).returncode == 0
                assert {"torch-emu", "emu-driver"}.isdisjoint(installed_versions(site)), (kind, tool)
