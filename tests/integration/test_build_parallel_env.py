"""A real build of the tiny project gets its share of the cores (MAX_JOBS, CMAKE_BUILD_PARALLEL_LEVEL, setuptools'
parallel extensions when declared) and ninja in its environment, and its smoke run one thread unless declared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torch_buildmatrix.builder.toolenv import available_cores

from conftest import REPO, TINY_CONTRACT

pytestmark = pytest.mark.integration

FIXTURE = REPO / "tests" / "fixtures" / "tiny"

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
)


# Every smoke interpreter caches the bytecode of what it imports, though the builder's environment says not to
# (PYTHONDONTWRITEBYTECODE=1): torch's __init__ has its .pyc in the cell's environment while the suite runs.
WRITES_BYTECODE = {"writes_bytecode": True, "torch_bytecode_on_disk": True}


def build_recording(root: Path, record: Path, *args: str) -> dict[str, dict[str, object]]:
    """A real build of the tiny project whose setup.py and smoke suite write what they were given into `record`."""
    shutil.rmtree(record, ignore_errors=True)
    record.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "TINY_ENV_RECORD": str(record),
        "PYTHONDONTWRITEBYTECODE": "1",  # as CI images set it: the smoke run must write bytecode all the same
    }
    for name in ("MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "OMP_NUM_THREADS", "DIST_EXTRA_CONFIG"):
        env.pop(name, None)  # what the files say comes from the tool, not from this process
    result = subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--force", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=root,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {p.stem: json.loads(p.read_text()) for p in sorted(record.glob("*.json"))}


def test_a_real_build_gets_its_share_of_the_cores_and_ninja(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX)
    cores = available_cores()

    # Two builds at once (driver 1 and 2): half the cores each; ninja from the build environment, not the system's.
    seen = build_recording(root, tmp_path / "record", "--jobs", "2")
    assert sorted(seen) == ["build-drv1", "build-drv2", "smoke-drv1", "smoke-drv2"]
    for driver in ("drv1", "drv2"):
        built = seen[f"build-{driver}"]
        share = str(max(1, cores // 2))
        assert built["MAX_JOBS"] == built["CMAKE_BUILD_PARALLEL_LEVEL"] == share, built
        assert built["build_ext_parallel"] is None  # not declared: with ninja it would race on build.ninja
        build_bin = Path(str(built["python"])).parent
        assert built["ninja"] == str(build_bin / "ninja"), built
        assert seen[f"smoke-{driver}"] == {"OMP_NUM_THREADS": "1", "torch_threads": 1, **WRITES_BYTECODE}

    # One build alone: every core. Without ninja, setuptools builds the extensions that many at a time when declared.
    (root / "matrix.yaml").write_text(
        MATRIX.replace("smoke: {args:", "smoke: {threads: 2, args:").replace(
            "build: {", "build: {ninja: false, parallel-extensions: true, "
        )
    )
    seen = build_recording(root, tmp_path / "record", "--jobs", "1", "--sdk", "2")
    assert sorted(seen) == ["build-drv2", "smoke-drv2"]
    built = seen["build-drv2"]
    assert built["MAX_JOBS"] == built["CMAKE_BUILD_PARALLEL_LEVEL"] == str(cores), built
    assert built["build_ext_parallel"] == cores  # read by setuptools from our DIST_EXTRA_CONFIG file
    build_bin = Path(str(built["python"])).parent
    assert not (build_bin / "ninja").exists() and built["ninja"] != str(build_bin / "ninja")
    assert seen["smoke-drv2"] == {"OMP_NUM_THREADS": "2", "torch_threads": 2, **WRITES_BYTECODE}
