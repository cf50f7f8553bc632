"""The warm no-op of the full matrix: how long `build` takes when every build and cell is up to date (issue 36: at most
3 s through `nox -s build-matrix`, median of 5 runs). Prints the median and every run, per command.

    python scripts/bench_noop.py [--runs 5] [--stand-in] [--offline] [--profile FILE]

Measured in the repository when its wheels/ holds the full matrix, every record up to date (after
`nox -s build-matrix -- --jobs 2`); refused otherwise, saying what would run. With --stand-in, measured in a scratch
copy of the project made warm by stand-in records instead: for every build and cell the engine plans, a passed
record with exactly the inputs it plans (so `build` finds it up to date), naming a stand-in wheel of --wheel-mib MiB
(the engine checks every wheel's sha256 on a no-op, so the size counts). Nothing is built in either mode; the
stand-in tree says nothing about builds, only about the no-op's cost: planning, records, wheels' hashes, the table.

Commands timed: `nox -s build-matrix` (nox reinstalls the package first: the issue's figure), `nox -R -s
build-matrix` (nox reuses its environment) and `python -m torch_buildmatrix build`; one untimed warm-up run of each
first. --profile FILE writes a cProfile of one in-process `build` (read it with `python -m pstats FILE`).
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from torch_buildmatrix.builder.engine import Engine  # noqa: E402
from torch_buildmatrix.builder.records.model import BuildResult, CellResult, WheelRecord  # noqa: E402
from torch_buildmatrix.builder.runners.base import CellRunners  # noqa: E402
from torch_buildmatrix.builder.runners.local import LocalRunner  # noqa: E402
from torch_buildmatrix.builder.runners.select import plan_runners, runners_for  # noqa: E402
from torch_buildmatrix.builder.workspace import Workspace  # noqa: E402
from torch_buildmatrix.model.builds import Build, plan_builds  # noqa: E402
from torch_buildmatrix.model.cells import Cell, expand  # noqa: E402
from torch_buildmatrix.model.loader import load_matrix  # noqa: E402
from torch_buildmatrix.model.registry import Registry, published_pythons  # noqa: E402
from torch_buildmatrix.util.fingerprint import file_sha256  # noqa: E402
from torch_buildmatrix.vocab import RunnerName, Status  # noqa: E402

# What a copy of the project needs to build and to be a nox project (the package is the project's own tool).
PROJECT_PARTS = (
    *("matrix.yaml", "plugin", "driver", "patches", "torch_buildmatrix", "pyproject.toml", "noxfile.py"),
    *("README.md", "LICENSE", "docs", "matrix.schema.json"),
)


def planning_engine(root: Path, offline: bool) -> tuple[Engine, list[Cell], dict[str, Build]]:
    """The engine a full `build` of the project at root would plan with, and its cells and builds."""
    matrix = load_matrix(root / "matrix.yaml")
    workspace = Workspace.for_root(matrix.root)
    registry = Registry(workspace.cache_dir / "registry", offline=offline)
    available = published_pythons(matrix, registry)
    cells = expand(matrix, available)
    builds = plan_builds(matrix, cells, available)
    plan = plan_runners(cells, matrix, RunnerName(matrix.runner), LocalRunner(), [b.python for b in builds.values()])
    runners, _ = runners_for(plan, matrix)
    by_python = {p: runners[c.runner] for p, c in plan.by_python.items() if c.runner is not None}
    engine = Engine(matrix, workspace, CellRunners(next(iter(runners.values())), by_python), registry, builds=builds)
    return engine, cells, builds


def pending(root: Path, offline: bool) -> list[str]:
    """What a build of the full matrix would run now (planned, nothing run)."""
    engine, cells, _ = planning_engine(root, offline)
    todo = []
    for build in engine.builds_of(cells):
        planned = engine.plan_build(build)
        if planned.reusable is None:
            todo.append(f"build {build.id}")
            continue
        todo += [
            c.id
            for c in cells
            if c.build.id == build.id and engine.plan_cell(c, build, planned.reusable).reusable is None
        ]
    return todo


def _stand_in_wheel(wheels: Path, rel: str, mib: float) -> WheelRecord:
    path = wheels / rel
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(int(mib * (1 << 20))))
    return WheelRecord(filename=path.name, sha256=file_sha256(path), path=rel)


def make_warm(root: Path, offline: bool, mib: float) -> tuple[int, int]:
    """Write a passed record, with the inputs the engine plans, for every build and cell; returns their counts."""
    engine, cells, _ = planning_engine(root, offline)
    wheels, store, matrix = engine.workspace.wheels_dir, engine.store, engine.matrix
    made_builds = made_cells = 0
    for build in engine.builds_of(cells):
        planned = engine.plan_build(build)
        tag = f"cp{build.python.major}{build.python.minor}-cp{build.python.major}{build.python.minor}"
        tags = tag if build.key.python is not None else "py3-none"
        version = f"{matrix.plugin.version}+{build.local_version_label}"
        name = matrix.plugin.distribution.replace("-", "_")
        wheel = _stand_in_wheel(wheels, f"torch{build.key.torch_minor}/{name}-{version}-{tags}-linux_x86_64.whl", mib)
        sdk_wheel = None
        if engine.needs_sdk_wheel and build.sdk is not None and matrix.sdk is not None:
            sdk_name = (matrix.sdk.distribution or "sdk").replace("-", "_")
            directory = store.rules.sdk_directory if store.rules is not None else matrix.sdk.name
            rel = f"{directory}/{sdk_name}-{build.sdk.version}-py3-none-linux_x86_64.whl"
            sdk_wheel = _stand_in_wheel(wheels, rel, mib)
        runner = engine.runners.of(build.python)
        made = BuildResult(
            build=build.key,
            inputs_hash=planned.inputs_hash,
            inputs=planned.inputs,
            runner=runner.name,
            python=str(build.python),
            status=Status.PASSED,
            wheel=wheel,
            sdk_wheel=sdk_wheel,
            finished=time.time(),
            patches=build.release.patches,
        )
        store.save_build(made)
        made_builds += 1
        for cell in (c for c in cells if c.build.id == build.id):
            tested = engine.plan_cell(cell, build, made)
            store.save(
                CellResult(
                    cell=cell.key,
                    inputs_hash=tested.inputs_hash,
                    inputs=tested.inputs,
                    runner=engine.runners.of(cell.python).name,
                    status=Status.PASSED,
                    wheel=wheel,
                    sdk_wheel=sdk_wheel,
                    finished=time.time(),
                    patches=cell.torch.patches,
                )
            )
            made_cells += 1
    return made_builds, made_cells


def copy_project(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "_build_info.py", ".nox")
    dest.mkdir(parents=True, exist_ok=True)
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, dest / part)
    return dest


def timed(command: list[str], root: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False, env=env)
    return time.monotonic() - start, done


def measure(root: Path, runs: int, offline: bool) -> None:
    extra = ["--offline"] if offline else []
    commands = {
        "nox -s build-matrix": ["nox", "-s", "build-matrix", "--", *extra],
        "nox -R -s build-matrix": ["nox", "-R", "-s", "build-matrix", "--", *extra],
        "python -m torch_buildmatrix build": [sys.executable, "-m", "torch_buildmatrix", "build", *extra],
    }
    # As a user's shell has it: Python writes its bytecode caches (a no-op otherwise compiles the package each time).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(root)}
    for label, command in commands.items():
        timed(command, root, env)  # warm-up: nox makes its environment, caches fill
        seconds = []
        for _ in range(runs):
            elapsed, done = timed(command, root, env)
            if done.returncode != 0 or "queued" in done.stdout:
                print(
                    f"noop: {label}: not a no-op (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
                )
                return
            seconds.append(elapsed)
        runs_text = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"noop: {label}: median {statistics.median(seconds):.2f} s of {runs} runs ({runs_text})")


def profile(root: Path, offline: bool, out: Path) -> None:
    command = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "torch_buildmatrix", "build"]
    timed(command + (["--offline"] if offline else []), root, {**os.environ, "PYTHONPATH": str(root)})
    print(f"noop: profile of one `build` in {out} (python -m pstats {out})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stand-in", action="store_true", help="measure in a scratch copy warmed by stand-in records")
    parser.add_argument("--wheel-mib", type=float, default=1.0, help="size of each stand-in wheel (default 1 MiB)")
    parser.add_argument("--offline", action="store_true", help="use only the registry answers already cached")
    parser.add_argument("--profile", type=Path, help="also write a cProfile of one in-process `build` here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy (its path is printed)")
    args = parser.parse_args()
    if not args.stand_in:
        todo = pending(REPO, args.offline)
        if todo:
            print(f"noop: not measured: {len(todo)} build(s) and cell(s) are not up to date ({', '.join(todo[:6])}...)")
            print("noop: build the full matrix first (`nox -s build-matrix -- --jobs 2`), or measure with --stand-in")
            return 1
        measure(REPO, args.runs, args.offline)
        if args.profile:
            profile(REPO, args.offline, args.profile.resolve())
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="bench-noop-"))
    try:
        root = copy_project(scratch / "project")
        builds, cells = make_warm(root, args.offline, args.wheel_mib)
        print(f"noop: stand-in records for {builds} builds and {cells} cells in {root} ({args.wheel_mib:g} MiB wheels)")
        measure(root, args.runs, args.offline)
        if args.profile:
            profile(root, args.offline, args.profile.resolve())
    finally:
        if args.keep:
            print(f"noop: kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
