"""The cell model and the pure expansion of a matrix into cells."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from torch_buildmatrix.errors import MatrixError, Problem
from torch_buildmatrix.model.builds import build_key, build_release
from torch_buildmatrix.model.cellkey import BuildKey, CellKey
from torch_buildmatrix.model.matrix import CellRule, Matrix, SdkVersion, TorchRelease
from torch_buildmatrix.model.pythons import Python

__all__ = ["Cell", "CellKey", "Selection", "expand", "make_cell", "rule_matches"]


@dataclass(frozen=True)
class Cell:
    """One build: a torch release (with its variant) x one Python x one SDK version (none without an SDK).

    Made by make_cell, which names it with the matrix's naming (its key: id and wheel label)."""

    torch: TorchRelease
    python: Python
    sdk: SdkVersion | None
    key: CellKey

    @property
    def id(self) -> str:
        """Stable, readable id used for folders, logs, results and CI job names."""
        return self.key.id

    @property
    def python_tag(self) -> str:
        return self.key.python_tag

    @property
    def build(self) -> BuildKey:
        """The build whose wheel this cell tests."""
        return self.key.build

    @property
    def local_version_label(self) -> str:
        """PEP 440 local label of the plugin wheel built in this cell."""
        return self.key.local_version_label

    def as_dict(self) -> dict[str, str]:
        return self.key.to_dict(self.torch.patches)


def make_cell(
    matrix: Matrix, release: TorchRelease, python: Python, sdk: SdkVersion | None, built: TorchRelease | None = None
) -> Cell:
    """The cell, named, with the build whose wheel it tests (model/builds.py; `built`: build_release's answer)."""
    key = build_key(matrix, release, python, sdk, built)
    return Cell(release, python, sdk, matrix.naming.key(release, python, sdk, key))


def rule_matches(rule: CellRule, cell: Cell) -> bool:
    return (
        (rule.torch is None or rule.torch.contains(cell.torch.version, prereleases=True))
        and (rule.python is None or rule.python == cell.python)
        and (rule.sdk is None or (cell.sdk is not None and cell.sdk.matches(rule.sdk)))
        and (rule.variant is None or rule.variant == cell.torch.variant)
    )


class _Problems:
    """Collects located problems of the expansion, to raise them all at once."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.found: list[Problem] = []

    def add(self, key: str, message: str) -> None:
        self.found.append(Problem(str(self.matrix.path), self.matrix.lines.line(key), key, message))


def _release_pythons(release: TorchRelease, matrix: Matrix, offered: set[Python], problems: _Problems) -> list[Python]:
    """The Pythons a release is built for: its own list (each must be published) or the matrix's (at least one)."""
    published = ", ".join(str(v) for v in sorted(offered)) or "none"
    name = f"torch {release.version} ({release.variant})"
    if release.python is not None:
        for p_index, python in enumerate(release.python):
            if python not in offered:
                problems.add(
                    f"{release.key}.python[{p_index}]",
                    f"{name} publishes no wheel for Python {python} (published: {published})",
                )
        return [p for p in release.python if p in offered]
    pythons = [p for p in matrix.python if p in offered]
    if not pythons:
        problems.add(
            release.key,
            f"{name} publishes wheels for Python {published}, none of them in python: give this release its own "
            "python list, or remove it",
        )
    return pythons


def _include(
    index: int, rule: CellRule, matrix: Matrix, available: Mapping[TorchRelease, set[Python]], problems: _Problems
) -> list[Cell]:
    """The cells an include rule adds (it names torch and python, and the SDK when there is one: the parser checked
    that)."""
    key = f"include[{index}]"
    assert rule.torch is not None and rule.python is not None
    sdk = None
    if matrix.sdk is not None:
        assert rule.sdk is not None
        sdk = matrix.sdk.version(str(rule.sdk))
        if sdk is None:
            known = ", ".join(str(v.version) for v in matrix.sdk.versions)
            problems.add(key, f"sdk {rule.sdk} is not in sdk.versions (allowed: {known})")
            return []
    out = []
    for release in matrix.torch:
        if not rule_matches(
            CellRule(torch=rule.torch, variant=rule.variant), make_cell(matrix, release, rule.python, sdk)
        ):
            continue
        if rule.python not in available.get(release, set()):
            problems.add(key, f"torch {release.version} publishes no wheel for Python {rule.python}")
            return []
        out.append(make_cell(matrix, release, rule.python, sdk))
    if not out:
        problems.add(key, "matches no torch release of the matrix")
    return out


def _wheel_name(build: BuildKey) -> tuple[str, str]:
    """What a build's wheel's file name is made of, beyond the project's name and version: its label, and the
    Python's tag when there is a build per Python (a wheel for every Python names none: py3-none, abi3)."""
    return (build.label, build.python.tag if build.python is not None else "")


def _same_wheel(
    key: str, cell: Cell, kept: list[Cell], by_wheel: dict[tuple[str, str], Cell], problems: _Problems
) -> bool:
    """A cell whose build's wheel would have the file name of another build's, one a cell kept before it tests (the
    label does not tell them apart); a cell without such a twin is kept. `by_wheel` maps each wheel name to the first
    cell kept with it: one lookup per cell, so 10 000 cells stay linear."""
    twin = by_wheel.get(_wheel_name(cell.build))
    if twin is not None and twin.build == cell.build:
        twin = None  # cells of one build test one wheel
    if twin is not None:
        python = f", {cell.build.python.tag}" if cell.build.python is not None else ", one wheel for every Python"
        problems.add(
            key,
            f"{cell.id} and {twin.id} would publish one wheel file name from two builds, {cell.build.id} and "
            f"{twin.build.id} (label '{cell.key.label}'{python}): plugin.label must tell them apart (a {{variant}} "
            "or an SDK field), build.per-variant: false can make them one build, or one of them must go",
        )
    else:
        by_wheel.setdefault(_wheel_name(cell.build), cell)
        kept.append(cell)
    return twin is not None


def expand(matrix: Matrix, available_pythons: Mapping[TorchRelease, set[Python]]) -> list[Cell]:
    """All cells of the matrix, in declaration order.

    available_pythons gives, per release, the Pythons its published wheels support. The matrix-wide
    Python list is intersected with it, but a release left with none is an error; a Python a release names
    itself must be supported. An exclude rule must remove a cell, and the matrix must keep at least one; no two
    cells may publish one wheel file name.
    """
    problems = _Problems(matrix)
    cells: list[Cell] = []
    for release in matrix.torch:
        offered = available_pythons.get(release, set())
        built = build_release(matrix, release)
        for python in _release_pythons(release, matrix, offered, problems):
            cells += [make_cell(matrix, release, python, sdk, built) for sdk in matrix.sdk_versions]
    for index, rule in enumerate(matrix.exclude):
        if not any(rule_matches(rule, c) for c in cells):
            problems.add(f"exclude[{index}]", "matches no cell of the matrix (allowed: a rule that removes one)")
    cells = [c for c in cells if not any(rule_matches(rule, c) for rule in matrix.exclude)]
    kept: list[Cell] = []
    by_wheel: dict[tuple[str, str], Cell] = {}  # by wheel name, the first cell kept with it
    for cell in cells:
        _same_wheel("plugin.label", cell, kept, by_wheel, problems)
    for index, rule in enumerate(matrix.include):
        present = set(kept)
        added = [c for c in _include(index, rule, matrix, available_pythons, problems) if c not in present]
        for cell in added:
            # Against the cells before the rule and those the same rule added before it: a rule without a variant
            # adds a cell per variant of the minor, and those share one wheel name.
            _same_wheel(f"include[{index}]", cell, kept, by_wheel, problems)
    if not kept and not problems.found:
        key = "exclude" if matrix.exclude else "torch"
        problems.add(key, "the matrix expands to no cell at all")
    if problems.found:
        raise MatrixError(problems.found)
    return kept


@dataclass(frozen=True)
class Selection:
    """Command-line narrowing of the expanded cells (--torch 2.4 --python 3.11 --sdk 2 --variant cpu)."""

    torch: tuple[str, ...] = ()
    python: tuple[str, ...] = ()
    sdk: tuple[str, ...] = ()  # version prefixes: "2" selects every 2.x
    variant: tuple[str, ...] = ()

    def matches(self, cell: Cell) -> bool:
        def one_of(values: tuple[str, ...], *candidates: str) -> bool:
            return not values or any(v in candidates for v in values)

        py = str(cell.python)
        return (
            one_of(self.torch, cell.torch.minor, str(cell.torch.version))
            and one_of(self.python, py, cell.python_tag)
            and (not self.sdk or (cell.sdk is not None and any(_selects(v, cell.sdk) for v in self.sdk)))
            and one_of(self.variant, cell.torch.variant)
        )

    def apply(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if self.matches(c)]


def _selects(text: str, sdk: SdkVersion) -> bool:
    try:
        return sdk.matches(Version(text))
    except ValueError:
        return text == sdk.tag  # --sdk drv2: the id part
