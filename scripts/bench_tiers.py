#!/usr/bin/env python3
"""Benchmark (not a test): what test tiers (matrix.yaml smoke.tiers) save, from a run's records. Prints:

  per deep cell   its quick suite's seconds (step `smoke`) and its build's deep tier's (step `deep`), with counts;
  per build       its cells, and the deep tier's seconds that each of its other cells no longer spends: the time
                  saved per cell (a cell without tiers would run the deep tests too, in about the deep step's time);
  in total        the deep steps' seconds run (once per build) and what every cell running them would have cost
                  (deep seconds x the build's cells): the saving of the records' cells, in core-minutes.

A build whose deep cell has no record in the results says so and is left out of the totals. Run from the
repository root after a build (`nox -s build-matrix -- ...`):
  python scripts/bench_tiers.py [--results wheels/results]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from torch_buildmatrix.builder.records.model import BuildResult, CellResult  # noqa: E402
from torch_buildmatrix.builder.records.parse import RecordRules  # noqa: E402
from torch_buildmatrix.builder.records.store import ResultStore  # noqa: E402
from torch_buildmatrix.model.loader import load_matrix  # noqa: E402
from torch_buildmatrix.vocab import Step  # noqa: E402


def step_seconds(record: CellResult | BuildResult, name: Step) -> float | None:
    return next((s.seconds for s in record.steps if s.name == name), None)


@dataclass(frozen=True)
class BuildTier:
    """One build's recorded cells and the one that ran its deep tier (None: no tiers, or its deep cell has no record
    among them): what the deep tier cost once, and what it would cost on every cell."""

    build: str
    cells: tuple[CellResult, ...]
    deep_cell: CellResult | None

    @property
    def deep_seconds(self) -> float:
        return (step_seconds(self.deep_cell, Step.DEEP) or 0.0) if self.deep_cell else 0.0

    @property
    def without_tiers_seconds(self) -> float:
        """Every recorded cell of the build running the deep tests too, each in about the deep step's time."""
        return self.deep_seconds * len(self.cells)


def build_tiers(cells: Iterable[CellResult]) -> list[BuildTier]:
    """The records' cells by build (sorted by build id), each build with its deep cell if one of them is it."""
    by_build: dict[str, list[CellResult]] = {}
    for cell in cells:
        by_build.setdefault(cell.cell.build.id, []).append(cell)
    return [
        BuildTier(build_id, tuple(members), next((c for c in members if c.deep and c.deep.cell == c.id), None))
        for build_id, members in sorted(by_build.items())
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="wheels/results", help="the results directory (default: %(default)s)")
    parser.add_argument("--matrix", default="matrix.yaml")
    args = parser.parse_args()
    store = ResultStore(Path(args.results), RecordRules.of(load_matrix(Path(args.matrix).resolve())))
    cells, damaged = store.scan()
    for problem in damaged:
        print(f"damaged record left out: {problem}")
    ran_total = would_total = 0.0
    for tier in build_tiers(cells):
        ran, build_id, n_cells = tier.deep_cell, tier.build, len(tier.cells)
        if ran is None:
            print(
                f"build {build_id}: {n_cells} cell(s) recorded, none ran the deep tier (no tiers, or its deep "
                "cell has no record here)"
            )
            continue
        deep_s, quick_s = tier.deep_seconds, step_seconds(ran, Step.SMOKE)
        assert ran.deep is not None
        counts = ran.deep.smoke
        shown = f"{counts.passed} passed, {counts.skipped} skipped, {counts.failed} failed" if counts else "no counts"
        quick = ran.smoke
        quick_shown = f"{quick.passed} passed, {quick.skipped} skipped" if quick else "no counts"
        print(
            f"build {build_id}: deep cell {ran.id}: quick suite {quick_s or 0:.1f} s ({quick_shown}), deep tier "
            f"{deep_s:.1f} s ({shown}; {ran.deep.status})"
        )
        print(
            f"  {n_cells} cell(s) recorded: each of the other {n_cells - 1} saves about {deep_s:.1f} s "
            f"({deep_s / 60:.1f} min) of deep tests"
        )
        ran_total += deep_s
        would_total += tier.without_tiers_seconds
    print(
        f"deep tiers run: {ran_total / 60:.1f} core-min; every recorded cell running them: {would_total / 60:.1f} "
        f"core-min; saved: {(would_total - ran_total) / 60:.1f} core-min"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
