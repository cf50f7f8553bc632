"""Prints how long each matrix.yaml trap takes to be refused (issue 11: < 1 s): the checks in-process, and the whole
`python -m torch_buildmatrix matrix --offline` command (interpreter start and imports included).

Run from the project root after one online `nox -s matrix` (so build/cache/registry holds the registry answers):
    python3 scripts/bench_matrix_errors.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['x'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)
TRAPS = {
    "torch typo 2.15.3": ('"2.15.0"', '"2.15.3"'),
    "unquoted 2.10": ('{torch: "2.14", sdk: "1"}', '{torch: 2.10, sdk: "1"}'),
    "duplicate key": ("runner: auto", "runner: auto\nrunner: local"),
    "duplicate Python": ('"3.11", "3.12"', '"3.11", "3.11.0", "3.12"'),
    "exclude matching nothing": (
        '  - {torch: "2.14", sdk: "1"}',
        '  - {torch: "2.14", sdk: "1"}\n  - {torch: "2.99"}',
    ),
    "billion laughs": ("runner: auto", "runner: auto\n" + BOMB),
    "5000-digit integer": ("runner: auto", "runner: auto\nx: " + "9" * 5000),
    "5000-deep nesting": ("runner: auto", "runner: auto\nx: " + "[" * 5000 + "]" * 5000),
    "python: null": ('python: ["3.9", "3.10", "3.11", "3.12", "3.13"]', "python: null"),
    "debootstrap:../../X": ('"debootstrap:bookworm"', '"debootstrap:../../X"'),
}


def _check_in_process(project: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from torch_buildmatrix.errors import UserError
    from torch_buildmatrix.model.cells import expand
    from torch_buildmatrix.model.loader import load_matrix
    from torch_buildmatrix.model.registry import Registry, published_pythons

    try:
        matrix = load_matrix(project / "matrix.yaml")
        expand(matrix, published_pythons(matrix, Registry(project / "build" / "cache" / "registry", offline=True)))
    except UserError:
        pass


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        for part in ("matrix.yaml", "plugin", "driver", "patches"):
            source = ROOT / part
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, project / part)
        if (ROOT / "build" / "cache" / "registry").is_dir():
            shutil.copytree(ROOT / "build" / "cache" / "registry", project / "build" / "cache" / "registry")
        good = (ROOT / "matrix.yaml").read_text()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
        for name, (old, new) in {"(the matrix as it is)": ("", ""), **TRAPS}.items():
            if old and old not in good:
                print(f"{name:28} skipped: '{old}' is not in matrix.yaml any more")
                continue
            (project / "matrix.yaml").write_text(good.replace(old, new, 1) if old else good)
            start = time.monotonic()
            _check_in_process(project)
            checks = time.monotonic() - start
            start = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "torch_buildmatrix", "matrix", "--offline"],
                cwd=project,
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
                check=False,
            )
            elapsed = time.monotonic() - start
            said = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1].strip()
            print(f"{name:28} exit {proc.returncode}  checks {checks:5.3f} s  command {elapsed:5.2f} s  {said[:90]}")


if __name__ == "__main__":
    main()
