"""Every core busy: a build's compiler runs its share of the cores in parallel (MAX_JOBS with ninja, CMake's level,
setuptools' parallel extensions when declared), and a smoke run is one thread unless the project declares more."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torch_buildmatrix.builder.toolenv import (
    available_cores,
    build_requirements,
    compile_env,
    compiler_share,
    parallel_config,
)
from torch_buildmatrix.errors import MatrixError
from torch_buildmatrix.model.loader import load_matrix

from conftest import VALID, WriteMatrix


@pytest.mark.parametrize(
    ("jobs", "cores", "share"),
    [(1, 2, 2), (2, 2, 1), (3, 2, 1), (2, 8, 4), (3, 8, 2), (1, 1, 1), (4, 1, 1)],
)
def test_each_build_gets_its_share_of_the_cores(jobs: int, cores: int, share: int) -> None:
    assert compiler_share(jobs, cores) == share
    if jobs <= cores:  # never more compiler processes than cores in total while `jobs` builds run at once
        assert jobs * compiler_share(jobs, cores) <= cores


def test_the_share_is_of_the_cores_this_process_may_use() -> None:
    assert compiler_share(1) == available_cores() == len(os.sched_getaffinity(0))


def test_compile_env_sets_every_build_systems_jobs(tmp_path: Path) -> None:
    env = compile_env(tmp_path, 3)
    assert env["MAX_JOBS"] == env["CMAKE_BUILD_PARALLEL_LEVEL"] == "3"
    assert "DIST_EXTRA_CONFIG" not in env and not list(tmp_path.iterdir())
    env = compile_env(tmp_path, 3, parallel_extensions=True)
    config = Path(env["DIST_EXTRA_CONFIG"])
    assert config.parent == tmp_path and config.read_text() == parallel_config(3) == "[build_ext]\nparallel = 3\n"


def test_ninja_joins_the_build_requirements_unless_opted_out_or_named(write_matrix: WriteMatrix) -> None:
    assert build_requirements(load_matrix(write_matrix()))[-1] == "ninja"
    opted_out = load_matrix(write_matrix(VALID + "build: {ninja: false}\n"))
    assert "ninja" not in build_requirements(opted_out)
    named = load_matrix(write_matrix(VALID + 'build: {requires: ["Ninja>=1.11"]}\n'))
    assert [r for r in build_requirements(named) if r.lower().startswith("ninja")] == ["Ninja>=1.11"]


def test_smoke_threads_is_one_unless_declared(write_matrix: WriteMatrix) -> None:
    assert load_matrix(write_matrix()).contract.smoke.threads == 1
    assert load_matrix(write_matrix(VALID + "smoke: {threads: 2}\n")).contract.smoke.threads == 2
    for bad in ("0", "-1", "true", '"2"'):
        with pytest.raises(MatrixError) as caught:
            load_matrix(write_matrix(VALID + f"smoke: {{threads: {bad}}}\n"))
        assert "matrix.yaml" in str(caught.value) and "smoke.threads" in str(caught.value)
        assert "a whole number, 1 or more" in str(caught.value)
