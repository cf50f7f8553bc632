"""The cells a command works on: the matrix loaded, its cells expanded against the registry's answers, its builds
planned from every cell (so a selection never changes one), and the selection applied; and each selected cell's and
build's runner, with this machine's interpreters. `list_matrix` is the `matrix` command: the selection with its runners,
checked as a GitHub Actions fan-out's plan job checks them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.builder.runners.local import LocalRunner
from torch_buildmatrix.builder.runners.select import RunnerPlan, plan_runners
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import MatrixTooLarge, UserError
from torch_buildmatrix.model.builds import Build, plan_builds
from torch_buildmatrix.model.cells import Cell, Selection, expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import Registry, published_pythons
from torch_buildmatrix.util.http import NETWORK_DEADLINE
from torch_buildmatrix.vocab import RunnerName


@dataclass(frozen=True)
class SelectOptions:
    """Which matrix, how to ask the registry, and which of its cells (empty: every one)."""

    matrix: Path = Path("matrix.yaml")
    offline: bool = False  # the cached registry answers only
    network_deadline: float = NETWORK_DEADLINE  # seconds for all its registry reads
    refresh: bool = False  # ask the registry again (build --force: its answers are a cache too)
    torch: tuple[str, ...] = ()
    python: tuple[str, ...] = ()
    sdk: tuple[str, ...] = ()
    variant: tuple[str, ...] = ()
    builds: tuple[str, ...] = ()  # only the cells of these builds


@dataclass(frozen=True)
class Loaded:
    """The matrix, its builds (planned from every cell, so a selection never changes one), the selected cells."""

    matrix: Matrix
    cells: list[Cell]  # selected
    builds: dict[str, Build]  # every build of the matrix, by id
    registry: Registry

    def builds_of(self, cells: list[Cell]) -> list[Build]:
        return [self.builds[i] for i in dict.fromkeys(c.build.id for c in cells)]


def load_cells(options: SelectOptions) -> Loaded:
    matrix = load_matrix(options.matrix.resolve())
    registry = Registry(
        Workspace.for_root(matrix.root).cache_dir / "registry",
        offline=options.offline,
        refresh=options.refresh,
        total=options.network_deadline,
    )
    available = published_pythons(matrix, registry)
    cells = expand(matrix, available)
    builds = plan_builds(matrix, cells, available)
    selected = Selection(options.torch, options.python, options.sdk, options.variant).apply(cells)
    if options.builds:
        unknown = [b for b in options.builds if b not in builds]
        if unknown:
            raise UserError(f"--build {unknown[0]}: no such build (the matrix's: {', '.join(builds)})")
        selected = [c for c in selected if c.build.id in options.builds]
    return Loaded(matrix, selected, builds, registry)


def runner_plan(matrix: Matrix, cells: list[Cell], runner: str | None, builds: list[Build]) -> RunnerPlan:
    """Each cell's and build's runner and why (`runner`, else matrix.yaml's runner), with this machine's
    interpreters."""
    asked = RunnerName(runner or matrix.runner)
    return plan_runners(cells, matrix, asked, LocalRunner(), [b.python for b in builds])


# GitHub Actions runs at most this many jobs from one matrix.
GITHUB_MATRIX_LIMIT = 256


def check_github_limit(cells: Sequence[Cell], builds: Sequence[Build] = ()) -> None:
    """Raise MatrixTooLarge beyond what one GitHub Actions matrix runs (the cells' and the builds' are two)."""
    for count, what in ((len(cells), "cells"), (len(builds), "builds")):
        if count > GITHUB_MATRIX_LIMIT:
            raise MatrixTooLarge(
                f"{count} {what}, but a GitHub Actions matrix runs at most {GITHUB_MATRIX_LIMIT} jobs; narrow the "
                "selection (--torch, --python, --sdk, --variant) and run the workflow once per part"
            )


@dataclass(frozen=True)
class MatrixOptions:
    """What the `matrix` command is asked: the selection; the runner asked for (None: matrix.yaml's); whether each
    cell's and build's runner is planned (the cell list alone needs none); and whether the selection is the plan of a
    GitHub Actions fan-out, checked before any job starts (the job limit, then a runner for every build)."""

    select: SelectOptions
    runner: str | None = None
    plan: bool = True
    github: bool = False


@dataclass(frozen=True)
class MatrixListing:
    """The selected cells and their builds, with the runner plan when one was asked for."""

    matrix: Matrix
    cells: list[Cell]
    builds: list[Build]
    plan: RunnerPlan | None = None

    @property
    def sdk_name(self) -> str | None:
        return self.matrix.sdk.name if self.matrix.sdk is not None else None

    def reasons(self) -> dict[str, str]:
        """Cell id -> its runner and why ("local: /usr/bin/python3.11")."""
        plan = self._plan()
        return {c.id: plan.choice(c).reason for c in self.cells}

    def build_reasons(self) -> dict[str, str]:
        plan = self._plan()
        return {b.id: plan.choice_for(b.python).reason for b in self.builds}

    def runners(self) -> dict[Python, RunnerName]:
        """Each Python's runner, for the Pythons a runner serves."""
        return {p: r for p, c in self._plan().by_python.items() if (r := c.runner) is not None}

    @property
    def problems(self) -> tuple[str, ...]:
        """What no runner can build here."""
        return tuple(self.plan.problems) if self.plan is not None else ()

    def _plan(self) -> RunnerPlan:
        if self.plan is None:
            raise ValueError("the listing was made without a runner plan (MatrixOptions.plan)")
        return self.plan


def list_matrix(options: MatrixOptions) -> MatrixListing:
    """The selection and, as asked, its runner plan; for a GitHub fan-out, MatrixTooLarge beyond the job limit
    (before any plan is made) and the plan's own error when a build has no runner here."""
    loaded = load_cells(options.select)
    cells = loaded.cells
    builds = loaded.builds_of(cells)
    if options.github:
        check_github_limit(cells, builds)
    if not (options.plan or options.github):
        return MatrixListing(loaded.matrix, cells, builds)
    plan = runner_plan(loaded.matrix, cells, options.runner, builds)
    if options.github:
        plan.check()
    return MatrixListing(loaded.matrix, cells, builds, plan)
