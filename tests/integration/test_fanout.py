"""The GitHub Actions fan-out, simulated here: separate clones each make one build of the plan, then separate clones
each test one cell with its build's artifact (--prebuilt), sharing nothing but the uv cache and ccache; the cells'
wheels/ trees are merged with merge-results exactly as the workflow's merge job does, and the published site must
equal, in wheels, hashes and table, the one a single machine builds.

The tiny fixture runs by default with the integration tests; the real plugin on the torch 2.13 cells is marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from site_compare import assert_same_site, without_times

from conftest import SHORT_DEEP_TIER, TINY_CONTRACT, copy_project

pytestmark = pytest.mark.integration

REPO = Path(__file__).parents[2]
FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
# The project's torch 2.13 source as matrix.yaml declares it: PyTorch's CPU index, mirrored by pip's find-links here.
TINY_MATRIX = """\
schema-version: 2
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["1.4", "2.1"]}
python: ["3.11"]
torch:
  - version: "2.13.0"
    variant: cpu
    wheels: {index: "https://download.pytorch.org/whl/cpu", local-find-links: pip-config}
runner: local
"""
TINY_CELLS = ["torch2.13-cpu-cp311-drv1", "torch2.13-cpu-cp311-drv2"]


def cli(root: Path, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """`python -m torch_buildmatrix ...` in a clone, with this checkout's package, as a CI step runs `nox -s ...`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
        env=env,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def make_origin(root: Path) -> Path:
    """A git repository of the project, the one every CI machine checks out."""
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "project")
    return root


def clone(origin: Path, dest: Path) -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(dest))
    return dest


@dataclass
class FanOut:
    plan: list[dict[str, str]]  # the cells' entries
    builds: list[dict[str, str]]  # the builds' entries
    machines: list[Path]  # one clone per cell
    artifacts: list[Path]  # what each machine uploaded, as the merge job downloads it
    merger: Path  # the merge job's clone: merged wheels/ and the site
    single: Path  # one machine building every cell
    seconds: dict[str, float]


def fan_out(origin: Path, work: Path) -> FanOut:
    """Plan, make each build and test each cell in its own clone, merge as the workflow does; and one single-machine
    build to compare."""
    seconds: dict[str, float] = {}
    planner = clone(origin, work / "plan")
    matrices = json.loads(ok(cli(planner, "matrix", "--github")))
    plan, builds = matrices["cells"]["include"], matrices["builds"]["include"]
    for entry in builds:
        start = time.monotonic()
        machine = clone(origin, work / "builders" / entry["build"])
        ok(cli(machine, "build", *entry["args"].split(), "--runner", "local"))
        seconds[f"build {entry['build']}"] = time.monotonic() - start
        # upload-artifact of wheels/ (without site/)
        shutil.copytree(machine / "wheels", work / "uploads" / entry["artifact"], ignore=shutil.ignore_patterns("site"))
    machines, artifacts = [], []
    for entry in plan:
        start = time.monotonic()
        machine = clone(origin, work / "machines" / entry["cell"])
        # download-artifact of its build, by name, into wheels/
        shutil.copytree(work / "uploads" / entry["build_artifact"], machine / "wheels")
        ok(cli(machine, "build", *entry["args"].split(), "--runner", "local"))
        seconds[entry["cell"]] = time.monotonic() - start
        # upload-artifact of wheels/ (without site/), then download-artifact into artifacts/<name>/
        artifact = work / "artifacts" / entry["artifact"]
        shutil.copytree(machine / "wheels", artifact, ignore=shutil.ignore_patterns("site", ".site*"))
        machines.append(machine)
        artifacts.append(artifact)
    merger = clone(origin, work / "merger")
    start = time.monotonic()
    ok(cli(merger, "merge-results", *map(str, artifacts), "--into", "wheels"))
    ok(cli(merger, "compat-table"))
    seconds["merge+publish"] = time.monotonic() - start
    single = clone(origin, work / "single")
    start = time.monotonic()
    ok(cli(single, "build", "--runner", "local"))
    ok(cli(single, "compat-table"))
    seconds["single machine"] = time.monotonic() - start
    return FanOut(plan, builds, machines, artifacts, merger, single, seconds)


def assert_same_fanout(fanned: Path, single: Path) -> None:
    assert_same_site(fanned / "wheels" / "site", single / "wheels" / "site")
    assert without_times(fanned / "docs" / "compatibility.md") == without_times(single / "docs" / "compatibility.md")


def assert_conflict_refused(fan: FanOut, work: Path) -> None:
    """The single machine built the first cell too: its record differs (other times), so merging both is refused."""
    into = work / "conflict" / "wheels"
    result = cli(fan.merger, "merge-results", str(fan.artifacts[0]), str(fan.single / "wheels"), "--into", str(into))
    assert result.returncode == 11, result.stdout + result.stderr
    cell = fan.plan[0]["cell"]
    assert f"cell {cell}: {fan.artifacts[0]} and {fan.single / 'wheels'} hold different records" in result.stderr
    assert "nothing was merged" in result.stderr
    assert not into.exists()


@pytest.fixture(scope="module")
def tiny_fanout(tmp_path_factory: pytest.TempPathFactory) -> tuple[FanOut, Path]:
    work = tmp_path_factory.mktemp("fanout")
    origin = work / "origin"
    shutil.copytree(FIXTURE, origin)
    (origin / "matrix.yaml").write_text(TINY_MATRIX + TINY_CONTRACT)
    with (origin / "README.md").open("a") as readme:  # where compat-table puts the table
        readme.write("\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    (origin / ".gitignore").write_text("/build/\n/wheels/\n")
    make_origin(origin)
    return fan_out(origin, work), work


def test_each_clone_tests_only_its_cell_with_its_build(tiny_fanout: tuple[FanOut, Path]) -> None:
    fan, work = tiny_fanout
    assert [e["cell"] for e in fan.plan] == TINY_CELLS
    assert [e["build"] for e in fan.builds] == TINY_CELLS  # the tiny plugin is a C extension: a build per Python
    for entry in fan.builds:  # a build job tests no cell
        assert not list((work / "uploads" / entry["artifact"] / "results").glob("cells/*.json"))
    for entry, machine in zip(fan.plan, fan.machines, strict=True):
        records = sorted(p.stem for p in (machine / "wheels" / "results" / "cells").glob("*.json"))
        assert records == [entry["cell"]]
        log = (machine / "wheels" / "logs" / "builds" / f"{entry['build']}.log").read_text()
        assert log.count("attempt 1") == 1  # the build job's log, downloaded: the cell's machine built nothing


def test_merged_site_equals_the_single_machine_site(tiny_fanout: tuple[FanOut, Path]) -> None:
    fan, _ = tiny_fanout
    merged = json.loads((fan.merger / "wheels" / "results" / "summary.json").read_text())
    assert merged["counts"] == {"passed": 2, "failed": 0}
    assert_same_fanout(fan.merger, fan.single)


def test_conflicting_records_from_two_machines_are_refused(tiny_fanout: tuple[FanOut, Path]) -> None:
    fan, work = tiny_fanout
    assert_conflict_refused(fan, work)


@pytest.mark.slow
def test_real_plugin_fanout_on_the_2_13_cells(tmp_path: Path) -> None:
    """The real plugin, torch 2.13 CPU cells (both drivers): fanned out, merged, and equal to one machine's site."""
    origin = copy_project(tmp_path / "origin", never_published=True)
    (origin / ".gitignore").write_text("/build/\n/wheels/\n")
    # Only the cells this machine can build: torch 2.13 (its CPU wheel is mirrored here), Python 3.11.
    text = (origin / "matrix.yaml").read_text()
    start = text.index("torch:\n")
    end = text.index("\n# Rules")
    block = text[start:end]
    release = block[block.index('  - version: "2.13.0"') :]
    release = release[: release.index("\n  - version:")]
    keep = "torch:\n" + release + "\nexclude: []\ninclude: []\n"
    text = text[:start] + keep + text[text.index("\n# Images") :]
    deep = '    deep: ["-m", "deep"]\n'
    assert deep in text
    text = text.replace(deep, f"    deep: {json.dumps(SHORT_DEEP_TIER)}\n")
    (origin / "matrix.yaml").write_text(text)
    make_origin(origin)
    fan = fan_out(origin, tmp_path)
    assert [e["cell"] for e in fan.plan] == TINY_CELLS  # the same ids: torch2.13-cpu-cp311-drv1/2
    print("fan-out timings (s):", json.dumps({k: round(v, 1) for k, v in fan.seconds.items()}))
    assert_same_fanout(fan.merger, fan.single)
    assert_conflict_refused(fan, tmp_path)
