"""Pristine copies and patch series: applied in order, failures name the patch and the hunk, no path outside plugin/."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.sourcetree import PatchSeries, apply_series, copy_pristine, patches_line, touched_paths
from torch_buildmatrix.errors import PatchError
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.vocab import WheelSourceKind

PATCH = """\
--- a/plugin/csrc/hooks.cpp
+++ b/plugin/csrc/hooks.cpp
@@ -1,3 +1,3 @@
 int a = 1;
-int b = 2;
+int b = 3;
 int c = 4;
"""


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "plugin"
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "hooks.cpp").write_text("int a = 1;\nint b = 2;\nint c = 4;\n")
    (root / "build").mkdir()
    (root / "build" / "junk.o").write_text("x")
    (root / "pkg.egg-info").mkdir()
    return root


def series(tmp_path: Path, name: str, patches: dict[str, str]) -> PatchSeries:
    directory = tmp_path / "patches" / name
    directory.mkdir(parents=True)
    for file, text in patches.items():
        (directory / file).write_text(text)
    (directory / "series").write_text("# order matters\n" + "".join(f"{f}\n" for f in patches))
    return PatchSeries(name, directory)


def test_copy_leaves_build_outputs_behind(plugin: Path, tmp_path: Path) -> None:
    copy = copy_pristine(plugin, tmp_path / "work")
    assert (copy / "csrc" / "hooks.cpp").is_file()
    assert not (copy / "build").exists() and not (copy / "pkg.egg-info").exists()


def test_series_applies_to_the_copy_only(plugin: Path, tmp_path: Path) -> None:
    copy = copy_pristine(plugin, tmp_path / "work")
    applied = apply_series([series(tmp_path, "pre-2.7", {"0001-b.patch": PATCH})], copy.parent, "plugin")
    assert applied == ["pre-2.7/0001-b.patch"]
    assert "int b = 3;" in (copy / "csrc" / "hooks.cpp").read_text()
    assert "int b = 2;" in (plugin / "csrc" / "hooks.cpp").read_text()


def test_the_build_log_line_names_each_patch_applied(plugin: Path, tmp_path: Path) -> None:
    copy = copy_pristine(plugin, tmp_path / "work")
    applied = apply_series([series(tmp_path, "pre-2.7", {"0001-b.patch": PATCH})], copy.parent, "plugin")
    release = TorchRelease(Version("2.6.0"), "cpu", WheelSource(WheelSourceKind.REGISTRY), None, ("pre-2.7",))
    assert patches_line(release, applied) == "source: applied 1 patch(es) for torch 2.6.0: pre-2.7/0001-b.patch"
    empty = apply_series([series(tmp_path, "pre-2.8", {})], copy.parent, "plugin")
    assert patches_line(replace(release, patches=("pre-2.8",)), empty) == (
        "source: no patch applied: the series of torch 2.6.0 (pre-2.8) hold none"
    )
    assert patches_line(replace(release, patches=()), []) == (
        "source: no patch applied: torch 2.6.0 lists no patch series"
    )


def test_patch_that_does_not_apply_names_patch_and_hunk(plugin: Path, tmp_path: Path) -> None:
    copy = copy_pristine(plugin, tmp_path / "work")
    (copy / "csrc" / "hooks.cpp").write_text("int a = 1;\nint b = 9;\nint c = 4;\n")
    with pytest.raises(PatchError) as info:
        apply_series([series(tmp_path, "pre-2.7", {"0001-b.patch": PATCH})], copy.parent, "plugin")
    assert "pre-2.7/0001-b.patch does not apply" in info.value.message
    assert "plugin/csrc/hooks.cpp:1" in info.value.message  # git names the file and the hunk's line


def test_patch_outside_plugin_is_rejected(plugin: Path, tmp_path: Path) -> None:
    evil = PATCH.replace("plugin/csrc/hooks.cpp", "driver/src/memory.cpp")
    copy = copy_pristine(plugin, tmp_path / "work")
    with pytest.raises(PatchError, match=re.escape("touches paths outside plugin/: driver/src/memory.cpp")):
        apply_series([series(tmp_path, "bad", {"0001-evil.patch": evil})], copy.parent, "plugin")


def test_series_listing_a_missing_file(tmp_path: Path) -> None:
    one = series(tmp_path, "s", {})
    (one.directory / "series").write_text("0001-missing.patch\n")
    with pytest.raises(PatchError, match=re.escape("series:1: patch file '0001-missing.patch' does not exist")):
        one.patches()


def test_touched_paths(tmp_path: Path) -> None:
    patch = tmp_path / "x.patch"
    patch.write_text(PATCH + "--- /dev/null\n+++ b/plugin/new.cpp\n@@ -0,0 +1 @@\n+int x;\n")
    assert touched_paths(patch, tmp_path) == ["plugin/csrc/hooks.cpp", "plugin/new.cpp"]


def test_applies_inside_another_git_work_tree(tmp_path: Path) -> None:
    """build/ lives inside the project's own repository: git must still patch the copied tree."""
    import subprocess

    repo = tmp_path / "project"
    (repo / "plugin").mkdir(parents=True)
    (repo / "plugin" / "a.txt").write_text("one\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    tree = repo / "build" / "cells" / "x" / "tree"
    (tree / "plugin").mkdir(parents=True)
    (tree / "plugin" / "a.txt").write_text("one\n")
    series_dir = tmp_path / "series"
    series_dir.mkdir()
    (series_dir / "0001.patch").write_text(
        "diff --git a/plugin/a.txt b/plugin/a.txt\n--- a/plugin/a.txt\n+++ b/plugin/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
    )
    (series_dir / "series").write_text("0001.patch\n")
    assert apply_series([PatchSeries("s", series_dir)], tree, "plugin") == ["s/0001.patch"]
    assert (tree / "plugin" / "a.txt").read_text() == "two\n"
    assert (repo / "plugin" / "a.txt").read_text() == "one\n"


RENAME_OUT = (
    "diff --git a/plugin/csrc/hooks.cpp b/driver/hooks.cpp\nsimilarity index 100%\n"
    "rename from plugin/csrc/hooks.cpp\nrename to driver/hooks.cpp\n"
)
COPY_OUT = (
    "diff --git a/plugin/csrc/hooks.cpp b/setup.py\nsimilarity index 100%\ncopy from plugin/csrc/hooks.cpp\n"
    "copy to setup.py\n"
)
RENAME_IN = "diff --git a/README b/plugin/README\nsimilarity index 100%\nrename from README\nrename to plugin/README\n"
SYMLINK = (
    "diff --git a/plugin/passwd b/plugin/passwd\nnew file mode 120000\nindex 0000000..1234567\n--- /dev/null\n"
    "+++ b/plugin/passwd\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
)
INTO_SYMLINK = "diff --git a/plugin/csrc/hooks.cpp b/plugin/csrc/hooks.cpp\nold mode 100644\nnew mode 120000\n"


def binary_patch() -> str:
    """A real `git diff --binary` of a file with a NUL byte."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        (repo / "plugin").mkdir()
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
        (repo / "plugin" / "blob.bin").write_bytes(b"\x00\x01\x02")
        subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
        return subprocess.run(
            [*git, "diff", "--cached", "--binary"], cwd=repo, check=True, capture_output=True, text=True
        ).stdout


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        # no b/ prefix: git apply -p1 strips 'plugin/' and would write X at the tree root
        (PATCH.replace("+++ b/plugin/csrc/hooks.cpp", "+++ plugin/X"), "touches paths outside plugin/: X"),
        (
            PATCH.replace("a/plugin/csrc/hooks.cpp", "a/plugin/../driver/x.c").replace(
                "b/plugin/csrc/hooks.cpp", "b/plugin/../driver/x.c"
            ),
            "outside plugin/",
        ),
        (RENAME_OUT, "touches paths outside plugin/: driver/hooks.cpp"),
        (COPY_OUT, "touches paths outside plugin/: setup.py"),
        (RENAME_IN, "touches paths outside plugin/: README"),
        (SYMLINK, "creates symbolic links (plugin/passwd)"),
        (INTO_SYMLINK, "creates symbolic links (plugin/csrc/hooks.cpp)"),
        (binary_patch(), "has binary changes (plugin/blob.bin)"),
    ],
)
def test_guard_refuses_and_leaves_the_tree_alone(plugin: Path, tmp_path: Path, patch: str, message: str) -> None:
    copy = copy_pristine(plugin, tmp_path / "work")
    before = {p.relative_to(copy.parent): p.read_bytes() for p in copy.parent.rglob("*") if p.is_file()}
    with pytest.raises(PatchError, match=re.escape(message)):
        apply_series([series(tmp_path, "bad", {"0001-evil.patch": patch})], copy.parent, "plugin")
    after = {p.relative_to(copy.parent): p.read_bytes() for p in copy.parent.rglob("*") if p.is_file()}
    assert after == before
    assert not any(p.is_symlink() for p in copy.parent.rglob("*"))


def test_rename_inside_plugin_is_allowed(plugin: Path, tmp_path: Path) -> None:
    inside = RENAME_OUT.replace("driver/hooks.cpp", "plugin/csrc/hooks2.cpp")
    copy = copy_pristine(plugin, tmp_path / "work")
    apply_series([series(tmp_path, "ok", {"0001-mv.patch": inside})], copy.parent, "plugin")
    assert (copy / "csrc" / "hooks2.cpp").is_file() and not (copy / "csrc" / "hooks.cpp").exists()


def test_unreadable_patch_is_a_patch_error(plugin: Path, tmp_path: Path) -> None:
    copy = copy_pristine(plugin, tmp_path / "work")
    with pytest.raises(PatchError, match="git apply cannot read it"):
        apply_series(
            [series(tmp_path, "bad", {"0001.patch": "diff --git a/plugin/x\ngarbage\n"})], copy.parent, "plugin"
        )
