"""The local build's environment: a CPU variant's build has the CUDA toolkit hidden (nvcc's PATH entries shadowed by
links to their other programs, CUDA_HOME and CUDA_PATH left out), build.env goes on top and can extend a variable."""

from __future__ import annotations

import os
from pathlib import Path

from torch_buildmatrix.builder.buildenv import build_environment, expand


def toolkit_dir(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "cuda" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("nvcc", "ptxas", "cmake"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_a_cpu_build_has_the_toolkit_hidden_and_keeps_the_other_programs(tmp_path: Path) -> None:
    bin_dir = toolkit_dir(tmp_path)
    inherited = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin", "CUDA_HOME": "/opt/cuda", "CUDA_PATH": "/opt/cuda", "X": "1"}
    made = build_environment(
        inherited, {"MAX_JOBS": "2"}, {"FORCE_ONLY_CPU": "1"}, hide_cuda=True, shadow_root=tmp_path / "shadow"
    )
    env = made.env
    assert "CUDA_HOME" not in env and "CUDA_PATH" not in env and env["X"] == "1" and env["MAX_JOBS"] == "2"
    shadow, rest = env["PATH"].split(os.pathsep)
    assert rest == "/usr/bin" and Path(shadow).parent == tmp_path / "shadow"
    assert sorted(p.name for p in Path(shadow).iterdir()) == ["cmake", "ptxas"]  # nvcc alone is gone
    assert (Path(shadow) / "cmake").resolve() == bin_dir / "cmake"
    assert env["FORCE_ONLY_CPU"] == "1"
    assert f"nvcc in {bin_dir}" in made.notes[0] and "CUDA_HOME=/opt/cuda" in made.notes[0]


def test_other_variants_see_everything_and_build_env_extends_path(tmp_path: Path) -> None:
    bin_dir = toolkit_dir(tmp_path)
    inherited = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin", "CUDA_HOME": "/opt/cuda"}
    cuda = build_environment(inherited, {}, {}, hide_cuda=False, shadow_root=tmp_path / "shadow")
    assert cuda.env == inherited and not cuda.notes and not (tmp_path / "shadow").exists()
    # On a CPU build, the project asks for the toolkit: build.env's values win, ${PATH} is the hidden PATH.
    asked = build_environment(
        inherited,
        {},
        {"CUDA_HOME": "/opt/cuda", "PATH": "/opt/cuda/bin:${PATH}"},
        hide_cuda=True,
        shadow_root=tmp_path / "shadow",
    )
    assert asked.env["CUDA_HOME"] == "/opt/cuda"
    assert asked.env["PATH"] == f"/opt/cuda/bin:{tmp_path / 'shadow' / '0'}{os.pathsep}/usr/bin"
    assert expand("a:${UNSET}:$HOME:${X}", {"X": "x"}) == "a::$HOME:x"  # only ${NAME} is expanded
