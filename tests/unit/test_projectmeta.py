"""`init` reads the project: name, version, how the version is made, the torch requirement and ninja, from each of
pyproject.toml, setup.cfg, setup.py (never run) and PKG-INFO; the matrix it writes chooses relabel and the torch pin
from them, says why in a comment, and loads through the real loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_buildmatrix.model.contract import TorchPin
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.projectmeta import read_project
from torch_buildmatrix.starter import project_facts, starter_files, write_starter

SETUP_PY_LITERAL = """
import os
from setuptools import setup
__version__ = '2.1.2'
install_requires = []
open('RAN', 'w').write('setup.py was run')  # reading must never run it
setup(name='torch_scatter', version=__version__, install_requires=install_requires)
"""

# (files, name, version, computed (where, how) or None, torch (where, literal, specifier) or None, requirements known)
CASES = {
    "pyproject static": (
        {"pyproject.toml": '[project]\nname = "fast-ops"\nversion = "1.4.2"\ndependencies = ["numpy"]\n'},
        "fast-ops",
        "1.4.2",
        None,
        None,
        True,
    ),
    "pyproject torch floor": (
        {"pyproject.toml": '[project]\nname = "a"\nversion = "1.0"\ndependencies = ["torch>=2.0"]\n'},
        "a",
        "1.0",
        None,
        ("pyproject.toml's [project]", True, ">=2.0"),
        True,
    ),
    "pyproject setuptools_scm": (
        {
            "pyproject.toml": '[build-system]\nrequires = ["setuptools", "setuptools-scm", "ninja"]\n'
            '[project]\nname = "b"\ndynamic = ["version", "dependencies"]\n[tool.setuptools_scm]\n'
        },
        "b",
        None,
        ("pyproject.toml", "setuptools_scm"),
        ("pyproject.toml's dynamic dependencies", False, ""),
        True,
    ),
    "setup.cfg literal": (
        {"setup.cfg": "[metadata]\nname = c-ops\nversion = 0.3\n[options]\ninstall_requires =\n    torch\n    numpy\n"},
        "c-ops",
        "0.3",
        None,
        ("setup.cfg's install_requires", True, ""),
        True,
    ),
    "setup.cfg attr": (
        {"setup.cfg": "[metadata]\nname = d\nversion = attr: d.__version__\n"},
        "d",
        None,
        ("setup.cfg's [metadata] version", "attr: d.__version__"),
        None,
        True,
    ),
    "setup.py literal": ({"setup.py": SETUP_PY_LITERAL}, "torch_scatter", "2.1.2", None, None, True),
    "setup.py computed": (
        {
            "setup.py": "import torch\nfrom setuptools import setup\nV = open('VERSION').read()\n"
            "setup(name='e', version=V + '.1', install_requires=[f'torch=={torch.__version__}'])\n"
        },
        "e",
        None,
        ("setup.py's version=", "an expression"),
        ("setup.py's install_requires", False, ""),
        True,
    ),
    "setup.py scm, unpacked sdist": (
        {
            "setup.py": "import setuptools\nsetuptools.setup(name='f', use_scm_version=True, **options)\n",
            "PKG-INFO": "Metadata-Version: 2.1\nName: f\nVersion: 3.2.1\nRequires-Dist: torch==2.13.*\n",
        },
        "f",
        "3.2.1",
        ("setup.py's use_scm_version", "setuptools_scm"),
        ("PKG-INFO's Requires-Dist", True, "==2.13.*"),
        True,
    ),
    "PKG-INFO alone": (
        {"PKG-INFO": "Metadata-Version: 2.1\nName: g\nVersion: 0.9\nRequires-Dist: numpy\n"},
        "g",
        "0.9",
        None,
        None,
        True,
    ),
    "nothing": ({"README.md": "hello\n"}, None, None, None, None, False),
}


def make(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_metadata_source_is_read_and_never_run(tmp_path: Path, case: str) -> None:
    files, name, version, computed, torch, known = CASES[case]
    meta = read_project(make(tmp_path, files))
    assert (meta.name.value if meta.name else None) == name
    assert (meta.version.value if meta.version else None) == version
    assert ((meta.computed_version.where, meta.computed_version.value) if meta.computed_version else None) == computed
    assert ((meta.torch.where, meta.torch.literal, meta.torch.specifier) if meta.torch else None) == torch
    assert meta.requirements_known == known
    assert not (tmp_path / "RAN").exists()
    assert not meta.ninja_off


@pytest.mark.parametrize(
    ("case", "relabel", "pin", "says"),
    [
        ("setup.py literal", True, TorchPin.NONE, ["setup.py fixes the version (2.1.2)", "names no torch"]),
        ("pyproject torch floor", True, TorchPin.NONE, ["requires torch>=2.0 of every wheel"]),
        ("pyproject setuptools_scm", True, TorchPin.RELEASE_LINE, ["computes the version (setuptools_scm)"]),
        ("setup.cfg attr", True, TorchPin.NONE, ["computes the version (attr: d.__version__)"]),
        ("setup.py computed", True, TorchPin.RELEASE_LINE, ["setup.py's install_requires is computed"]),
        ("setup.py scm, unpacked sdist", True, TorchPin.NONE, ["(3.2.1, PKG-INFO's)", "torch==2.13.* of every wheel"]),
        ("nothing", False, TorchPin.RELEASE_LINE, ["version-env: "]),
    ],
)
def test_the_written_matrix_chooses_relabel_and_the_pin_and_says_why(
    tmp_path: Path, case: str, relabel: bool, pin: TorchPin, says: list[str]
) -> None:
    root = make(tmp_path, CASES[case][0])
    facts = project_facts(root)
    write_starter(root, starter_files(root, facts), facts)
    text = (root / "matrix.yaml").read_text()
    matrix = load_matrix(root / "matrix.yaml")
    assert matrix.contract.build.relabel is relabel and (matrix.contract.build.version_env is None) is relabel
    assert matrix.contract.check.torch_pin == pin and matrix.contract.build.ninja
    for words in says:
        assert words in " ".join(text.replace("#", " ").split()), words
    ninja = (
        "your [build-system].requires names it"
        if case == "pyproject setuptools_scm"
        else "torch-buildmatrix installs it"
    )
    assert f"# ninja: {ninja}" in text
    if relabel:
        assert "relabel: true" in text and "version-env:" not in text.replace("`version-env:", "")
    assert str(matrix.plugin.version) == (CASES[case][2] or "0.1.0")


def test_a_hostile_value_in_a_file_stays_inside_its_comment(tmp_path: Path) -> None:
    """setup.cfg's version may hold anything; the comment that quotes it keeps to one line and the file loads."""
    make(tmp_path, {"setup.cfg": "[metadata]\nname = h\nversion = attr: h.v\n  @VERSION@\n  relabel: false\n"})
    facts = project_facts(tmp_path)
    write_starter(tmp_path, starter_files(tmp_path, facts), facts)
    assert load_matrix(tmp_path / "matrix.yaml").contract.build.relabel
