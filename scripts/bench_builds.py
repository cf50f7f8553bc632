#!/usr/bin/env python3
"""Benchmark (not a test): builds apart from cells on this project's matrix. Prints, each with how it was measured:

  plan      builds and cells of the full plan (and of the cells without the free-threaded ones, and what the count would
            be with a build per variant or per Python), from matrix.yaml and the cached registry answers;
  noop      a warm rerun of the full matrix through nox, everything up to date: `nox -R -s build-matrix` (nox reuses its
            environment), `nox -s build-matrix` (it reinstalls the package first) and `python -m torch_buildmatrix
            build`; refused, saying what would run, unless every build and cell is up to date (it never starts a real
            build);
  release   one release's cells once its build exists: in a scratch copy of the project, the cheap torch 2.13 CPU
            Python 3.11 builds first (`--builds-only`, timed apart), then the cells alone (`build`, builds up to date).

A run's figures from its records (wall time, core-minutes by kind, the critical path): scripts/bench_full_matrix.py.

Run from the repository root:
  python scripts/bench_builds.py plan
  python scripts/bench_builds.py noop [--runs 3]
  python scripts/bench_builds.py release
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from torch_buildmatrix.builder.workspace import Workspace  # noqa: E402
from torch_buildmatrix.errors import MatrixError  # noqa: E402
from torch_buildmatrix.model.builds import plan_builds  # noqa: E402
from torch_buildmatrix.model.cellkey import LABEL_FIELDS, LABEL_TEXT, Template  # noqa: E402
from torch_buildmatrix.model.cells import Cell, expand  # noqa: E402
from torch_buildmatrix.model.loader import load_matrix  # noqa: E402
from torch_buildmatrix.model.matrix import Matrix  # noqa: E402
from torch_buildmatrix.model.registry import Registry, published_pythons  # noqa: E402


def load(offline: bool) -> tuple[Matrix, list[Cell], dict]:  # type: ignore[type-arg]
    matrix = load_matrix(REPO / "matrix.yaml")
    registry = Registry(Workspace.for_root(matrix.root).cache_dir / "registry", offline=offline)
    available = published_pythons(matrix, registry)
    return matrix, expand(matrix, available), available


def count(matrix: Matrix, cells: list[Cell], available: dict) -> int:  # type: ignore[type-arg]
    return len(plan_builds(matrix, cells, available))


def with_contract(matrix: Matrix, **changes: bool) -> Matrix:
    return replace(matrix, contract=replace(matrix.contract, build=replace(matrix.contract.build, **changes)))


def variant_label(matrix: Matrix) -> Template:
    text = matrix.naming.label.text.replace("{torch_minor}", "{torch_minor}.{variant}", 1)
    return Template.parse(text, LABEL_FIELDS, LABEL_TEXT)


def cmd_plan(args: argparse.Namespace) -> None:
    matrix, cells, available = load(args.offline)
    gil = [c for c in cells if not c.python.free_threaded]
    print(f"plan: {len(cells)} cells, {count(matrix, cells, available)} builds (matrix.yaml as declared)")
    print(f"plan: {len(gil)} cells without the free-threaded ones, {count(matrix, gil, available)} builds")
    for what, changes in (
        ("a build per variant (build.per-variant: true)", {"per_variant": True}),
        ("a build per Python (build.per-python: true)", {"per_python": True}),
    ):
        other, label = with_contract(matrix, **changes), what
        try:
            again = expand(other, available)
        except MatrixError:  # two builds of one minor would publish one file name: the label must carry the variant
            other = replace(other, naming=replace(other.naming, label=variant_label(other)))
            again = expand(other, available)
            label += f" and plugin.label {other.naming.label.text}"
        print(f"plan: with {label}: {len(again)} cells, {count(other, again, available)} builds")
    by_python: dict[str, int] = {}
    for cell in cells:
        by_python[str(cell.python)] = by_python.get(str(cell.python), 0) + 1
    print("plan: cells per Python: " + ", ".join(f"{p} {n}" for p, n in by_python.items()))


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False, env=env)
    return time.monotonic() - start, done


def pending_work(offline: bool) -> list[str]:
    """What a build of the full matrix would run now (planned, nothing run): builds and cells not up to date."""
    from torch_buildmatrix.builder.engine import Engine
    from torch_buildmatrix.builder.runners.base import CellRunners
    from torch_buildmatrix.builder.runners.local import LocalRunner
    from torch_buildmatrix.builder.runners.select import plan_runners, runners_for
    from torch_buildmatrix.vocab import RunnerName

    matrix, cells, available = load(offline)
    builds = plan_builds(matrix, cells, available)
    plan = plan_runners(cells, matrix, RunnerName(matrix.runner), LocalRunner(), [b.python for b in builds.values()])
    runners, _ = runners_for(plan, matrix)
    by_python = {p: runners[c.runner] for p, c in plan.by_python.items() if c.runner is not None}
    registry = Registry(Workspace.for_root(matrix.root).cache_dir / "registry", offline=offline)
    engine = Engine(
        matrix,
        Workspace.for_root(matrix.root),
        CellRunners(next(iter(runners.values())), by_python),
        registry,
        builds=builds,
    )
    todo = []
    for build in engine.builds_of(cells):
        planned = engine.plan_build(build)
        if planned.reusable is None:
            todo.append(f"build {build.id}")
            continue
        for cell in (c for c in cells if c.build.id == build.id):
            if engine.plan_cell(cell, build, planned.reusable).reusable is None:
                todo.append(cell.id)
    return todo


def cmd_noop(args: argparse.Namespace) -> None:
    todo = pending_work(args.offline)
    if todo:
        print(f"noop: not measured: {len(todo)} build(s) and cell(s) are not up to date ({', '.join(todo[:8])}...);")
        print("noop: build the full matrix first (`nox -s build-matrix -- --jobs 2`), then measure again")
        return
    offline = ["--offline"] if args.offline else []
    commands = {
        "nox -R -s build-matrix": ["nox", "-R", "-s", "build-matrix", "--", *offline],
        "nox -s build-matrix": ["nox", "-s", "build-matrix", "--", *offline],
        "python -m torch_buildmatrix build": [sys.executable, "-m", "torch_buildmatrix", "build", *offline],
    }
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for label, command in commands.items():
        seconds = []
        for _ in range(args.runs):
            elapsed, done = timed(command, env if command[0] == sys.executable else None)
            if done.returncode != 0 or " passed\n" in done.stdout or ": build\n" in done.stdout:
                print(f"noop: {label}: not a no-op (exit {done.returncode}); its output ends:\n{done.stdout[-2000:]}")
                return
            seconds.append(elapsed)
        print(f"noop: {label}: {statistics.median(seconds):.2f} s (median of {args.runs}: {fmt(seconds)})")


def fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def cmd_release(args: argparse.Namespace) -> None:
    from conftest import copy_project

    selection = ["--torch", args.torch, "--python", args.python, "--offline"]
    with tempfile.TemporaryDirectory(prefix="bench-builds-") as temp:
        root = copy_project(Path(temp) / "project")
        if (REPO / "build" / "cache" / "registry").is_dir():  # the registry's answers, so --offline works there
            shutil.copytree(REPO / "build" / "cache" / "registry", root / "build" / "cache" / "registry")
        env = {**os.environ, "PYTHONPATH": str(REPO)}

        def run(*extra: str) -> tuple[float, subprocess.CompletedProcess[str]]:
            start = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "torch_buildmatrix", "build", *selection, "--jobs", str(args.jobs), *extra],
                cwd=root,
                capture_output=True,
                text=True,
                check=False,
                env=env,
            )
            return time.monotonic() - start, done

        built, made = run("--builds-only")
        if made.returncode != 0:
            print(f"release: the builds failed:\n{made.stdout[-3000:]}{made.stderr[-2000:]}")
            return
        builds = made.stdout.count(": passed\n")
        tested, cells = run()
        passed, up = cells.stdout.count(": passed\n"), cells.stdout.count("up-to-date")
        print(f"release: torch {args.torch}, Python {args.python}: {builds} build(s) made in {built:.0f} s")
        print(
            f"release: its cells once their builds exist: {tested:.0f} s "
            f"({passed} cell(s) tested, {up} build(s) up to date, exit {cells.returncode})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--offline", action="store_true", help="use the cached registry answers only")
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("plan").set_defaults(func=cmd_plan)
    noop = sub.add_parser("noop")
    noop.add_argument("--runs", type=int, default=3)
    noop.set_defaults(func=cmd_noop)
    release = sub.add_parser("release")
    release.add_argument("--torch", default="2.13")
    release.add_argument("--python", default="3.11")
    release.add_argument("--jobs", type=int, default=2)
    release.set_defaults(func=cmd_release)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
