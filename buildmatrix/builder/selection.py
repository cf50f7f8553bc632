"""The cells a command works on: the matrix loaded, its cells expanded against the registry's answers, its builds
planned from every cell (so a selection never changes one), and the selection applied; and each selected cell's and
build's runner, with this machine's interpreters."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from buildmatrix.builder.runners.local import LocalRunner
from buildmatrix.builder.runners.select import RunnerPlan, plan_runners
from buildmatrix.builder.workspace import Workspace
from buildmatrix.errors import UserError
from buildmatrix.model.builds import Build, plan_builds
from buildmatrix.model.cells import Cell, Selection, expand
from buildmatrix.model.loader import load_matrix
from buildmatrix.model.matrix import Matrix
from buildmatrix.model.registry import Registry, published_pythons
from buildmatrix.util.http import NETWORK_DEADLINE
from buildmatrix.vocab import RunnerName


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
