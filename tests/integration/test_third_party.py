"""The adopters' guide, followed on a published extension nobody here wrote: torch-scatter 2.1.2's sdist from the
registry, built for torch 2.13 (a release its authors publish no wheel for) on the cheap CPU cell.

The guide's commands, its matrix.yaml and what it says the run prints and leaves are in its checked blocks
(tests/guide_claims.py): the test runs those commands and matrix, and holds every other block against the run.

Its setup.py imports torch at build time and fixes its own version, its install_requires names no torch, and its sdist
carries no tests: they are in its repository (test/ at tag 2.1.2). Give that directory in BUILDMATRIX_SCATTER_TESTS
to run its own suite as the smoke test; without it, a short suite of ours checks the installed wheel against torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest
from guide_claims import GUIDE, SITE, Claim, Run, check, claims, command
from packaging.utils import canonicalize_name

from torch_buildmatrix.builder.wheelcheck import read_metadata
from torch_buildmatrix.model.contract import TorchPin
from torch_buildmatrix.model.loader import load_matrix

from conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# What the test adds to the guide's matrix.yaml: torch from pip's configured sources first (a local mirror), and the
# local runner, so that the cell never waits for a Docker engine.
WHEELS = "    wheels: {index: https://download.pytorch.org/whl/cpu}\n"
LOCAL = "    wheels: {index: https://download.pytorch.org/whl/cpu, local-find-links: pip-config}\n"

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


def download(tmp_path: Path, block: Claim) -> Path:
    """The guide's download step, in a directory of its own: the sdist, unpacked."""
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
    variables, pip_args = command(block, "pip")
    env = {**os.environ, **variables}
    subprocess.run([python, "-m", "pip", *pip_args, "--quiet"], check=True, cwd=project, env=env)
    _, tar_args = command(block, "tar")
    subprocess.run(["tar", *tar_args], check=True, cwd=project)
    return project


def assert_init_writes_the_guides_contract(project: Path, source: str) -> None:
    """The guide says `init --source <sdist>` writes the contract of its checked matrix from the sdist's own files
    (relabel, torch-pin none, ninja off with parallel extensions, no README block): held here, in a scratch copy."""
    scratch = project.parent / "init-scratch"
    shutil.copytree(project, scratch)
    written = run_cli(scratch, "init", "--source", source, timeout=300)
    assert written.returncode == 0, written.stdout + written.stderr
    matrix = load_matrix(scratch / "matrix.yaml")
    assert canonicalize_name(matrix.plugin.distribution) == "torch-scatter" and str(matrix.plugin.version) == "2.1.2"
    contract = matrix.contract
    assert contract.build.relabel and contract.build.version_env is None
    assert not contract.build.ninja and contract.build.parallel_extensions
    assert contract.check.torch_pin == TorchPin.NONE
    assert contract.publish_readme is None
    shutil.rmtree(scratch)


def test_a_published_sdist_builds_for_a_release_it_has_no_wheel_for(tmp_path: Path) -> None:
    guide = GUIDE.read_text()
    blocks = claims(guide)
    project = download(tmp_path, blocks["scatter-download"])
    used = {"scatter-download": blocks["scatter-download"].code()}
    source = project / "torch_scatter-2.1.2"
    assert (source / "setup.py").is_file() and not (source / "test").exists()
    own_tests = os.environ.get("BUILDMATRIX_SCATTER_TESTS")
    if own_tests:
        shutil.copytree(own_tests, source / "test")
    else:
        (source / "test").mkdir()
        (source / "test" / "test_smoke.py").write_text(textwrap.dedent(OUR_SMOKE))
    assert_init_writes_the_guides_contract(project, source.name)
    matrix = blocks["scatter-matrix"].code()
    assert matrix.count(WHEELS) == 1
    (project / "matrix.yaml").write_text(matrix.replace(WHEELS, LOCAL) + "runner: local\n")
    used["scatter-matrix"] = matrix

    _, build_args = command(blocks["scatter-build"], "torch-buildmatrix")
    result = run_cli(project, *build_args, timeout=5400)
    (tmp_path / "build.out").write_text(result.stdout)  # for reading the guide against a kept run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    used["scatter-build"] = blocks["scatter-build"].code()
    wheels = project / "wheels"
    built = [p.relative_to(project).as_posix() for p in wheels.rglob("*") if p.is_file()]
    (wheel,) = (wheels / "torch2.13").glob("*.whl")
    assert wheel.name.startswith("torch_scatter-2.1.2+pt213cpu-cp311-cp311-")
    assert read_metadata(wheel)["Version"] == ["2.1.2+pt213cpu"]
    with zipfile.ZipFile(wheel) as archive:
        assert [n for n in archive.namelist() if n.startswith("torch_scatter/_scatter_cpu")]
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata_text = archive.read(metadata).decode()

    (project / "README.md").write_text(
        "# torch-scatter wheels\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n"
    )
    table = run_cli(project, "compat-table", "--offline", "--site-url", SITE)
    assert table.returncode == 0, table.stdout + table.stderr
    run = Run(
        project,
        cell="torch2.13-cpu-cp311",
        build="torch2.13-cpu-cp311",
        stdout=result.stdout,
        metadata=metadata_text,
        built_files=built,
        used=used,
    )
    assert check(guide, run) == []
