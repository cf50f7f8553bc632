#!/usr/bin/env python3
"""Benchmark (not a test): time from `outdated --apply` to a published wheel, for a release matrix.yaml lacks.

In a scratch copy of the project, the torch 2.13 entry is taken out of matrix.yaml; then, timed one after the other:
1. `torch-buildmatrix outdated --apply --variant cpu`: finds 2.13.0 again (the CPU build in pip's find-links; the
   registry's 2.13.0 is the 3 GB CUDA build), adds it as a coverage cell and runs the drift probe on it;
2. `torch-buildmatrix build --torch 2.13`: builds, smoke-tests and publishes the new cell's wheel;
3. `torch-buildmatrix compat-table`: the compatibility table, install page and wheel index that list it.

Run from the repository root:  python scripts/bench_outdated.py [--no-probe] [--keep DIR]
The checkout's matrix.yaml, wheels/ and build/ are untouched; the compiler cache (ccache) is shared as usual.
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
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ("matrix.yaml", "matrix.schema.json", "plugin", "driver", "patches", "README.md", "docs")
MINOR = "2.13"


def copy_project(root: Path) -> None:
    root.mkdir(parents=True)
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(
                source,
                root / part,
                ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "_build_info.py"),
            )
        elif source.is_file():
            shutil.copy2(source, root / part)


def remove_minor(matrix: Path, minor: str) -> str:
    """Take the minor's torch entry out of matrix.yaml (round trip, comments kept); returns the version removed."""
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    yaml.preserve_quotes = True
    doc = yaml.load(matrix.read_text())
    index = next(
        i for i, item in enumerate(doc["torch"]) if Version(str(item["version"])).base_version.startswith(minor + ".")
    )
    removed = str(doc["torch"][index]["version"])
    del doc["torch"][index]
    with matrix.open("w") as handle:
        yaml.dump(doc, handle)
    return removed


def timed(label: str, argv: list[str], root: Path, env: dict[str, str], log: Path) -> float:
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - start
    with log.open("a") as handle:
        handle.write(
            f"$ {' '.join(argv)}  # {label}: exit {proc.returncode}, {elapsed:.1f} s\n{proc.stdout}{proc.stderr}\n"
        )
    if proc.returncode != 0:
        sys.exit(
            f"{label} failed (exit {proc.returncode}); output in {log}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-probe", action="store_true", help="outdated --apply --no-probe (planning only)")
    parser.add_argument("--keep", type=Path, help="work in this directory (must not exist) and keep it")
    args = parser.parse_args()

    work = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="bench-outdated-")) / "project"
    copy_project(work)
    removed = remove_minor(work / "matrix.yaml", MINOR)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    cli = [sys.executable, "-m", "torch_buildmatrix"]
    log = work / "bench-outdated.log"

    apply = [*cli, "outdated", "--apply", "--variant", "cpu"] + (["--no-probe"] if args.no_probe else [])
    t_apply = timed("outdated --apply", apply, work, env, log)
    text = (work / "matrix.yaml").read_text()
    if f'version: "{removed}"' not in text:
        sys.exit(f"outdated --apply did not add torch {removed} back; see {log}")
    t_build = timed("build", [*cli, "build", "--torch", MINOR, "--runner", "local"], work, env, log)
    t_table = timed("compat-table", [*cli, "compat-table"], work, env, log)

    wheels = sorted((work / "wheels" / f"torch{MINOR}").glob("*.whl"))
    index = work / "wheels" / "site" / "simple" / "torch-emu" / "index.html"
    listed = [w.name for w in wheels if index.is_file() and w.name in index.read_text()]
    if not listed:
        sys.exit(f"no torch {MINOR} wheel published in {index}; see {log}")
    total = t_apply + t_build + t_table
    print(f"release not in matrix.yaml: torch {removed} (CPU build from pip's find-links)")
    print(f"outdated --apply{' --no-probe' if args.no_probe else ' (edit + drift probe)'}: {t_apply:8.1f} s")
    print(f"build --torch {MINOR} (build, smoke, publish):  {t_build:8.1f} s")
    print(f"compat-table (table, page, index):        {t_table:8.1f} s")
    print(f"total, outdated --apply -> published wheel: {total:8.1f} s ({total / 60:.1f} min)")
    print(f"published: {', '.join(listed)} (listed in {index.relative_to(work)})")
    print(f"scratch project and log: {work}, {log}")


if __name__ == "__main__":
    main()
