#!/usr/bin/env python3
"""Benchmark of the orchestration (not a test): prints figures measured side by side in one run.

1. cold single cell: `torch-buildmatrix build` of one cell with the compiler cache off, forced;
2. the same work done bare: uv environments, `pip wheel --no-build-isolation`, pytest of the smoke suite;
   the orchestration's overhead is (1) / (2) - 1 (target <= 15 %);
3. no-op run: every cell of the matrix that has an up-to-date record, planned and skipped.

Run from the repository root:  python scripts/bench_matrix.py [--torch 2.13] [--driver 2]
It works on a copy of the project in a temporary directory, so wheels/ of the checkout is untouched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from torch_buildmatrix.builder.engine import Engine  # noqa: E402
from torch_buildmatrix.builder.runners.local import LocalRunner  # noqa: E402
from torch_buildmatrix.builder.smoke import pytest_args, stage_tests  # noqa: E402
from torch_buildmatrix.builder.toolenv import build_tools, smoke_tools  # noqa: E402
from torch_buildmatrix.builder.workspace import Workspace  # noqa: E402
from torch_buildmatrix.model.cells import Selection, expand  # noqa: E402
from torch_buildmatrix.model.loader import load_matrix  # noqa: E402
from torch_buildmatrix.model.registry import Registry  # noqa: E402

PROJECT_PARTS = ("matrix.yaml", "plugin", "driver", "patches")


def copy_project(dest: Path) -> Path:
    root = dest / "project"
    root.mkdir()
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, root / part, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        else:
            shutil.copy2(source, root / part)
    return root


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.monotonic()
    proc = subprocess.run(argv, check=False, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed


def bare_cell(
    root: Path,
    work: Path,
    *,
    torch: Version,
    torch_req: str,
    find_links: list[str],
    driver_wheel: Path,
    python: Path,
    env: dict[str, str],
) -> float:
    """What a person would type to build and smoke-test the cell without the orchestration."""
    links = [arg for loc in find_links for arg in ("--find-links", loc)]
    build_env, smoke_env, dist = work / "b-env", work / "s-env", work / "dist"
    start = time.monotonic()
    timed(["uv", "venv", "-q", "--python", str(python), str(build_env)], env, work)
    timed(
        [
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            str(build_env / "bin/python"),
            *links,
            torch_req,
            str(driver_wheel),
            "pip",
            *build_tools(torch),
        ],
        env,
        work,
    )
    tree = work / "plugin"
    shutil.copytree(root / "plugin", tree)
    timed(
        [
            str(build_env / "bin/python"),
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(tree),
        ],
        env,
        work,
    )
    [wheel] = list(dist.glob("*.whl"))
    timed(["uv", "venv", "-q", "--python", str(python), str(smoke_env)], env, work)
    timed(
        [
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            str(smoke_env / "bin/python"),
            *links,
            torch_req,
            str(wheel),
            str(driver_wheel),
            *smoke_tools(torch),
        ],
        env,
        work,
    )
    tests = stage_tests(tree / "tests", work / "smoke")
    subprocess.run(  # the figure is the time; a failing smoke test still ran the whole suite
        [str(smoke_env / "bin/python"), *pytest_args(tests, work / "junit.xml", work / "features.json")],
        check=False,
        env=env,
        cwd=work / "smoke",
        capture_output=True,
    )
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch", default="2.13")
    parser.add_argument("--python", default="3.11")
    parser.add_argument("--driver", default="2")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-matrix-") as tmp:
        root = copy_project(Path(tmp))
        env = {**os.environ, "CCACHE_DISABLE": "1", "PYTHONPATH": str(REPO)}
        select = ["--torch", args.torch, "--python", args.python, "--sdk", args.driver]
        cli = [
            sys.executable,
            "-m",
            "torch_buildmatrix",
            "build",
            "--matrix",
            str(root / "matrix.yaml"),
            "--runner",
            "local",
            *select,
        ]

        timed(cli, env, root)  # warm the uv cache and build the driver wheel once, outside the measurement
        orchestrated = timed([*cli, "--force"], env, root)

        matrix = load_matrix(root / "matrix.yaml")
        workspace = Workspace.for_root(root)
        registry = Registry(workspace.cache_dir / "registry")
        cells = expand(matrix, {r: registry.pythons(r) for r in matrix.torch})
        [cell] = Selection((args.torch,), (args.python,), (args.driver,)).apply(cells)
        runner = LocalRunner()
        assert cell.sdk is not None
        driver_wheel = next((workspace.cache_dir / "driver-wheels").rglob(f"emu_driver-{cell.sdk.version}*.whl"))
        find_links = registry.find_links_locations(cell.torch.wheels) if cell.torch.wheels.kind != "registry" else []
        work = Path(tmp) / "bare"
        work.mkdir()
        bare = bare_cell(
            root,
            work,
            torch=cell.torch.version,
            torch_req=f"torch=={cell.torch.requirement_version}",
            find_links=find_links,
            driver_wheel=driver_wheel,
            python=runner.interpreter(cell).executable,
            env=env,
        )

        engine = Engine(matrix, workspace, runner, registry)
        start = time.monotonic()
        planned = engine.plan(cells)
        plan_seconds = time.monotonic() - start
        recorded = [p.cell.id for p in planned if p.reusable is not None]
        noop = timed(
            [
                sys.executable,
                "-m",
                "torch_buildmatrix",
                "build",
                "--matrix",
                str(root / "matrix.yaml"),
                "--runner",
                "local",
                *select,
            ],
            env,
            root,
        )

    print(f"cell {cell.id} (compiler cache off)")
    print(f"  cold single cell, orchestrated : {orchestrated:8.1f} s")
    print(f"  same work done bare            : {bare:8.1f} s")
    print(f"  orchestration overhead         : {100 * (orchestrated / bare - 1):8.1f} %   (target <= 15 %)")
    print(f"  no-op rerun of the cell        : {noop:8.1f} s")
    print(
        f"  planning all {len(cells)} cells of the matrix: {plan_seconds:6.2f} s "
        f"({len(recorded)} with an up-to-date record)"
    )


if __name__ == "__main__":
    main()
