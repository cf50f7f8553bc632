#!/usr/bin/env python3
"""Benchmark (not a test): the figures of one full matrix run, from its records (wheels/results/builds/*.json and
cells/*.json, as `python -m torch_buildmatrix build` wrote them), side by side: the wall time against the 60-minute
goal, core-minutes by kind, what the matrix would cost without test tiers, the fan-out's critical path against the
15-minute goal and the single machine's lower bound.

  run         first build or cell started to last finished (the records of that run: `--since` leaves out older ones,
              e.g. builds reused up to date), builds and cells counted with their statuses and the deep tiers';
  kinds       each step's seconds counted as one core (a compile step may use more: the records do not say how many):
              compile (step `build`), deep tests (`deep`), quick tests (`smoke`), set-up (sdk, build-env, smoke-env,
              image) apart, and tool steps (every other: source, interpreter, check, publish, ...); downloads happen
              inside the set-up steps, which record one time each: the download time is told apart from the run's
              logs (each record's `log`), as the sum of uv's "Prepared N packages in T" lines (downloading and
              unpacking wheels into uv's cache; a package already cached is not prepared again);
  no tiers    every cell running its build's deep tier too: the deep step's seconds x the build's recorded cells (as
              scripts/bench_tiers.py computes it), added to the run's core-minutes;
  fan-out     the critical path: max over builds of the build's steps plus its slowest cell's (each with its own
              set-up: the build's sdk and build-env, the cell's smoke-env), and the coarser slowest build plus slowest
              cell of any build; a CI job's start (checkout, installing the tool, fetching the build's wheel) is not
              in the records and not counted;
  machine     the single machine's lower bound: core-minutes / cores (2 by default);
  disk        with `--disk-log FILE` (lines "<unix time> <used bytes>" a sampler wrote during the run): the peak
              minus the first sample.

Run from the repository root after the run:
  python scripts/bench_full_matrix.py [--results wheels/results] [--since UNIX_TIME] [--cores 2] [--disk-log FILE]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

from bench_tiers import build_tiers  # noqa: E402

from torch_buildmatrix.builder.records.model import BuildResult, CellResult  # noqa: E402
from torch_buildmatrix.builder.records.store import ResultStore  # noqa: E402
from torch_buildmatrix.vocab import Step  # noqa: E402

WALL_GOAL_MIN = 60.0
CRITICAL_PATH_GOAL_MIN = 15.0


class Kind(StrEnum):
    """What a step's time is spent on, for the core-minutes by kind (in the order printed)."""

    TOOL = "tool steps"
    COMPILE = "compile"
    DEEP = "deep tests"
    QUICK = "quick tests"
    SETUP = "set-up"


KIND_OF_STEP = {
    Step.BUILD: Kind.COMPILE,
    Step.DEEP: Kind.DEEP,
    Step.SMOKE: Kind.QUICK,
    Step.SDK: Kind.SETUP,
    Step.BUILD_ENV: Kind.SETUP,
    Step.SMOKE_ENV: Kind.SETUP,
    Step.IMAGE: Kind.SETUP,
}
SETUP_STEPS = tuple(step for step, kind in KIND_OF_STEP.items() if kind == Kind.SETUP)

Record = BuildResult | CellResult
R = TypeVar("R", BuildResult, CellResult)


_PREPARED = re.compile(r"^Prepared \d+ packages? in (?:(\d+)m )?(\d+(?:\.\d+)?)(ms|s)\s*$", re.MULTILINE)


def prepared_seconds(log: str) -> float:
    """The seconds uv spent preparing (downloading and unpacking) packages, from its "Prepared 8 packages in 19.44s",
    "in 512ms" or "in 1m 05s" lines in a step log."""
    total = 0.0
    for found in _PREPARED.finditer(log):
        minutes_part, value, unit = found.groups()
        total += int(minutes_part or 0) * 60 + float(value) / (1000 if unit == "ms" else 1)
    return total


def run_prepared_seconds(records: Sequence[Record], wheels: Path) -> tuple[float, int]:
    """uv's preparing time summed over the logs of the run's records (paths relative to `wheels`), and how many logs
    were read (a record without a log, or whose log is gone, adds nothing)."""
    total, read = 0.0, 0
    for record in records:
        if record.log is None:
            continue
        try:
            text = (wheels / record.log).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        total += prepared_seconds(text)
        read += 1
    return total, read


def kind_of(step: str) -> Kind:
    return KIND_OF_STEP.get(Step(step), Kind.TOOL)


def of_run(records: Sequence[R], since: float) -> list[R]:
    """The records a run wrote: started at or after `since`, and finished."""
    return [r for r in records if r.started >= since and r.finished is not None]


def wall_seconds(records: Sequence[Record]) -> float:
    """The first record started to the last finished."""
    return max((r.finished or r.started) for r in records) - min(r.started for r in records) if records else 0.0


def seconds_by_kind(records: Sequence[Record]) -> dict[Kind, float]:
    totals = dict.fromkeys(Kind, 0.0)
    for record in records:
        for step in record.steps:
            totals[kind_of(step.name)] += step.seconds
    return totals


def seconds_by_step(records: Sequence[Record], steps: Sequence[Step]) -> dict[str, float]:
    totals = dict.fromkeys((str(s) for s in steps), 0.0)
    for record in records:
        for step in record.steps:
            if step.name in totals:
                totals[step.name] += step.seconds
    return totals


def statuses(records: Sequence[Record]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        counts[str(record.status)] = counts.get(str(record.status), 0) + 1
    return counts


def deep_statuses(cells: Sequence[CellResult]) -> dict[str, int]:
    """The deep tiers run, by what they found (each counted once, on the cell that ran it)."""
    counts: dict[str, int] = {}
    for tier in build_tiers(cells):
        if tier.deep_cell is not None and tier.deep_cell.deep is not None:
            status = str(tier.deep_cell.deep.status)
            counts[status] = counts.get(status, 0) + 1
    return counts


def extra_without_tiers(cells: Sequence[CellResult]) -> float:
    """The seconds every cell running its build's deep tier would add to the run: deep x cells, less the deep run."""
    return sum(t.without_tiers_seconds - t.deep_seconds for t in build_tiers(cells))


def setup_seconds(record: Record) -> float:
    return sum(s.seconds for s in record.steps if s.name in SETUP_STEPS)


@dataclass(frozen=True)
class CriticalPath:
    """The fan-out's longest chain: a build's job, then its slowest cell's job (the deep cell's, as a rule)."""

    build: BuildResult
    cell: CellResult | None  # None: no cell of the build among the records

    @property
    def seconds(self) -> float:
        return self.build.seconds + (self.cell.seconds if self.cell else 0.0)

    @property
    def setup_seconds(self) -> float:
        return setup_seconds(self.build) + (setup_seconds(self.cell) if self.cell else 0.0)


def critical_path(builds: Sequence[BuildResult], cells: Sequence[CellResult]) -> CriticalPath | None:
    """Max over builds of the build's steps plus its slowest recorded cell's; None without builds."""
    paths = []
    for build in builds:
        own = [c for c in cells if c.cell.build.id == build.id]
        paths.append(CriticalPath(build, max(own, key=lambda c: c.seconds) if own else None))
    return max(paths, key=lambda p: p.seconds, default=None)


@dataclass(frozen=True)
class DiskGrowth:
    first: tuple[float, int]  # (unix time, used bytes)
    peak: tuple[float, int]
    samples: int

    @property
    def grown(self) -> int:
        return self.peak[1] - self.first[1]


def disk_growth(text: str, source: str) -> DiskGrowth:
    """The peak of a sampler's "<unix time> <used bytes>" lines above its first; ValueError naming the line."""
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError("expected two fields")
            samples.append((float(fields[0]), int(fields[1])))
        except ValueError as exc:
            raise ValueError(f"{source}:{number}: {line!r:.80}: not '<unix time> <used bytes>' ({exc})") from None
    if not samples:
        raise ValueError(f"{source}: no samples")
    return DiskGrowth(samples[0], max(samples, key=lambda s: s[1]), len(samples))


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none"


def against(value_s: float, goal_min: float) -> str:
    verdict = "within" if value_s <= goal_min * 60 else "over"
    return f"{verdict} the {goal_min:.0f}-minute goal by {abs(goal_min * 60 - value_s) / 60:.1f} min"


def report(
    builds: Sequence[BuildResult],
    cells: Sequence[CellResult],
    cores: int,
    results: str,
    since: float,
    *,
    prepared: tuple[float, int] | None = None,
) -> list[str]:
    """The figures' lines, from the run's records (already chosen by of_run); `prepared`: uv's preparing seconds in
    the run's logs and how many logs were read (run_prepared_seconds), None when the logs were not read."""
    records: list[Record] = [*builds, *cells]
    if not records:
        return [f"run: no finished records in {results} started at or after {since:.0f}"]
    wall = wall_seconds(records)
    kinds = seconds_by_kind(records)
    total = sum(kinds.values())
    setup = seconds_by_step(records, SETUP_STEPS)
    extra = extra_without_tiers(cells)
    tiers = deep_statuses(cells)
    lines = [
        f"run: wall time {minutes(wall)} (first start to last finish), {against(wall, WALL_GOAL_MIN)} ({results}"
        + (f", records started at or after {since:.0f}" if since else "")
        + ")",
        f"run: {len(builds)} build(s): {counted(statuses(builds))}; {len(cells)} cell(s): {counted(statuses(cells))}; "
        f"deep tiers run: {counted(tiers)}",
        f"kinds: {total / 60:.1f} core-min in steps (each step one core): "
        + ", ".join(f"{kind} {kinds[kind] / 60:.1f}" for kind in Kind),
        "kinds: set-up by step: "
        + ", ".join(f"{step} {s / 60:.1f}" for step, s in setup.items())
        + " core-min; "
        + (
            "download time: not told apart (the logs were not read)"
            if prepared is None
            else f"download and unpack (uv's Prepared lines in {prepared[1]} log(s)): "
            f"{prepared[0] / 60:.1f} core-min, inside set-up's {sum(setup.values()) / 60:.1f}"
        ),
        f"no tiers: every cell running its build's deep tier too would add {extra / 60:.1f} core-min: "
        f"{(total + extra) / 60:.1f} core-min ({(total + extra) / total if total else 0:.2f}x), lower bound on "
        f"{cores} cores {(total + extra) / cores / 60:.1f} min",
    ]
    path = critical_path(builds, cells)
    if path is not None:
        cell = f" + cell {path.cell.id} {minutes(path.cell.seconds)}" if path.cell else " (no cell recorded)"
        lines.append(
            f"fan-out: critical path {minutes(path.seconds)}: build {path.build.id} {minutes(path.build.seconds)}"
            f"{cell}, set-up included {minutes(path.setup_seconds)}; {against(path.seconds, CRITICAL_PATH_GOAL_MIN)}"
        )
    slowest_build = max(builds, key=lambda b: b.seconds, default=None)
    slowest_cell = max(cells, key=lambda c: c.seconds, default=None)
    if slowest_build and slowest_cell:
        coarse = slowest_build.seconds + slowest_cell.seconds
        lines.append(
            f"fan-out: slowest build {slowest_build.id} {minutes(slowest_build.seconds)} + slowest cell "
            f"{slowest_cell.id} {minutes(slowest_cell.seconds)} = {minutes(coarse)} (any builds; "
            f"{against(coarse, CRITICAL_PATH_GOAL_MIN)})"
        )
    lines.append(
        f"machine: lower bound on {cores} cores {total / cores / 60:.1f} min (core-minutes / cores) against the wall "
        f"time {minutes(wall)}: {total / cores / wall if wall else 0:.0%} of the cores busy in steps"
    )
    return lines


def disk_line(path: Path) -> str:
    growth = disk_growth(path.read_text(encoding="utf-8"), str(path))
    gib = 2**30
    return (
        f"disk: peak {growth.peak[1] / gib:.1f} GiB used, {growth.grown / gib:.1f} GiB above the first sample "
        f"({growth.first[1] / gib:.1f} GiB; {growth.samples} samples, peak "
        f"{(growth.peak[0] - growth.first[0]) / 60:.0f} min after the first)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="wheels/results", help="the results directory (default: %(default)s)")
    parser.add_argument("--since", type=float, default=0.0, help="only records started at or after this Unix time")
    parser.add_argument("--cores", type=int, default=2, help="the machine's cores, for the lower bound (default: 2)")
    parser.add_argument("--disk-log", type=Path, help='a sampler\'s "<unix time> <used bytes>" lines during the run')
    args = parser.parse_args()
    # No matrix rules: the run's records are read as records (types and paths), whatever matrix.yaml says now.
    store = ResultStore(Path(args.results))
    builds, damaged_builds = store.scan_builds()
    cells, damaged_cells = store.scan()
    for problem in [*damaged_builds, *damaged_cells]:
        print(f"damaged record left out: {problem}")
    run_builds, run_cells = of_run(builds, args.since), of_run(cells, args.since)
    prepared = run_prepared_seconds([*run_builds, *run_cells], Path(args.results).parent)
    for line in report(run_builds, run_cells, args.cores, args.results, args.since, prepared=prepared):
        print(line)
    if args.disk_log:
        try:
            print(disk_line(args.disk_log))
        except (OSError, ValueError) as exc:
            print(f"disk: {exc}")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
