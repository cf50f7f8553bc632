"""The SDK axis is optional and general: a wheel SDK (torch_emu's driver), a system SDK, or none; variants are data,
and the wheel's label comes from a declared template. Every mistake is a located error (exit 3, nothing written)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fake_wheels import cell_result
from packaging.version import Version

from torch_buildmatrix.errors import MatrixError
from torch_buildmatrix.model.cells import Selection, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import HOST, Matrix, TorchRelease
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.advice import install_choice
from torch_buildmatrix.publish.index import index_pages, wheels_to_index
from torch_buildmatrix.publish.markdown import grid, install_section
from torch_buildmatrix.publish.overlay import build_table
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.vocab import SdkKind

from conftest import VALID, WriteMatrix, copy_project, run_cli

P = Python.parse  # a Python of the matrix: P("3.11"), P("3.13t")

V = Version

# The plugin of VALID, with no SDK (cells are torch x Python).
NO_SDK = (
    VALID[: VALID.index("sdk:")].replace('  label: "torch.{torch_minor}.drv.{sdk_major}"\n', "")
    + VALID[VALID.index("python:") :]
)
# A vendor toolkit installed in an image (or on the build machine): nothing is built or published for it.
SYSTEM = NO_SDK.replace(
    "python:",
    textwrap.dedent("""\
    sdk:
      kind: system
      name: toolkit
      title: Toolkit
      id: "tk{sdk_nodot}"
      versions:
        - {version: "3.1", provided-by: bookworm}
        - {version: "3.0", provided-by: host}
      library-dirs: [/opt/toolkit/lib]
    images:
      bookworm: {base: "debootstrap:bookworm", python: ["3.11"]}
    python:"""),
    1,
).replace(
    "  smoke-tests: plugin/tests\n", '  smoke-tests: plugin/tests\n  label: "torch.{torch_minor}.tk.{sdk_nodot}"\n'
)


def offered(matrix: Matrix) -> dict[TorchRelease, set[Python]]:
    return {r: {P("3.9"), P("3.10"), P("3.11")} if r.minor == "2.4" else {P("3.11")} for r in matrix.torch}


def problems(path: Path) -> list[str]:
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    return [str(p) for p in info.value.problems]


# ---- no SDK --------------------------------------------------------------------------------------------------------


def test_no_sdk_cells_are_torch_x_python(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(NO_SDK))
    assert matrix.sdk is None and matrix.sdk_versions == (None,)
    cells = expand(matrix, offered(matrix))
    assert [c.id for c in cells] == [
        "torch2.4-cuda-cp39",
        "torch2.4-cuda-cp310",
        "torch2.4-cuda-cp311",
        "torch2.13-cpu-cp311",
    ]
    assert [c.local_version_label for c in cells][-1] == "torch.2.13"  # the default label: no SDK part
    assert "sdk" not in cells[0].as_dict()
    assert Selection(sdk=("2",)).apply(cells) == []  # an SDK selection selects nothing without an SDK


def test_no_sdk_table_page_and_index_carry_no_sdk_part(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix(NO_SDK))
    cells = expand(matrix, offered(matrix))
    results = [cell_result(cells[-1], wheels_dir=tmp_path / "wheels")]
    table = build_table(matrix, cells, results, offered(matrix))
    assert table.sdk is None and table.sdks == ()
    assert CompatTable.from_json(table.to_json()) == table
    assert "| torch | Python 3.9 |" in grid(table) and "| 2.13.0 (cpu) | — | — | ✓ 90 (2 skipped) |" in grid(table)
    choice = install_choice(table, "torch2.13-cpu", "3.11")
    assert choice.exact and choice.index_command.startswith("pip install torch-emu==0.1.0+torch.2.13 --only-binary")
    assert "Pinned, driver" not in install_section(table) and "emu-driver" not in choice.index_command
    page = site_page(table)
    assert 'id="sdk"' not in page and "Pick your torch release and Python." in page
    assert '"torch2.13-cpu|3.11"' in page  # the selector's key has no SDK part
    paths = [w.path for w in wheels_to_index(table)]
    assert paths == ["torch2.13/torch_emu-0.1.0+torch.2.13-py3-none-any.whl"]
    assert not any("driver" in page.path for page in index_pages(table, []))


# ---- a system SDK --------------------------------------------------------------------------------------------------


def test_system_sdk_versions_name_what_provides_them(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix(SYSTEM))
    assert matrix.sdk is not None and matrix.sdk.kind == SdkKind.SYSTEM and not matrix.sdk.builds_wheel
    assert [(str(v.version), v.tag, v.provided_by) for v in matrix.sdk.versions] == [
        ("3.1", "tk31", "bookworm"),
        ("3.0", "tk30", HOST),
    ]
    assert matrix.sdk.library_dirs == ("/opt/toolkit/lib",) and matrix.sdk.distribution == ""
    cells = expand(matrix, offered(matrix))
    assert cells[-1].id == "torch2.13-cpu-cp311-tk30" and cells[-1].local_version_label == "torch.2.13.tk.30"
    # Passed without any SDK wheel: nothing is published for a system SDK, and install commands pin none.
    results = [cell_result(cells[-1], wheels_dir=tmp_path / "wheels")]
    results[0].sdk_wheel = None
    table = build_table(matrix, cells, results, offered(matrix))
    assert table.sdk is not None and table.sdk.distribution == "" and not table.sdk.publishes_wheels
    choice = install_choice(table, "torch2.13-cpu", "3.11", "tk30")
    assert choice.exact and "==3.0" not in choice.index_command and "--only-binary=:all: " in choice.index_command
    assert "| torch | toolkit |" in grid(table) and '<select id="sdk">' in site_page(table)
    assert [w.path for w in wheels_to_index(table)] == [results[0].wheel.path]  # type: ignore[union-attr]


# ---- variants are data; the label template -----------------------------------------------------------------------

PYG = NO_SDK.replace(
    "  smoke-tests: plugin/tests\n", '  smoke-tests: plugin/tests\n  label: "pt{torch_nodot}{variant}"\n'
).replace(
    '  - version: "2.13.0"\n    variant: cpu\n    wheels: pip-find-links\n',
    '  - version: "2.4.1"\n    variant: cu121\n  - version: "2.4.1"\n    variant: cu118\n'
    "variants:\n  cu121: {wheels: {index: https://download.pytorch.org/whl/cu121}}\n"
    "  cu118: {wheels: {index: https://download.pytorch.org/whl/cu118}}\n",
)


def test_several_variants_of_one_release_with_the_variant_in_the_label(write_matrix: WriteMatrix) -> None:
    """PyG's shape: one release, its registry build and two CUDA builds from PyTorch's indexes, on the same Pythons;
    the label `pt24cu121` keeps their wheels apart."""
    matrix = load_matrix(write_matrix(PYG))
    assert [(r.variant, r.wheels.describe(), r.requirement_version) for r in matrix.torch] == [
        ("cuda", "registry", "2.4.1"),
        ("cu121", "index https://download.pytorch.org/whl/cu121", "2.4.1+cu121"),
        ("cu118", "index https://download.pytorch.org/whl/cu118", "2.4.1+cu118"),
    ]
    cells = expand(matrix, {r: {P("3.11")} for r in matrix.torch})
    assert [(c.id, c.local_version_label) for c in cells] == [
        ("torch2.4-cuda-cp311", "pt24cuda"),
        ("torch2.4-cu121-cp311", "pt24cu121"),
        ("torch2.4-cu118-cp311", "pt24cu118"),
    ]
    assert [c.id for c in Selection(variant=("cu118",)).apply(cells)] == ["torch2.4-cu118-cp311"]


def test_two_variants_on_one_python_without_the_variant_in_the_label_are_refused(write_matrix: WriteMatrix) -> None:
    found = problems(write_matrix(PYG.replace('  label: "pt{torch_nodot}{variant}"\n', "")))
    assert any(
        "torch[1].python" not in p
        and "torch[1].version: torch 2.4 is already declared at torch[0]" in p
        and "or a label with {variant}" in p
        for p in found
    ), found


# ---- bad input: each a located error ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # SDK-only settings with no SDK
        (
            NO_SDK + 'exclude: [{sdk: "1"}]\n',
            "matrix.yaml:15: exclude[0].sdk: a setting for projects with an SDK (wheel or system), but matrix.yaml "
            "declares no sdk (allowed here: torch, python, variant)",
        ),
        (
            NO_SDK + "timeouts: {sdk: 60}\n",
            "matrix.yaml:15: timeouts.sdk: a setting for projects with an SDK (wheel), but matrix.yaml declares no sdk",
        ),
        (
            SYSTEM.replace("  library-dirs:", "  source: driver\n  library-dirs:"),
            "sdk.source: a setting of wheel SDKs only; this sdk is kind system (allowed here: kind, name, title, id, "
            "versions, library-dirs, libraries)",
        ),
        (
            VALID.replace("  versions: [", "  library-dirs: [/opt/x]\n  versions: ["),
            "matrix.yaml:14: sdk.library-dirs: a setting of system SDKs only; this sdk is kind wheel",
        ),
        (
            VALID.replace('  versions: ["1.4", "2.1"]', '  versions: [{version: "1.4", provided-by: host}]'),
            "sdk.versions[0].provided-by: a setting of system SDKs only; this sdk is kind wheel",
        ),
        # an SDK version that no image provides
        (
            SYSTEM.replace("provided-by: bookworm", "provided-by: bookwrm"),
            "matrix.yaml:14: sdk.versions[0].provided-by: no image 'bookwrm' provides this SDK version (allowed: an "
            "image of images: (bookworm) or host); did you mean 'bookworm'?",
        ),
        (
            SYSTEM.replace('{version: "3.0", provided-by: host}', '"3.0"'),
            "matrix.yaml:15: sdk.versions[1]: a system SDK's version names what provides it",
        ),
        # an unknown label field, and fields that need an SDK
        (
            VALID.replace("{sdk_major}", "{sdk_majr}", 1),
            "matrix.yaml:7: plugin.label: unknown field {sdk_majr} in 'torch.{torch_minor}.drv.{sdk_majr}' (allowed: "
            "torch_minor, torch_major, torch_nodot, torch_version, variant, sdk_major, sdk_version, sdk_nodot); did "
            "you mean {sdk_major}?",
        ),
        (
            NO_SDK.replace("  smoke-tests: plugin/tests\n", '  smoke-tests: plugin/tests\n  label: "t{sdk_major}"\n'),
            "matrix.yaml:7: plugin.label: field {sdk_major} in 't{sdk_major}' needs an sdk:, and this matrix declares "
            "none (allowed: torch_minor, torch_major, torch_nodot, torch_version, variant)",
        ),
        (
            VALID.replace("torch.{torch_minor}", "Torch-{torch_minor}"),
            "plugin.label: 'Torch-{torch_minor}.drv.{sdk_major}': the text 'Torch-' is not allowed (allowed around "
            "fields: lowercase letters, digits and dots)",
        ),
        (VALID.replace('id: "drv{sdk_major}"', 'id: "drv{major}"'), "sdk.id: unknown field {major} in 'drv{major}'"),
        (
            VALID.replace('["1.4", "2.1"]', '["1.4", "1.5"]'),
            "matrix.yaml:14: sdk.versions[1]: '1.5' makes the cell id part 'drv1' that sdk.versions[0] makes too",
        ),
        # the SDK itself
        (VALID.replace("  kind: wheel\n", ""), "matrix.yaml:8: sdk: missing required key 'kind'"),
        (VALID.replace("  kind: wheel\n", "  kind: wheels\n"), "sdk.kind: 'wheels' is not allowed (allowed: wheel, "),
        (
            VALID.replace("  distribution: emu-driver\n", ""),
            "sdk: missing required key 'distribution' (a wheel SDK is built from a source tree)",
        ),
        (VALID.replace("schema-version: 2", "schema-version: 1"), "schema version 1 is the format before the SDK"),
        (
            VALID.replace("sdk:\n", "driver:\n"),
            "matrix.yaml:8: driver: unknown key 'driver' (allowed: schema-version, plugin, sdk, python, torch, ",
        ),
        (VALID.replace("variant: cpu", "variant: CPU"), "torch[1].variant: 'CPU' is not a variant name"),
    ],
)
def test_bad_sdk_input_is_a_located_error(write_matrix: WriteMatrix, text: str, expected: str) -> None:
    assert text not in (VALID, NO_SDK, SYSTEM)
    found = "\n".join(problems(write_matrix(text)))
    assert expected in found, found


def test_a_key_of_schema_1_says_where_schema_2_has_it(write_matrix: WriteMatrix) -> None:
    found = problems(write_matrix(VALID.replace("sdk:\n", "driver:\n").replace("schema-version: 2\n", "")))
    assert found[0].endswith("; schema 2 calls it sdk (with kind: wheel)"), found
    found = problems(write_matrix(VALID + 'exclude: [{torch: "2.4", driver: "1"}]\n'))
    assert found[0].endswith(
        "exclude[0].driver: unknown key 'driver' (allowed: torch, python, sdk, variant); schema 2 calls it sdk"
    )


def test_a_project_with_no_smoke_tests_is_a_located_error(write_matrix: WriteMatrix, project: Path) -> None:
    (project / "plugin" / "tests" / "test_smoke.py").unlink()
    (project / "plugin" / "tests" / "helpers.py").write_text("")  # not a test module: pytest collects none
    found = problems(write_matrix())
    assert found == [
        f"{project / 'matrix.yaml'}:6: plugin.smoke-tests: 'plugin/tests' holds no test file (allowed: a directory "
        "with pytest's test_*.py or *_test.py); a cell whose smoke run tests nothing would pass and publish an "
        "untested wheel"
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('  label: "torch.{torch_minor}.drv.{sdk_major}"', '  label: "torch.{torch_minor}.drv.{sdk_mjr}"', "sdk_mjr"),
        ("  kind: wheel\n", "  kind: wheel\n  library-dirs: [/opt/x]\n", "sdk.library-dirs: a setting of system"),
        ('{torch: "2.2", sdk: "1"}', '{torch: "2.2", sdk: "1"}\n  - {sdk: "1", torch: "2.2", python: "3.12"}', ""),
    ],
)
def test_the_cli_refuses_bad_sdk_input_and_writes_nothing(tmp_path: Path, old: str, new: str, expected: str) -> None:
    """`torch-buildmatrix matrix` and `compat-table --check` on our matrix.yaml with one mistake: exit 3, located."""
    root = copy_project(tmp_path / "project")
    text = (root / "matrix.yaml").read_text()
    assert old in text
    (root / "matrix.yaml").write_text(text.replace(old, new, 1))
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    result = run_cli(root, "compat-table", "--check", timeout=120)
    said = (result.stdout + result.stderr).replace("\n", "")
    if not expected:  # a rule excluding nothing new: loads, and the docs still match
        assert result.returncode in (0, 1), said
        return
    assert result.returncode == 3 and expected in said and "/project/matrix.yaml:" in said, said
    assert "Traceback" not in said
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before  # nothing written


def test_our_matrix_keeps_its_cells_ids_and_labels() -> None:
    """torch_emu's values live in matrix.yaml now (label, driver distribution and version variable, ids)."""
    matrix = load_matrix(Path(__file__).parents[2] / "matrix.yaml")
    assert matrix.sdk is not None and matrix.sdk.kind == SdkKind.WHEEL
    assert (matrix.sdk.name, matrix.sdk.distribution, matrix.sdk.version_env) == (
        "driver",
        "emu-driver",
        "EMU_DRIVER_API_VERSION",
    )
    table = CompatTable.from_json((Path(__file__).parents[2] / "docs" / "compatibility.json").read_text())
    from torch_buildmatrix.publish.table import available_from_table

    cells = expand(matrix, available_from_table(table, matrix))
    assert [c.id for c in cells] == [c.id for c in table.cells]
    assert all(f"+{c.local_version_label}" in t.requirement for c, t in zip(cells, table.cells, strict=True))
    assert cells[0].id == "torch2.1-cuda-cp39-drv1" and cells[0].local_version_label == "torch.2.1.drv.1"
