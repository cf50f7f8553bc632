"""The cell model and the pure expansion of a matrix into cells."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from buildmatrix.errors import MatrixError, Problem
from buildmatrix.model.matrix import CellRule, DriverVersion, Matrix, TorchRelease


@dataclass(frozen=True)
class Cell:
    """One build: a torch release (with its variant) x one Python x one driver API version."""

    torch: TorchRelease
    python: Version
    driver: DriverVersion

    @property
    def id(self) -> str:
        """Stable, readable id used for folders, logs, results and CI job names."""
        return f"torch{self.torch.minor}-{self.torch.variant}-{self.python_tag}-drv{self.driver.major}"

    @property
    def python_tag(self) -> str:
        return f"cp{self.python.major}{self.python.minor}"

    @property
    def local_version_label(self) -> str:
        """PEP 440 local label of the plugin wheel built in this cell."""
        return f"torch{self.torch.minor}.drv{self.driver.major}"

    def as_dict(self) -> dict[str, str]:
        return {
            "id": self.id,
            "torch": str(self.torch.version),
            "torch_minor": self.torch.minor,
            "variant": self.torch.variant,
            "python": f"{self.python.major}.{self.python.minor}",
            "driver": str(self.driver.api),
            "patches": ",".join(self.torch.patches),
        }


def rule_matches(rule: CellRule, cell: Cell) -> bool:
    if rule.torch is not None and not rule.torch.contains(cell.torch.version, prereleases=True):
        return False
    if rule.python is not None and rule.python != cell.python:
        return False
    if rule.driver is not None and rule.driver != cell.driver.major:
        return False
    if rule.variant is not None and rule.variant != cell.torch.variant:
        return False
    return True


def expand(matrix: Matrix, available_pythons: Mapping[TorchRelease, set[Version]]) -> list[Cell]:
    """All cells of the matrix, in declaration order.

    available_pythons gives, per release, the Pythons its published wheels support. The matrix-wide
    Python list is intersected with it silently; a Python a release names itself must be supported.
    """
    problems: list[Problem] = []
    cells: list[Cell] = []
    file = str(matrix.path)
    for index, release in enumerate(matrix.torch):
        offered = available_pythons.get(release, set())
        if release.python is not None:
            for p_index, python in enumerate(release.python):
                if python not in offered:
                    key = f"torch[{index}].python[{p_index}]"
                    allowed = ", ".join(str(v) for v in sorted(offered)) or "none"
                    problems.append(
                        Problem(
                            file,
                            matrix.lines.line(key),
                            key,
                            f"torch {release.version} ({release.variant}) publishes no wheel for Python {python} (published: {allowed})",
                        )
                    )
            pythons = [p for p in release.python if p in offered]
        else:
            pythons = [p for p in matrix.python if p in offered]
            if not pythons:
                key = f"torch[{index}]"
                published = ", ".join(str(v) for v in sorted(offered)) or "none"
                problems.append(
                    Problem(
                        file,
                        matrix.lines.line(key),
                        key,
                        f"torch {release.version} ({release.variant}) publishes wheels for Python {published}, none of "
                        "them in python: give this release its own python list, or remove it",
                    )
                )
        for python in pythons:
            for driver in matrix.drivers:
                cells.append(Cell(release, python, driver))

    for index, rule in enumerate(matrix.exclude):
        if not any(rule_matches(rule, c) for c in cells):
            key = f"exclude[{index}]"
            problems.append(
                Problem(
                    file,
                    matrix.lines.line(key),
                    key,
                    "matches no cell of the matrix (allowed: a rule that removes one)",
                )
            )
    cells = [c for c in cells if not any(rule_matches(rule, c) for rule in matrix.exclude)]
    for index, rule in enumerate(matrix.include):
        key = f"include[{index}]"
        matched = False
        for release in matrix.torch:
            assert rule.torch is not None and rule.python is not None
            if not rule_matches(
                CellRule(torch=rule.torch, variant=rule.variant), Cell(release, rule.python, matrix.drivers[0])
            ):
                continue
            rule_driver = next((d for d in matrix.drivers if d.major == rule.driver), None)
            if rule_driver is None:
                problems.append(
                    Problem(file, matrix.lines.line(key), key, f"driver {rule.driver} is not in driver.versions")
                )
                break
            if rule.python not in available_pythons.get(release, set()):
                problems.append(
                    Problem(
                        file,
                        matrix.lines.line(key),
                        key,
                        f"torch {release.version} publishes no wheel for Python {rule.python}",
                    )
                )
                break
            cell = Cell(release, rule.python, rule_driver)
            if cell not in cells:
                cells.append(cell)
            matched = True
        if not matched and not any(p.key == key for p in problems):
            problems.append(Problem(file, matrix.lines.line(key), key, "matches no torch release of the matrix"))
    if not cells and not problems:
        key = "exclude" if matrix.exclude else "torch"
        problems.append(Problem(file, matrix.lines.line(key), key, "the matrix expands to no cell at all"))
    if problems:
        raise MatrixError(problems)
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
