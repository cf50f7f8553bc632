"""The declared plugin contract: matrix.yaml's build, check and smoke settings, read once and used by the builder."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from fake_wheels import make_wheel
from packaging.version import Version

from torch_buildmatrix.builder.relabel import relabel_wheel
from torch_buildmatrix.builder.sdkwheels import verify_wheel
from torch_buildmatrix.builder.smoke import pytest_args
from torch_buildmatrix.builder.toolenv import build_requirements, project_build_requires, torch_constraints
from torch_buildmatrix.builder.wheelcheck import check_plugin_wheel, read_metadata
from torch_buildmatrix.errors import MatrixError, StepFailed
from torch_buildmatrix.model.builds import Build, plan_builds
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.contract import (
    README_END,
    README_START,
    CheckContract,
    SmokeContract,
    TorchPin,
    readme_block,
)
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python

from conftest import VALID, WriteMatrix, run_cli

V010 = Version("0.1.0")


def test_without_a_contract_the_tool_assumes_nothing_of_the_project(write_matrix: WriteMatrix) -> None:
    contract = load_matrix(write_matrix()).contract
    assert contract.build.version_file is None and contract.build.version_env is None
    assert contract.build.requires == () and contract.build.project_requires and not contract.build.relabel
    assert contract.check.build_info is None and contract.check.torch_pin == TorchPin.RELEASE_LINE
    assert contract.smoke.args == () and contract.smoke.requirements == ("pytest",)


def test_declared_values_are_read(write_matrix: WriteMatrix) -> None:
    contract = load_matrix(
        write_matrix(
            VALID
            + "build:\n  version-env: MY_VERSION\n  sdk-version-env: MY_SDK\n  requires: [ninja]\n"
            + '  env: {FORCE_ONLY_CPU: "1"}\n  relabel: true\n  project-requires: false\n'
            + "check: {torch-pin: none, build-info: my_ext/_info.py, build-info-torch: BUILT_WITH}\n"
            + 'smoke: {requires: ["pytest>=8", hypothesis], args: ["-k", "not slow", "--feat={features}"]}\n'
        )
    ).contract
    assert contract.build.environment(Version("1.0+x.1"), "2.2") == {
        "FORCE_ONLY_CPU": "1",
        "MY_VERSION": "1.0+x.1",
        "MY_SDK": "2.2",
    }
    assert contract.build.requires == ("ninja",) and contract.build.relabel and not contract.build.project_requires
    assert contract.check == CheckContract(TorchPin.NONE, "my_ext/_info.py", "BUILT_WITH")
    assert contract.smoke.requirements == ("pytest>=8", "hypothesis")  # pytest named already: not added again
    assert contract.smoke.reports_features and contract.smoke.pytest_args("/f.json") == [
        "-k",
        "not slow",
        "--feat=/f.json",
    ]


def test_smoke_requirements_can_depend_on_the_torch_release(write_matrix: WriteMatrix) -> None:
    smoke = load_matrix(
        write_matrix(
            VALID
            + "smoke:\n  requires: [numpy]\n  requires-for:\n"
            + '    - {torch: "<2.6", requires: ["transformers==4.57.6"]}\n'
            + '    - {torch: "2.13", requires: ["transformers==5.24.0; python_version >= \'3.11\'", tokenizers]}\n'
        )
    ).contract.smoke
    gil = Python.parse("3.11")
    assert smoke.requirements_for(Version("2.4.1"), gil) == ("pytest", "numpy", "transformers==4.57.6")
    assert smoke.requirements_for(Version("2.13.0+cpu"), gil) == (
        "pytest",
        "numpy",
        "transformers==5.24.0; python_version >= '3.11'",
        "tokenizers",
    )
    assert smoke.requirements_for(Version("2.14.1"), gil) == ("pytest", "numpy")
    # A rule without free-threaded: counts on both builds.
    assert smoke.requirements_for(Version("2.4.1"), Python.parse("3.13t"))[-1] == "transformers==4.57.6"


def test_smoke_requirements_can_leave_out_free_threaded_pythons(write_matrix: WriteMatrix) -> None:
    """A package with no free-threaded wheel (tokenizers' abi3 ones) is left out of the 3.13t cells' environment only;
    a rule for free-threaded Pythons only adds to them alone."""
    smoke = load_matrix(
        write_matrix(
            VALID
            + "smoke:\n  requires: [numpy]\n  requires-for:\n"
            + '    - {torch: ">=2.6", free-threaded: false, requires: ["transformers==5.24.0"]}\n'
            + '    - {torch: ">=2.6", free-threaded: true, requires: ["ft-only"]}\n'
        )
    ).contract.smoke
    assert smoke.requirements_for(Version("2.8.0"), Python.parse("3.13")) == ("pytest", "numpy", "transformers==5.24.0")
    assert smoke.requirements_for(Version("2.8.0"), Python.parse("3.13t")) == ("pytest", "numpy", "ft-only")
    assert smoke.requirements_for(Version("2.5.1"), Python.parse("3.13t")) == ("pytest", "numpy")


BAD = [
    ("build:\n  version-file: /etc/passwd\n", "build.version-file", "not a relative path inside the tree"),
    ("build:\n  version-file: ../outside\n", "build.version-file", "not a relative path inside the tree"),
    ("build:\n  version-env: 1ABC\n", "build.version-env", "not a variable name"),
    ("build:\n  requires: ['not a requirement !!']\n", "build.requires[0]", "is not a requirement (PEP 508"),
    ("build:\n  requires: ninja\n", "build.requires", "expected a list"),
    ("build:\n  relabel: yes-please\n", "build.relabel", "is not allowed (allowed: true, false)"),
    ("build:\n  env: {FORCE_CUDA: 0}\n", "build.env.FORCE_CUDA", "expected a non-empty string"),
    ("build:\n  versoin-file: V\n", "build.versoin-file", "did you mean 'version-file'?"),
    ("check:\n  torch-pin: exact\n", "check.torch-pin", "allowed: release-line, none"),
    ("smoke:\n  args: [--x, 3]\n", "smoke.args[1]", "expected a non-empty string"),
    ("smoke:\n  requires: ['pytest ==']\n", "smoke.requires[0]", "is not a requirement"),
    ("smoke:\n  requires-for: [{requires: [x]}]\n", "smoke.requires-for[0]", "torch"),
    ("smoke:\n  requires-for: [{torch: '>=2.6'}]\n", "smoke.requires-for[0]", "requires"),
    (
        "smoke:\n  requires-for: [{torch: '>=2.6', requires: ['x ==']}]\n",
        "smoke.requires-for[0].requires[0]",
        "is not a requirement",
    ),
    ("smoke:\n  requires-for: [{torch: 'soon', requires: [x]}]\n", "smoke.requires-for[0].torch", "soon"),
    (
        "smoke:\n  requires-for: [{torch: '2.6', requires: [x], python: '3.11'}]\n",
        "smoke.requires-for[0].python",
        "allowed",
    ),
    (
        "smoke:\n  requires-for: [{torch: '2.6', requires: [x], free-threaded: 'no'}]\n",
        "smoke.requires-for[0].free-threaded",
        "(allowed: true, false)",
    ),
    ("patches: nowhere\n", "patches", "directory 'nowhere' does not exist"),
    (
        'images:\n  b: {base: "debootstrap:bookworm", python: ["3.11"], layer: docker/none.Dockerfile}\n',
        "images.b.layer",
        "file 'docker/none.Dockerfile' does not exist",
    ),
    (
        'images:\n  b: {base: "debootstrap:bookworm", python: ["3.11"], layer: /etc/hostname}\n',
        "images.b.layer",
        "is outside the project",
    ),
    (
        'images:\n  b: {base: "debootstrap:bookworm", python: ["3.11"], context: plugin}\n',
        "images.b.context",
        "a context is for `layer` or `dockerfile`",
    ),
    (
        'images:\n  b: {base: "debootstrap:bookworm", python: ["3.11"], build-args: {V: 2.0}}\n',
        "images.b.build-args.V",
        "expected a non-empty string",
    ),
]


@pytest.mark.parametrize(("extra", "key", "message"), BAD)
def test_bad_contract_settings_are_located_errors(
    write_matrix: WriteMatrix, extra: str, key: str, message: str
) -> None:
    path = write_matrix(VALID + extra)
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    problems = [p for p in info.value.problems if p.key == key]
    assert problems and message in problems[0].message, info.value.problems
    assert problems[0].line is not None and problems[0].line > VALID.count("\n")


def test_a_bad_setting_stops_every_command_with_exit_3_and_writes_nothing(write_matrix: WriteMatrix) -> None:
    path = write_matrix(VALID + "smoke:\n  args: [--x, 3]\n")
    before = sorted(p.relative_to(path.parent) for p in path.parent.rglob("*"))
    result = run_cli(path.parent, "build", "--torch", "2.13", timeout=120)
    assert result.returncode == 3 and "matrix.yaml:" in result.stderr and "smoke.args[1]" in result.stderr
    assert sorted(p.relative_to(path.parent) for p in path.parent.rglob("*")) == before


def test_build_requirements_join_the_declared_ones_and_the_projects_own(write_matrix: WriteMatrix) -> None:
    path = write_matrix(VALID + "build: {requires: [ninja, wheel]}\n")
    (path.parent / "plugin" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64", "wheel", "torch>=2", "emu-driver", "pybind11"]\n'
    )
    matrix = load_matrix(path)
    # torch and the driver come from the cell; the rest is installed, each once.
    assert build_requirements(matrix) == ("ninja", "wheel", "setuptools>=64", "pybind11")
    off = load_matrix(write_matrix(VALID + "build: {requires: [ninja], project-requires: false}\n"))
    assert build_requirements(off) == ("ninja",)


def test_a_project_without_pyproject_gets_setuptools_defaults(tmp_path: Path) -> None:
    assert project_build_requires(tmp_path) == ("setuptools>=40.8.0", "wheel")
    (tmp_path / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    assert project_build_requires(tmp_path) == ("setuptools>=40.8.0", "wheel")


def test_torch_facts_are_constraints_not_requirements() -> None:
    assert torch_constraints(Version("2.1.2")) == ("setuptools<80", "numpy<2")
    assert torch_constraints(Version("2.3.1")) == ("numpy<2",)
    assert torch_constraints(Version("2.13.0")) == ()


def test_smoke_arguments_come_from_the_matrix(tmp_path: Path) -> None:
    plain = pytest_args(tmp_path / "t", tmp_path / "j.xml", tmp_path / "f.json", SmokeContract())
    assert not any("features" in a for a in plain) and f"--junitxml={tmp_path / 'j.xml'}" in plain
    declared = pytest_args(
        tmp_path / "t", tmp_path / "j.xml", tmp_path / "f.json", SmokeContract(args=("--f={features}",))
    )
    assert declared[-1] == f"--f={tmp_path / 'f.json'}"


def _cell(write_matrix: WriteMatrix) -> Build:
    """The build of the first torch 2.4 cell (the wheel check is a build's)."""
    matrix = load_matrix(write_matrix())
    cell = next(
        c for c in expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch}) if c.id.startswith("torch2.4")
    )
    return plan_builds(matrix, [cell])[cell.build.id]


def test_the_torch_pin_and_build_info_are_checked_only_where_declared(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    cell = _cell(write_matrix)
    assert cell.sdk is not None
    driver_pin = f"emu-driver>={cell.sdk.version},<{cell.sdk.major + 1}"
    wheel = make_wheel(tmp_path, "my-ext", f"0.1.0+{cell.local_version_label}", requires=[driver_pin])
    none = CheckContract(TorchPin.NONE)
    assert check_plugin_wheel(wheel, cell, "my-ext", "emu-driver", plugin_version=V010, check=none).build_info == {}
    with pytest.raises(StepFailed, match=r"torch-pin"):
        check_plugin_wheel(wheel, cell, "my-ext", "emu-driver", plugin_version=V010, check=CheckContract())
    info = CheckContract(TorchPin.NONE, "my_ext/_info.py")
    with pytest.raises(StepFailed, match=r"has no my_ext/_info.py \(matrix.yaml: check.build-info\)"):
        check_plugin_wheel(wheel, cell, "my-ext", "emu-driver", plugin_version=V010, check=info)


def test_relabel_gives_the_wheel_the_cells_version(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "torch-scatter", "2.1.2", tag="cp311-cp311-linux_x86_64", requires=["numpy"])
    out = relabel_wheel(wheel, Version("2.1.2+pt2.13"), tmp_path / "out")
    assert out.name == "torch_scatter-2.1.2+pt2.13-cp311-cp311-linux_x86_64.whl"
    assert verify_wheel(out) == ""
    assert read_metadata(out)["Version"] == ["2.1.2+pt2.13"] and read_metadata(out)["Requires-Dist"] == ["numpy"]
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        record = archive.read("torch_scatter-2.1.2+pt2.13.dist-info/RECORD").decode()
    assert not [n for n in names if "2.1.2.dist-info" in n]
    for name in names:
        assert name in record
    assert wheel.is_file()  # the original stays (the engine publishes the relabeled copy)


def test_relabel_refuses_another_public_version(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "torch-scatter", "2.1.2")
    with pytest.raises(StepFailed, match=r"plugin.version must be 2.1.2 \(matrix.yaml says 2.2.0\)"):
        relabel_wheel(wheel, Version("2.2.0+pt2.13"), tmp_path / "out")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_the_source_may_be_the_project_itself_and_its_copy_leaves_out_the_workspace(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    from torch_buildmatrix.builder.sourcetree import copy_pristine

    path = write_matrix(
        VALID.replace("  source: plugin\n  smoke-tests: plugin/tests", "  source: .\n  smoke-tests: plugin/tests")
    )
    root = path.parent
    for name in ("setup.py", "wheels/torch2.13/x.whl", "build/cells/c/log", "csrc/a.cpp", ".venv/bin/python"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    matrix = load_matrix(path)
    assert matrix.plugin.source.resolve() == root.resolve()
    copy = copy_pristine(matrix.plugin.source, tmp_path / "copy")
    copied = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
    assert "setup.py" in copied and "csrc/a.cpp" in copied and "matrix.yaml" in copied
    assert not [c for c in copied if c.startswith(("wheels/", "build/", ".venv/"))]
    with pytest.raises(MatrixError, match=r"sdk.source: '\.' is the project itself"):
        load_matrix(write_matrix(VALID.replace("  source: driver", "  source: .")))


def test_generated_files_are_no_cell_input(tmp_path: Path) -> None:
    from torch_buildmatrix.builder.sourcetree import copy_pristine
    from torch_buildmatrix.util.fingerprint import tree_hash

    tree = tmp_path / "src"
    (tree / "pkg").mkdir(parents=True)
    (tree / "setup.py").write_text("setup()\n")
    generated = frozenset({"_build_info.py", "VERSION"})
    before = tree_hash(tree, generated=generated)
    (tree / "pkg" / "_build_info.py").write_text("TORCH_VERSION = '2.13.0'\n")  # what a local build leaves
    (tree / "VERSION").write_text("0.1.0+x\n")
    assert tree_hash(tree, generated=generated) == before != tree_hash(tree)
    copy = copy_pristine(tree, tmp_path / "copy", generated)
    assert sorted(p.name for p in copy.rglob("*") if p.is_file()) == ["setup.py"]


def test_probe_interfaces_need_both_keys(write_matrix: WriteMatrix) -> None:
    with pytest.raises(MatrixError) as info:
        load_matrix(write_matrix(VALID + "probe:\n  interfaces:\n    - {prefix: csrc/}\n"))
    assert [(p.key, p.message) for p in info.value.problems] == [
        ("probe.interfaces[0]", "missing required key 'interface'")
    ]


def test_the_docs_go_where_publish_says(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    from torch_buildmatrix.publish.docs import DocsLayout, read_docs_table, rendered_docs, write_docs
    from torch_buildmatrix.publish.table import CompatTable

    from conftest import REPO

    path = write_matrix(VALID + "publish: {readme: docs/index.md, docs: site/compat}\n")
    layout = DocsLayout.of(load_matrix(path))
    assert layout.readme is not None
    assert (layout.readme, layout.table, layout.markdown) == (
        Path("docs/index.md"),
        Path("site/compat/compatibility.json"),
        Path("site/compat/compatibility.md"),
    )
    root = path.parent
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# My ext\n<!-- compat-table:start -->\nold\n<!-- compat-table:end -->\n")
    table = CompatTable.from_json((REPO / "docs" / "compatibility.json").read_text())
    assert set(rendered_docs(table, (root / "docs" / "index.md").read_text(), root / layout.readme, layout)) == {
        layout.readme,
        layout.table,
        layout.markdown,
    }
    written = write_docs(table, root, layout)
    assert sorted(p.relative_to(root) for p in written) == sorted([layout.readme, layout.table, layout.markdown])
    assert "old" not in (root / "docs" / "index.md").read_text()
    assert read_docs_table(root, layout).to_json() == table.to_json()
    assert not (root / "README.md").exists() and not (root / "docs" / "compatibility.json").exists()


def test_the_readme_block_can_be_switched_off(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    from torch_buildmatrix.publish.docs import DocsLayout, docs_of, read_readme
    from torch_buildmatrix.publish.table import CompatTable

    from conftest import REPO

    path = write_matrix(VALID + "publish: {readme: false}\n")
    layout = DocsLayout.of(load_matrix(path))
    assert layout.readme is None and read_readme(path.parent, layout) == ""  # no README read
    table = CompatTable.from_json((REPO / "docs" / "compatibility.json").read_text())
    assert set(docs_of(table, path.parent, layout)) == {layout.table, layout.markdown}
    with pytest.raises(MatrixError) as info:
        load_matrix(write_matrix(VALID + "publish: {readme: true}\n"))
    [problem] = info.value.problems
    assert problem.key == "publish.readme" and "(allowed: a relative path, e.g. README.md, or false)" in problem.message


S, E = README_START, README_END
PAIR = f"README needs exactly one {S} ... {E} pair"
READMES = [  # text, the block's bounds (start marker to end of end marker), what is wrong
    (f"a\n{S}x{E}\nb", (2, 2 + len(S) + 1 + len(E)), ""),
    (f"{S}{E}", (0, len(S) + len(E)), ""),
    ("no markers", None, PAIR),
    (f"{E}x{S}", None, PAIR),  # out of order
    (f"{S}x", None, PAIR),
    (f"x{E}", None, PAIR),
    (f"{S}x{E}{S}y{E}", (0, len(S) + 1 + len(E)), PAIR),  # two blocks: the first, but publishing refuses
    (f"{S}{S}x{E}", (0, 2 * len(S) + 1 + len(E)), PAIR),
    (f"{E}{S}x{E}", None, PAIR),  # the first end marker comes before the start marker
]


@pytest.mark.parametrize(("readme", "bounds", "problem"), READMES)
def test_the_readme_block_is_the_first_ordered_pair_and_good_only_alone(
    readme: str, bounds: tuple[int, int] | None, problem: str
) -> None:
    block = readme_block(readme)
    assert (block.bounds, block.problem) == (bounds, problem)
    if bounds is not None:
        assert readme[bounds[0] :].startswith(S) and readme[: bounds[1]].endswith(E)


def test_the_look_alike_note_names_the_projects_own_packages() -> None:
    from dataclasses import replace

    from torch_buildmatrix.publish.markdown import look_alike_note
    from torch_buildmatrix.publish.table import CompatTable

    from conftest import REPO

    ours = CompatTable.from_json((REPO / "docs" / "compatibility.json").read_text())
    assert "`torch-emu` and `emu-driver` are not ours" in look_alike_note(ours)  # this repository's own names
    other = replace(ours, plugin="my-ext", sdk=None, cells=())
    note = look_alike_note(other)
    assert "`my-ext` is not ours" in note and "the unpinned commands (your torch release's index" in note
    assert "pip install my-ext" not in note and "emu" not in note  # no bare command to copy: only ones on the page
    assert "the pin carries a local version label, which" in note


def test_own_names_are_the_projects_distributions_and_reach_the_table(write_matrix: WriteMatrix) -> None:
    from torch_buildmatrix.publish.overlay import build_table

    with pytest.raises(MatrixError) as info:
        load_matrix(write_matrix(VALID + 'publish: {own-names: ["torch-emu", "torch-scatter"]}\n'))
    [problem] = info.value.problems
    assert problem.key == "publish.own-names[1]" and "(allowed: torch-emu, emu-driver)" in problem.message
    matrix = load_matrix(write_matrix(VALID + 'publish: {own-names: ["Torch_Emu"]}\n'))
    assert matrix.contract.publish_own_names == ("Torch_Emu",)
    table = build_table(matrix, [], [], {})
    assert table.own_names == ("Torch_Emu",)
    assert "`emu-driver` is not ours" in look_alike_note_of(table) and "`torch-emu`" not in look_alike_note_of(table)


def look_alike_note_of(table: object) -> str:
    from torch_buildmatrix.publish.markdown import look_alike_note
    from torch_buildmatrix.publish.table import CompatTable

    assert isinstance(table, CompatTable)
    return look_alike_note(table)
