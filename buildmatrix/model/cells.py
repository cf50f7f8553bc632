"""The cell model and the pure expansion of a matrix into cells."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from buildmatrix.errors import MatrixError, Problem
from buildmatrix.model.matrix import CellRule, DriverVersion, Matrix, TorchRelease
from buildmatrix.model.vocab import Variant


def plugin_local_label(torch_minor: str, driver_major: int) -> str:
    """PEP 440 local label of the plugin wheel built for a torch minor and a driver API major.

    The one place the orchestration spells the scheme: cell ids' siblings, the wheel check, the compat table's
    requirements and the label handed to the plugin's setup.py all come from here.

    Every number is a segment of its own (torch.2.13.drv.2): PEP 440 compares numeric local segments as numbers
    but alphanumeric ones as text, so "drv10" would sort before "drv2" and "torch2.10" before "torch2.9", and an
    installer choosing the highest version would take the wrong wheel. The torch minor and the driver major stay
    separately parseable fields, so a later move to wheel variants is a mechanical relabel.
    """
    return f"torch.{torch_minor}.drv.{driver_major}"


@dataclass(frozen=True)
class CellKey:
    """What identifies a cell from the matrix through result records to the compat table.

    Equal keys mean the same build inputs as far as the published table cares: the exact torch release and
    variant, the Python minor and the driver API version. A record made for an older matrix (another torch
    patch release, another driver API minor) has a different key, so it never describes a current cell.
    """

    torch: Version
    variant: Variant
    python: Version  # major.minor
    driver: Version  # driver API version

    @property
    def torch_minor(self) -> str:
        return f"{self.torch.major}.{self.torch.minor}"

    @property
    def python_minor(self) -> str:
        return f"{self.python.major}.{self.python.minor}"

    @property
    def python_tag(self) -> str:
        return f"cp{self.python.major}{self.python.minor}"

    @property
    def driver_major(self) -> int:
        return self.driver.major

    @property
    def id(self) -> str:
        """Stable, readable id used for folders, logs, results and CI job names."""
        return f"torch{self.torch_minor}-{self.variant}-{self.python_tag}-drv{self.driver_major}"

    @property
    def local_version_label(self) -> str:
        """PEP 440 local label of the plugin wheel built in this cell."""
        return plugin_local_label(self.torch_minor, self.driver_major)

    def to_dict(self, patches: tuple[str, ...] = ()) -> dict[str, str]:
        """The record form (result records, `matrix --json`, the inputs hash); from_dict reads it back."""
        return {
            "id": self.id,
            "torch": str(self.torch),
            "torch_minor": self.torch_minor,
            "variant": str(self.variant),
            "python": self.python_minor,
            "driver": str(self.driver),
            "patches": ",".join(patches),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellKey:
        """Parse the record form; raises ValueError starting with the bad field's name ("driver: ...")."""
        if not isinstance(data, Mapping):
            raise ValueError(f"cell: expected a mapping with torch, variant, python and driver, got {data!r:.60}")
        fields: dict[str, str] = {}
        for name in ("torch", "variant", "python", "driver"):
            value = data.get(name)
            if not isinstance(value, str):
                raise ValueError(f"{name}: expected a string, got {value!r:.60}")
            fields[name] = value
        if fields["variant"] not in tuple(Variant):
            raise ValueError(f"variant: {fields['variant']!r:.60} is not one of {', '.join(Variant)}")
        versions: dict[str, Version] = {}
        for name in ("torch", "python", "driver"):
            try:
                versions[name] = Version(fields[name])
            except InvalidVersion:
                raise ValueError(f"{name}: {fields[name]!r:.60} is not a version") from None
        python = Version(f"{versions['python'].major}.{versions['python'].minor}")  # a cell is per Python minor
        key = cls(versions["torch"], Variant(fields["variant"]), python, versions["driver"])
        if "id" in data and data["id"] != key.id:
            raise ValueError(
                f"id: {data['id']!r:.80} is not {key.id!r}, the id its torch, variant, python and driver make"
            )
        return key


@dataclass(frozen=True)
class Cell:
    """One build: a torch release (with its variant) x one Python x one driver API version."""

    torch: TorchRelease
    python: Version
    driver: DriverVersion

    @property
    def key(self) -> CellKey:
        return CellKey(
            self.torch.version,
            self.torch.variant,
            Version(f"{self.python.major}.{self.python.minor}"),
            self.driver.api,
        )

    @property
    def id(self) -> str:
        """Stable, readable id used for folders, logs, results and CI job names."""
        return self.key.id

    @property
    def python_tag(self) -> str:
        return self.key.python_tag

    @property
    def local_version_label(self) -> str:
        """PEP 440 local label of the plugin wheel built in this cell."""
        return self.key.local_version_label

    def as_dict(self) -> dict[str, str]:
        return self.key.to_dict(self.torch.patches)


def rule_matches(rule: CellRule, cell: Cell) -> bool:
    return (
        (rule.torch is None or rule.torch.contains(cell.torch.version, prereleases=True))
        and (rule.python is None or rule.python == cell.python)
        and (rule.driver is None or rule.driver == cell.driver.major)
        and (rule.variant is None or rule.variant == cell.torch.variant)
    )


class _Problems:
    """Collects located problems of the expansion, to raise them all at once."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.found: list[Problem] = []

    def add(self, key: str, message: str) -> None:
        self.found.append(Problem(str(self.matrix.path), self.matrix.lines.line(key), key, message))


def _release_pythons(
    index: int, release: TorchRelease, matrix: Matrix, offered: set[Version], problems: _Problems
) -> list[Version]:
    """The Pythons a release is built for: its own list (each must be published) or the matrix's (at least one)."""
    published = ", ".join(str(v) for v in sorted(offered)) or "none"
    name = f"torch {release.version} ({release.variant})"
    if release.python is not None:
        for p_index, python in enumerate(release.python):
            if python not in offered:
                problems.add(
                    f"torch[{index}].python[{p_index}]",
                    f"{name} publishes no wheel for Python {python} (published: {published})",
                )
        return [p for p in release.python if p in offered]
    pythons = [p for p in matrix.python if p in offered]
    if not pythons:
        problems.add(
            f"torch[{index}]",
            f"{name} publishes wheels for Python {published}, none of them in python: give this release its own "
            "python list, or remove it",
        )
    return pythons


def _include(
    index: int, rule: CellRule, matrix: Matrix, available: Mapping[TorchRelease, set[Version]], problems: _Problems
) -> list[Cell]:
    """The cells an include rule adds (it names torch, python and driver; the parser checked that)."""
    key = f"include[{index}]"
    assert rule.torch is not None and rule.python is not None
    driver = next((d for d in matrix.drivers if d.major == rule.driver), None)
    out = []
    for release in matrix.torch:
        if not rule_matches(
            CellRule(torch=rule.torch, variant=rule.variant), Cell(release, rule.python, matrix.drivers[0])
        ):
            continue
        if driver is None:
            problems.add(key, f"driver {rule.driver} is not in driver.versions")
            return []
        if rule.python not in available.get(release, set()):
            problems.add(key, f"torch {release.version} publishes no wheel for Python {rule.python}")
            return []
        out.append(Cell(release, rule.python, driver))
    if not out:
        problems.add(key, "matches no torch release of the matrix")
    return out


def _same_wheel(key: str, cell: Cell, cells: list[Cell], problems: _Problems) -> None:
    """An included cell whose plugin wheel would be another variant's file (the name carries no variant)."""
    twin = next(
        (
            c
            for c in cells
            if (c.torch.minor, c.python, c.driver.major) == (cell.torch.minor, cell.python, cell.driver.major)
        ),
        None,
    )
    if twin is not None:
        problems.add(
            key,
            f"adds {cell.id}, whose plugin wheel would have the same file name as {twin.id}'s (the name carries the "
            "torch minor, the Python and the driver, not the variant); include another Python, or exclude the other",
        )


def expand(matrix: Matrix, available_pythons: Mapping[TorchRelease, set[Version]]) -> list[Cell]:
    """All cells of the matrix, in declaration order.

    available_pythons gives, per release, the Pythons its published wheels support. The matrix-wide
    Python list is intersected with it, but a release left with none is an error; a Python a release names
    itself must be supported. An exclude rule must remove a cell, and the matrix must keep at least one.
    """
    problems = _Problems(matrix)
    cells: list[Cell] = []
    for index, release in enumerate(matrix.torch):
        offered = available_pythons.get(release, set())
        for python in _release_pythons(index, release, matrix, offered, problems):
            cells += [Cell(release, python, driver) for driver in matrix.drivers]
    for index, rule in enumerate(matrix.exclude):
        if not any(rule_matches(rule, c) for c in cells):
            problems.add(f"exclude[{index}]", "matches no cell of the matrix (allowed: a rule that removes one)")
    cells = [c for c in cells if not any(rule_matches(rule, c) for rule in matrix.exclude)]
    for index, rule in enumerate(matrix.include):
        added = [c for c in _include(index, rule, matrix, available_pythons, problems) if c not in cells]
        for cell in added:
            _same_wheel(f"include[{index}]", cell, cells, problems)
        cells += added
    if not cells and not problems.found:
        key = "exclude" if matrix.exclude else "torch"
        problems.add(key, "the matrix expands to no cell at all")
    if problems.found:
        raise MatrixError(problems.found)
    return cells


@dataclass(frozen=True)
class Selection:
    """Command-line narrowing of the expanded cells (--torch 2.4 --python 3.11 --driver 2)."""

    torch: tuple[str, ...] = ()
    python: tuple[str, ...] = ()
    driver: tuple[str, ...] = ()
    variant: tuple[str, ...] = ()

    def matches(self, cell: Cell) -> bool:
        def one_of(values: tuple[str, ...], *candidates: str) -> bool:
            return not values or any(v in candidates for v in values)

        py = f"{cell.python.major}.{cell.python.minor}"
        return (
            one_of(self.torch, cell.torch.minor, str(cell.torch.version))
            and one_of(self.python, py, cell.python_tag)
            and one_of(self.driver, str(cell.driver.major), str(cell.driver.api))
            and one_of(self.variant, cell.torch.variant)
        )

    def apply(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if self.matches(c)]
