"""The adopters' guide, followed on a published extension nobody here wrote: torch-scatter 2.1.2's sdist from the
registry, built for torch 2.13 (a release its authors publish no wheel for) on the cheap CPU cell.

Its setup.py imports torch at build time and fixes its own version, its install_requires names no torch, and its sdist
carries no tests: they are in its repository (test/ at tag 2.1.2). Give that directory in BUILDMATRIX_SCATTER_TESTS
to run its own suite as the smoke test; without it, a short suite of ours checks the installed wheel against torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from buildmatrix.builder.wheelcheck import read_metadata

from conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The guide's matrix.yaml for it (docs/guide/use-buildmatrix.md, "Worked example").
MATRIX = """\
schema-version: 2
plugin:
  distribution: torch-scatter
  version: 2.1.2
  source: torch_scatter-2.1.2
  smoke-tests: torch_scatter-2.1.2/test
  label: "pt{torch_nodot}{variant}"
python: ["3.11"]
torch:
  - version: "2.13.0"
    variant: cpu
    python: ["3.11"]
    wheels:
      index: https://download.pytorch.org/whl/cpu
      local-find-links: pip-config
build:
  relabel: true
  requires: ["setuptools>=64", "wheel"]
  env: {FORCE_ONLY_CPU: "1"}
  parallel-extensions: true
check:
  torch-pin: none
smoke:
  requires: ["pytest"]
runner: local
"""

OUR_SMOKE = """
import torch
import torch_scatter


def test_scatter_reductions_match_torch() -> None:
    src = torch.tensor([1.0, 3.0, 2.0, 4.0, 5.0, 6.0])
    index = torch.tensor([0, 1, 0, 1, 1, 3])
    for reduce, torch_reduce in (("sum", "sum"), ("mean", "mean"), ("max", "amax"), ("min", "amin")):
        expected = torch.zeros(4).scatter_reduce(0, index, src, torch_reduce, include_self=False)
        torch.testing.assert_close(torch_scatter.scatter(src, index, dim=0, dim_size=4, reduce=reduce), expected)


def test_segment_csr_and_gradient() -> None:
    src = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    ptr = torch.tensor([0, 2, 5, 6])
    assert torch.autograd.gradcheck(lambda s: torch_scatter.segment_csr(s, ptr, reduce="sum"), (src,))
"""


def test_a_published_sdist_builds_for_a_release_it_has_no_wheel_for(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    assert uv is not None
    # The guide's download step: pip prepares the sdist's metadata with its setup.py, which imports torch.
    tools = tmp_path / "tools"
    subprocess.run([uv, "venv", "--quiet", "--seed", "--python", "3.11", str(tools)], check=True)
    python = str(tools / "bin" / "python")
    # Any torch serves here (setup.py only imports it): pip's configured sources first (a local mirror), else
    # PyTorch's CPU index.
    install = [python, "-m", "pip", "install", "--quiet", "torch==2.13.0+cpu", "setuptools"]
    if subprocess.run(install, check=False).returncode != 0:
        subprocess.run([*install, "--extra-index-url", "https://download.pytorch.org/whl/cpu"], check=True)
    project = tmp_path / "scatter-wheels"
    project.mkdir()
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            "torch-scatter==2.1.2",
            "-d",
            str(project),
        ],
        check=True,
    )
    (sdist,) = project.glob("torch_scatter-2.1.2.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(project, filter="data")
    source = project / "torch_scatter-2.1.2"
    assert (source / "setup.py").is_file() and not (source / "test").exists()
    own_tests = os.environ.get("BUILDMATRIX_SCATTER_TESTS")
    if own_tests:
        shutil.copytree(own_tests, source / "test")
    else:
        (source / "test").mkdir()
        (source / "test" / "test_smoke.py").write_text(textwrap.dedent(OUR_SMOKE))
    (project / "matrix.yaml").write_text(MATRIX)

    result = run_cli(project, "build", "--torch", "2.13", "--jobs", "1", timeout=5400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = (project / "wheels" / "torch2.13").glob("*.whl")
    assert wheel.name.startswith("torch_scatter-2.1.2+pt213cpu-cp311-cp311-")
    assert read_metadata(wheel)["Version"] == ["2.1.2+pt213cpu"]
    with zipfile.ZipFile(wheel) as archive:
        assert [n for n in archive.namelist() if n.startswith("torch_scatter/_scatter_cpu")]
