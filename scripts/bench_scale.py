#!/usr/bin/env python3
"""Benchmark (not a test): how `matrix` and `compat-table` scale with the number of cells.

It makes a synthetic project per size (releases x 10 Pythons x 10 versions of a wheel SDK, every cell passed with a
real tiny wheel, the registry's answer cached so nothing is read from the network), then times the commands as a
user runs them (`python -m torch_buildmatrix ...`, one process each), side by side in one run:

  matrix --offline              the expanded cells as a table, each with its runner
  matrix --offline --json       the same as JSON
  compat-table --offline        first publish: records, table, docs, page, index of every wheel, all checked
  compat-table --offline        again, on the live site: its ledger and table as the base, every wheel carried
  compat-table --check          the committed docs against matrix.yaml

Time per cell that stays flat from one size to the next means linear. Run from the repository root:
    python scripts/bench_scale.py [--cells 1000 2500 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_wheels import make_wheel  # noqa: E402

from torch_buildmatrix.builder.records.model import CellResult, SmokeCounts, WheelRecord  # noqa: E402
from torch_buildmatrix.builder.records.store import ResultStore  # noqa: E402
from torch_buildmatrix.model.cells import expand  # noqa: E402
from torch_buildmatrix.model.loader import load_matrix  # noqa: E402
from torch_buildmatrix.model.registry import Registry  # noqa: E402
from torch_buildmatrix.publish.index import sha256_hex  # noqa: E402
from torch_buildmatrix.vocab import RunnerName, Status  # noqa: E402

PYTHONS = [f"3.{m}" for m in range(6, 16)]
DRIVERS = [f"{d}.0" for d in range(1, 11)]
README = "# bench\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n"


def make_project(root: Path, cells: int) -> Path:
    releases = max(1, cells // (len(PYTHONS) * len(DRIVERS)))
    (root / "plugin" / "tests").mkdir(parents=True)
    (root / "plugin" / "tests" / "test_smoke.py").write_text("def test_nothing():\n    pass\n")
    (root / "driver").mkdir()
    (root / "README.md").write_text(README)
    torch = "".join(f'  - {{version: "2.{minor}.0"}}\n' for minor in range(1, releases + 1))
    (root / "matrix.yaml").write_text(
        "schema-version: 2\n"
        "plugin: {distribution: torch-emu, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,\n"
        '  label: "torch.{torch_minor}.drv.{sdk_major}"}\n'
        "sdk: {kind: wheel, name: driver, id: 'drv{sdk_major}', distribution: emu-driver, source: driver,\n"
        f"  versions: {json.dumps(DRIVERS)}}}\n"
        f"python: {json.dumps(PYTHONS)}\n"
        f"torch:\n{torch}"
    )
    files = [
        f"torch-2.{minor}.0-cp3{p[2:]}-cp3{p[2:]}-manylinux_2_28_x86_64.whl"
        for minor in range(1, releases + 1)
        for p in PYTHONS
    ]
    cache = Registry(root / "build" / "cache" / "registry").cache_path("torch")
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"files": [{"filename": f, "url": f"https://x.invalid/{f}"} for f in files]}))
    matrix = load_matrix(root / "matrix.yaml")
    registry = Registry(root / "build" / "cache" / "registry", offline=True)
    registry.machine = "x86_64"
    wheels = root / "wheels"
    store = ResultStore(wheels / "results")
    drivers = {}
    assert matrix.sdk is not None
    for version in matrix.sdk.versions:
        wheel = make_wheel(wheels / "driver", "emu-driver", f"{version.version}.0+emu")
        drivers[version.version] = WheelRecord(wheel.name, sha256_hex(wheel.read_bytes()), f"driver/{wheel.name}")
    for cell in expand(matrix, {r: registry.pythons(r) for r in matrix.torch}):
        tag = f"{cell.python_tag}-{cell.python_tag}-linux_x86_64"
        wheel = make_wheel(
            wheels / f"torch{cell.torch.minor}", "torch-emu", f"0.1.0+{cell.local_version_label}", tag=tag
        )
        (wheels / "logs").mkdir(exist_ok=True)
        (wheels / "logs" / f"{cell.id}.log").write_text(f"# {cell.id}\n")
        store.save(
            CellResult(
                cell.key,
                "h",
                {},
                RunnerName.LOCAL,
                Status.PASSED,
                smoke=SmokeCounts(90, 0, 2),
                features={"ops": "passed", "streams": "passed"},
                wheel=WheelRecord(wheel.name, sha256_hex(wheel.read_bytes()), f"torch{cell.torch.minor}/{wheel.name}"),
                sdk_wheel=drivers[cell.key.sdk],
                log=f"logs/{cell.id}.log",
                started=1.7e9,
                finished=1.7e9 + 60,
            )
        )
    return root


def timed(root: Path, *args: str) -> tuple[float, float, float]:
    """Wall-clock seconds, and the CPU seconds the command used in user and in system (kernel) time: on a machine
    shared with other work the wall clock waits for the CPU, the CPU time does not. System time is mostly the kernel
    creating files (a first publish creates three per cell), whose cost swings with the file system's other work."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": "/dev/null"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"failed: torch-buildmatrix {' '.join(args)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


COMMANDS = [
    ("matrix --offline", ("matrix", "--offline")),
    ("matrix --offline --json", ("matrix", "--offline", "--json")),
    ("compat-table (first publish)", ("compat-table", "--offline")),
    ("compat-table (on the live site)", ("compat-table", "--offline")),
    ("compat-table --check", ("compat-table", "--check")),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, nargs="+", default=[1000, 2500, 10000])
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in COMMANDS}  # (wall, CPU) per size
    sizes = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        for wanted in args.cells:
            start = time.monotonic()
            root = make_project(Path(scratch) / f"n{wanted}", wanted)
            count = len(list((root / "wheels" / "results" / "cells").glob("*.json")))
            sizes.append(count)
            os.sync()  # the project's files written out before the timings, not during the first command
            print(f"{count} cells: project made in {time.monotonic() - start:.1f} s", flush=True)
            for name, argv in COMMANDS:
                wall, user, system = timed(root, *argv)
                rows[name].append((wall, user + system))
                cpu = f"{user + system:.2f} s CPU: {user:.2f} user + {system:.2f} sys"
                print(f"  {name}: {wall:.2f} s ({cpu})", flush=True)
            shutil.rmtree(root)
    print(
        f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall clock waits for the CPU; CPU time not)"
    )
    print(f"{'command':34}" + "".join(f"{n:>9} cells wall/CPU" for n in sizes) + "   CPU ms/cell at each size")
    for name, measured in rows.items():
        per = " ".join(f"{cpu / n * 1000:6.2f}" for (_wall, cpu), n in zip(measured, sizes, strict=True))
        figures = "".join(f"{wall:10.2f} s /{cpu:6.2f} s" for wall, cpu in measured)
        print(f"{name:34}" + figures + f"   {per}")


if __name__ == "__main__":
    main()
