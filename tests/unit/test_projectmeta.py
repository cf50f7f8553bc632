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


# ---- the guide's worked example: an unpacked sdist beside the matrix (issue 37) -------------------------------------

SDIST = "torch_scatter-2.1.2"
SETUP_PY_NINJA_OFF = SETUP_PY_LITERAL.replace(
    "install_requires=install_requires)",
    "install_requires=install_requires,\n"
    "      cmdclass={'build_ext': BuildExtension.with_options(no_python_abi_suffix=True, use_ninja=False)})",
)


def test_init_reads_the_source_it_is_given_not_the_directory_holding_it(tmp_path: Path) -> None:
    """The guide's layout: matrix.yaml in scatter-wheels/, the sdist unpacked in it (`--source torch_scatter-2.1.2`).
    The source's files say what the project is; the directory around it says nothing (it was read before: the
    directory's name, 0.1.0, version-env and release-line, none of which builds)."""
    root = tmp_path / "scatter-wheels"
    (root / SDIST).mkdir(parents=True)
    (root / SDIST / "setup.py").write_text(SETUP_PY_NINJA_OFF)
    (root / SDIST / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: torch_scatter\nVersion: 2.1.2\n")
    facts = project_facts(root, source=SDIST)
    write_starter(root, starter_files(root, facts), facts)
    assert not (root / SDIST / "RAN").exists() and not (root / "RAN").exists()
    matrix = load_matrix(root / "matrix.yaml")
    assert (matrix.plugin.distribution, str(matrix.plugin.version)) == ("torch_scatter", "2.1.2")
    build, check = matrix.contract.build, matrix.contract.check
    assert build.relabel and build.version_env is None
    assert not build.ninja and build.parallel_extensions
    assert check.torch_pin == TorchPin.NONE
    text = (root / "matrix.yaml").read_text()
    assert f"# {SDIST}/setup.py fixes the version (2.1.2): the wheel is" in text
    assert f"# {SDIST}/setup.py turns ninja off (use_ninja=False)" in text
    assert "# the metadata names no torch: nothing ties a wheel" in text


@pytest.mark.parametrize(
    ("readme", "published", "comment"),
    [
        (None, None, "# there is no README.md here, so compat-table writes no README table"),
        ("# torch-scatter\n", None, "# README.md has no pair of compat-table markers, so compat-table writes no"),
        ("# mine\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n", Path("README.md"), "readme: README.md"),
        ("<!-- compat-table:end -->\n<!-- compat-table:start -->\n", None, "README.md has no pair of compat-table"),
    ],
)
def test_init_writes_a_readme_table_only_where_the_readme_holds_the_markers(
    tmp_path: Path, readme: str | None, published: Path | None, comment: str
) -> None:
    """compat-table stops (exit 2) on a README without the marker pair: an sdist's README (torch-scatter's) has
    none, so init switches the block off, says how to have it, and compat-table publishes on the first try."""
    (tmp_path / "setup.py").write_text(SETUP_PY_LITERAL)
    if readme is not None:
        (tmp_path / "README.md").write_text(readme)
    facts = project_facts(tmp_path)
    write_starter(tmp_path, starter_files(tmp_path, facts), facts)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert matrix.contract.publish_readme == published
    assert matrix.contract.publish_own_names == ()  # init cannot know the name is the project's own: a comment
    text = (tmp_path / "matrix.yaml").read_text()
    assert comment in text and '  # own-names: ["torch_scatter"]' in text
    publish = text[text.index("\npublish:") :].splitlines()
    assert max(map(len, publish)) <= 120, publish


def test_the_cpu_release_takes_torch_from_pip_s_find_links_where_they_hold_it(tmp_path: Path) -> None:
    """A machine that cannot reach PyTorch's index (offline, a mirror in pip.conf) lists and builds the cells of the
    matrix init wrote; where pip's find-links lack the release, the index is read as before."""
    facts = project_facts(tmp_path)
    write_starter(tmp_path, starter_files(tmp_path, facts), facts)
    (cpu,) = [r for r in load_matrix(tmp_path / "matrix.yaml").torch if r.variant == "cpu"]
    assert cpu.wheels.location == "https://download.pytorch.org/whl/cpu"
    assert cpu.wheels.local_find_links == "pip-config"
