#!/usr/bin/env python3
"""Benchmark (not a test): a setup.py torch extension with several translation units, built by the tool
(`torch-buildmatrix build --builds-only`, local runner, torch 2.13 CPU, Python 3.11) on one core and on two, side by
side.

"One core" runs the tool under `taskset -c 0`: the tool sizes a build's compiler parallelism from the cores it may use
(its CPU affinity), so there MAX_JOBS is 1 and everything shares one core; "two cores" runs it on cores 0 and 1. The
figure is the build record's `build` step (the compile and link: the environment is made before it, in `build-env`,
and timed apart). ccache is off (CCACHE_DISABLE=1): every build compiles every file.

Shapes (generated in a scratch directory, each translation unit including <torch/extension.h>, about 50 s to compile
here):
  ninja       one extension of N files, torch's BuildExtension with ninja (the default): MAX_JOBS compiles at once;
  extensions  N extensions of one file each and `use_ninja=False` (torch-scatter's shape): setuptools compiles one
              file at a time; with `build.parallel-extensions: true` it builds the extensions MAX_JOBS at a time.
              Timed three ways: one core, two cores as before that option (serial), two cores with it.

Run from the repository root (minutes: each file compiles for about a minute):
  python scripts/bench_cores.py [--shape ninja|extensions|both] [--files 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

MATRIX = """\
schema-version: 2
plugin: {{distribution: bench-ext, version: 0.1.0, source: ext, smoke-tests: ext/tests}}
python: ["3.11"]
torch:
  - {{version: "2.13.0", variant: cpu, wheels: pip-find-links}}
runner: local
build: {{version-env: BENCH_VERSION, requires: ["setuptools>=64", "wheel"], project-requires: false{extra}}}
check: {{torch-pin: none}}
"""

UNIT = """\
#include <torch/extension.h>

torch::Tensor op_{i}(const torch::Tensor& x) {{ return x * {i} + x.sin(); }}
"""

SETUP_NINJA = """\
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="bench-ext",
    version=os.environ["BENCH_VERSION"],
    packages=["bench_ext"],
    ext_modules=[CppExtension("bench_ext._C", {sources!r}, extra_compile_args=["-O2", "-g0"])],
    cmdclass={{"build_ext": BuildExtension}},
)
"""

SETUP_EXTENSIONS = """\
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="bench-ext",
    version=os.environ["BENCH_VERSION"],
    packages=["bench_ext"],
    ext_modules=[
        CppExtension(f"bench_ext._op{{i}}", [source], extra_compile_args=["-O2", "-g0"])
        for i, source in enumerate({sources!r})
    ],
    cmdclass={{"build_ext": BuildExtension.with_options(use_ninja=False)}},
)
"""


def write_project(root: Path, shape: str, files: int, parallel_extensions: bool) -> None:
    ext = root / "ext"
    (ext / "bench_ext").mkdir(parents=True)
    (ext / "bench_ext" / "__init__.py").write_text("")
    (ext / "tests").mkdir()
    (ext / "tests" / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    sources = []
    for i in range(files):
        unit = UNIT.format(i=i)
        if shape == "extensions" or i == 0:  # every extension (or the one) needs a module definition
            unit += f'\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("op_{i}", &op_{i}); }}\n'
        (ext / f"unit{i}.cpp").write_text(unit)
        sources.append(f"unit{i}.cpp")
    (ext / "setup.py").write_text((SETUP_NINJA if shape == "ninja" else SETUP_EXTENSIONS).format(sources=sources))
    extra = ", parallel-extensions: true" if parallel_extensions else ""
    (root / "matrix.yaml").write_text(MATRIX.format(extra=extra))


def build_seconds(root: Path, cores: str) -> tuple[float, float, float]:
    """(build step, build-env step, wall) seconds of one forced build under `taskset -c cores`."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "CCACHE_DISABLE": "1",
    }
    for name in ("MAX_JOBS", "CMAKE_BUILD_PARALLEL_LEVEL", "DIST_EXTRA_CONFIG"):
        env.pop(name, None)
    command = ["taskset", "-c", cores, sys.executable, "-m", "torch_buildmatrix", "build", "--builds-only", "--force"]
    start = time.monotonic()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    records = list((root / "wheels" / "results" / "builds").glob("*.json"))
    if done.returncode != 0 or len(records) != 1:
        sys.exit(f"build failed (exit code {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    steps = {s["name"]: s["seconds"] for s in json.loads(records[0].read_text())["steps"]}
    return steps["build"], steps["build-env"], wall


def measure(shape: str, files: int, runs: list[tuple[str, str, bool]]) -> None:
    print(f"{shape}: {files} translation units, each including <torch/extension.h>; ccache off")
    print(f"  {'how':<44} {'build step':>11} {'build-env':>10} {'wall':>8}")
    for label, cores, parallel in runs:
        with tempfile.TemporaryDirectory(prefix="bench-cores-") as scratch:
            root = Path(scratch)
            write_project(root, shape, files, parallel)
            build, env, wall = build_seconds(root, cores)
        print(f"  {label:<44} {build:>9.1f} s {env:>8.1f} s {wall:>6.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("ninja", "extensions", "both"), default="both")
    parser.add_argument("--files", type=int, default=4, help="translation units (default: %(default)s)")
    args = parser.parse_args()
    if shutil.which("taskset") is None:
        sys.exit("needs taskset (util-linux)")
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        sys.exit(f"needs two cores, this process may use {len(available)}")
    one, two = str(available[0]), f"{available[0]},{available[1]}"
    print(f"machine: {os.cpu_count()} cores, {os.getloadavg()[0]:.2f} load (1 min) at start; " + time.strftime("%H:%M"))
    if args.shape in ("ninja", "both"):
        measure(
            "ninja",
            args.files,
            [("one core (MAX_JOBS=1)", one, False), ("two cores (MAX_JOBS=2)", two, False)],
        )
    if args.shape in ("extensions", "both"):
        measure(
            "extensions",
            args.files,
            [
                ("one core", one, False),
                ("two cores, extensions one at a time", two, False),
                ("two cores, build.parallel-extensions: true", two, True),
            ],
        )
    print(f"load (1 min) at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
