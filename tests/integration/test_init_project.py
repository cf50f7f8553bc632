"""`torch-buildmatrix init` on a small setup.py project, as an adopter runs it: the command line reads the project
(never running its setup.py), and the matrix.yaml it writes loads through the real loader with the project's name and
version, relabel, the torch pin its build passes and ninja, each with the comment that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_buildmatrix.model.contract import TorchPin
from torch_buildmatrix.model.loader import load_matrix

from conftest import run_cli

SETUP_PY = """\
import pathlib
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

__version__ = "0.7.1"
pathlib.Path("RAN").write_text("setup.py was run")  # init reads this file; running it would leave RAN behind

setup(
    name="tiny_scatter",
    version=__version__,
    install_requires=[],
    ext_modules=[CppExtension("tiny_scatter._C", ["csrc/ops.cpp"])],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
    packages=["tiny_scatter"],
)
"""


@pytest.mark.integration
def test_init_reads_a_setup_py_project_and_writes_a_matrix_that_loads(tmp_path: Path) -> None:
    project = tmp_path / "unpacked-sdist"
    (project / "csrc").mkdir(parents=True)
    (project / "tiny_scatter").mkdir()
    (project / "setup.py").write_text(SETUP_PY)
    (project / "csrc" / "ops.cpp").write_text("// ops\n")
    (project / "tiny_scatter" / "__init__.py").write_text("")
    (project / "test").mkdir()
    (project / "test" / "test_ops.py").write_text("def test_nothing() -> None:\n    pass\n")

    done = run_cli(project, "init", timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (project / "RAN").exists()
    matrix = load_matrix(project / "matrix.yaml")
    assert (matrix.plugin.distribution, str(matrix.plugin.version)) == ("tiny_scatter", "0.7.1")
    assert matrix.plugin.smoke_tests == project / "test"
    build, check = matrix.contract.build, matrix.contract.check
    assert build.relabel and build.version_env is None
    assert not build.ninja and build.parallel_extensions  # its setup.py turns ninja off, as torch-scatter's does
    assert check.torch_pin == TorchPin.NONE
    text = (project / "matrix.yaml").read_text()
    assert "# setup.py fixes the version (0.7.1): the wheel is" in text
    assert "# the metadata names no torch: nothing ties a wheel to its torch release" in text
    assert "# setup.py turns ninja off (use_ninja=False)" in text
