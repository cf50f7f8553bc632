"""Shim series maintenance: check names what breaks, finds dead shims; edit + refresh round-trips through git."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torch_buildmatrix.builder.patchtool import check, edit_tree, refresh
from torch_buildmatrix.model.loader import load_matrix

HOOKS = "int a = 1;\nint b = 2;\nint c = 4;\n"
PATCH = """\
--- a/plugin/csrc/hooks.cpp
+++ b/plugin/csrc/hooks.cpp
@@ -1,3 +1,3 @@
 int a = 1;
-int b = 2;
+int b = 3;
 int c = 4;
"""


def project(tmp_path: Path, releases: str, series: dict[str, dict[str, str]]) -> Path:
    (tmp_path / "plugin" / "csrc").mkdir(parents=True)
    (tmp_path / "plugin" / "tests").mkdir()
    (tmp_path / "plugin" / "tests" / "test_smoke.py").write_text("")
    (tmp_path / "plugin" / "csrc" / "hooks.cpp").write_text(HOOKS)
    (tmp_path / "driver").mkdir()
    for name, files in series.items():
        directory = tmp_path / "patches" / name
        directory.mkdir(parents=True)
        for file, text in files.items():
            (directory / file).write_text(text)
        (directory / "series").write_text("".join(f"{f}\n" for f in files))
    (tmp_path / "matrix.yaml").write_text(
        textwrap.dedent("""\
        plugin: {distribution: torch-emu, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}
        python: ["3.11"]
        torch:
        """)
        + releases
    )
    return tmp_path


def test_clean_series_apply(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        '  - {version: "2.4.1", patches: [pre-2.7]}\n  - {version: "2.13.0"}\n',
        {"pre-2.7": {"0001-b.patch": PATCH}},
    )
    report = check(load_matrix(root / "matrix.yaml"))
    assert report.ok and report.applied == {"torch 2.4 (cuda)": ["pre-2.7/0001-b.patch"], "torch 2.13 (cuda)": []}


def test_stale_patch_names_patch_file_and_hunk(tmp_path: Path) -> None:
    root = project(tmp_path, '  - {version: "2.4.1", patches: [pre-2.7]}\n', {"pre-2.7": {"0001-b.patch": PATCH}})
    (root / "plugin" / "csrc" / "hooks.cpp").write_text(HOOKS.replace("int b = 2;", "int b = 5;"))
    report = check(load_matrix(root / "matrix.yaml"))
    assert not report.ok
    assert report.failures == [
        "torch 2.4 (cuda): pre-2.7/0001-b.patch does not apply: hunk @@ -1,3 +1,3 @@ failed at plugin/csrc/hooks.cpp:1"
    ]


def test_patch_outside_plugin_is_rejected(tmp_path: Path) -> None:
    evil = PATCH.replace("plugin/csrc/hooks.cpp", "driver/src/x.cpp")
    root = project(tmp_path, '  - {version: "2.4.1", patches: [bad]}\n', {"bad": {"0001.patch": evil}})
    report = check(load_matrix(root / "matrix.yaml"))
    assert "touches paths outside plugin/: driver/src/x.cpp" in report.failures[0]


def test_unused_series_and_dead_gates_are_reported(tmp_path: Path) -> None:
    root = project(tmp_path, '  - {version: "2.4.1"}\n', {"pre-2.3": {"0001-b.patch": PATCH}})
    (root / "plugin" / "tests" / "test_x.py").write_text(
        '@requires_torch("<2.3")\ndef test_old(): ...\n@requires_torch(">=2.4")\ndef test_new(): ...\n'
    )
    report = check(load_matrix(root / "matrix.yaml"))
    assert report.unused_series == ["pre-2.3"]
    assert report.dead_gates == [
        "plugin/tests/test_x.py:1: requires_torch('<2.3') matches no torch release of the matrix"
    ]


def test_edit_then_refresh_round_trip(tmp_path: Path) -> None:
    root = project(tmp_path, '  - {version: "2.4.1", patches: [pre-2.7]}\n', {"pre-2.7": {"0001-b.patch": PATCH}})
    matrix = load_matrix(root / "matrix.yaml")
    tree = edit_tree(matrix, "2.4", tmp_path / "edit")
    hooks = tree / "plugin" / "csrc" / "hooks.cpp"
    assert "int b = 3;" in hooks.read_text()  # the shared series is already applied
    hooks.write_text(hooks.read_text().replace("int c = 4;", "int c = 40;"))
    result = refresh(matrix, "2.4", tree)
    assert result.missing_from_matrix
    assert (root / "patches" / "2.4" / "series").read_text().splitlines()[-1] == "0001-torch-2.4.patch"
    # Once listed in the matrix, the new series applies on top of the shared one and reproduces the edit.
    (root / "matrix.yaml").write_text((root / "matrix.yaml").read_text().replace("[pre-2.7]", '[pre-2.7, "2.4"]'))
    matrix = load_matrix(root / "matrix.yaml")
    report = check(matrix)
    assert report.ok, report
    assert report.applied["torch 2.4 (cuda)"] == ["pre-2.7/0001-b.patch", "2.4/0001-torch-2.4.patch"]
    # Editing again starts from the release's own series applied, and refresh keeps it.
    tree = edit_tree(matrix, "2.4", tmp_path / "edit")
    assert "int c = 40;" in (tree / "plugin" / "csrc" / "hooks.cpp").read_text()
    assert not refresh(matrix, "2.4", tree).missing_from_matrix
    assert check(load_matrix(root / "matrix.yaml")).ok
    # The adopters' guide gives the same steps: the series refresh writes, listed under the name it has here.
    guide = (Path(__file__).parents[2] / "docs" / "guide" / "use-buildmatrix.md").read_text().replace("\n  ", " ")
    assert (
        '`torch-buildmatrix patches refresh 2.4`, which writes the series `patches/2.4/`, then `patches: ["2.4"]` '
        "on that release" in guide
    )
