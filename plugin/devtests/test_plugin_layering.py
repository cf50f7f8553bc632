"""The plugin's C++ layering in every release's patched tree: runtime/ never reaches aten/; one device limit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torch_buildmatrix.builder.sourcetree import apply_series, copy_pristine, release_series
from torch_buildmatrix.model.loader import load_matrix

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# A definition of a device bound: a macro or a constant whose name says "max ... devices".
DEVICE_LIMIT = re.compile(
    r"^\s*(?:#\s*define|(?:static\s+)?constexpr\s+[\w:<>]+)\s+(\w*max_?devices\w*)\b", re.I | re.M
)
# Layers that must not be reached from runtime/: the kernels and autocast sit above it.
ABOVE_RUNTIME = ("aten/", "amp/")


def sources(csrc: Path) -> list[Path]:
    return sorted(p for p in csrc.rglob("*") if p.suffix in {".h", ".cpp"})


def resolve(including: Path, name: str, csrc: Path) -> Path | None:
    """Where the compiler finds a quoted include: beside the including file, then plugin/setup.py's include dirs."""
    for directory in (including.parent, csrc, csrc / "runtime"):
        candidate = (directory / name).resolve()
        if candidate.is_file():
            return candidate
    return None


def layering_violations(csrc: Path) -> list[str]:
    """Every runtime/ file that reaches, directly or through other headers, a file of a layer above runtime/."""
    csrc = csrc.resolve()
    problems = []
    for start in sources(csrc / "runtime"):
        seen: set[Path] = set()
        todo = [start]
        while todo:
            current = todo.pop()
            for name in INCLUDE.findall(current.read_text(errors="replace")):
                found = resolve(current, name, csrc)
                if found is None:
                    problems.append(f'{current.relative_to(csrc)}: #include "{name}" resolves to no file')
                    continue
                rel = found.relative_to(csrc).as_posix()
                if rel.startswith(ABOVE_RUNTIME):
                    problems.append(f"{start.relative_to(csrc)} reaches {rel} (via {current.relative_to(csrc)})")
                elif found not in seen:
                    seen.add(found)
                    todo.append(found)
    return problems


def device_limit_definitions(*roots: Path) -> list[str]:
    out = []
    for root in roots:
        for path in sources(root):
            out += [
                f"{path.relative_to(root.parents[1]).as_posix()}: {name}"
                for name in DEVICE_LIMIT.findall(path.read_text(errors="replace"))
            ]
    return out


def patched_trees(tmp_path: Path) -> dict[str, Path]:
    """csrc/ of the pristine plugin with each distinct series list of matrix.yaml applied."""
    matrix = load_matrix(ROOT / "matrix.yaml")
    trees: dict[str, Path] = {}
    for release in matrix.torch:
        key = "+".join(release.patches) or "unpatched"
        if key not in trees:
            root = tmp_path / key
            copy_pristine(matrix.plugin.source, root)
            apply_series(release_series(matrix, release), root, matrix.plugin.source.name)
            trees[key] = root / matrix.plugin.source.name / "csrc"
    return trees


def test_runtime_reaches_no_layer_above_it_in_any_release(tmp_path: Path) -> None:
    trees = patched_trees(tmp_path)
    assert "unpatched" in trees and len(trees) >= 2, trees  # the newest source and at least one shim series
    assert {key: layering_violations(csrc) for key, csrc in trees.items()} == {key: [] for key in trees}


def test_layering_check_finds_an_include_that_climbs_and_one_that_dangles(tmp_path: Path) -> None:
    csrc = tmp_path / "csrc"
    (csrc / "runtime").mkdir(parents=True)
    (csrc / "aten").mkdir()
    (csrc / "aten" / "Storage.h").write_text("#pragma once\n")
    (csrc / "runtime" / "Neutral.h").write_text('#include "../aten/Storage.h"\n')
    (csrc / "runtime" / "Hooks.cpp").write_text('#include "Neutral.h"\n#include "Gone.h"\n')
    assert sorted(layering_violations(csrc)) == [
        "runtime/Hooks.cpp reaches aten/Storage.h (via runtime/Neutral.h)",
        'runtime/Hooks.cpp: #include "Gone.h" resolves to no file',
        "runtime/Neutral.h reaches aten/Storage.h (via runtime/Neutral.h)",
    ]


def test_device_limit_is_defined_once_by_the_driver(tmp_path: Path) -> None:
    driver = [ROOT / "driver" / "include", ROOT / "driver" / "src"]
    assert device_limit_definitions(ROOT / "plugin" / "csrc", *driver) == [
        "driver/include/emu_driver.h: EMU_MAX_DEVICES"
    ]
    for key, csrc in patched_trees(tmp_path).items():
        assert device_limit_definitions(csrc) == [], key  # no series brings a second one back


@pytest.mark.parametrize(
    "line",
    ["constexpr int kMaxDevices = 16;", "#define EMU_MAX_DEVICES 16", "static constexpr size_t max_devices = 8;"],
)
def test_device_limit_pattern_sees_each_spelling(line: str, tmp_path: Path) -> None:
    (tmp_path / "x.h").write_text(f"// one\n{line}\n")
    assert len(DEVICE_LIMIT.findall((tmp_path / "x.h").read_text())) == 1
