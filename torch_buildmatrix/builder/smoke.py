"""Runs the plugin's smoke suite (pytest) against an installed wheel and reads its results."""

from __future__ import annotations

import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torch_buildmatrix.builder.records.fields import feature_report
from torch_buildmatrix.builder.records.model import SmokeCounts
from torch_buildmatrix.model.contract import SmokeContract, Tier


def stage_tests(tests: Path, dest: Path) -> Path:
    """Copy the suite away from the plugin sources so the installed package is what gets imported.

    A neutral pytest.ini goes beside the copy: pytest takes the first configuration file above its arguments, and
    the scratch of a local cell is inside the project (build/), whose own pytest settings (a plugin it needs, strict
    options) are the project's tests', not the smoke suite's. A configuration file of the suite's own, inside its
    directory, is found first and still applies."""
    target = dest / "smoke-tests"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(tests, target, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    (dest / "pytest.ini").write_text(
        "# torch-buildmatrix: the smoke suite runs apart from the project's pytest settings\n[pytest]\n"
    )
    return target


@contextmanager
def private_temp() -> Iterator[dict[str, str]]:
    """Environment giving the suite a temporary directory of its own, removed when it ends.

    Caches kept in the temporary directory would otherwise carry from one cell, or one run, to the next: torch's
    Inductor keeps compiled graphs in <tmp>/torchinductor_<user>, so a later cell could load a graph an earlier build
    compiled instead of compiling its own. The directory is made in the system's temporary directory, not under the
    cell's scratch: multiprocessing puts its sockets there, and a Unix socket's path must stay under 108 bytes.
    (A container's /tmp is its own already.)
    """
    temp = Path(tempfile.mkdtemp(prefix="buildmatrix-smoke-"))
    try:
        yield {name: str(temp) for name in ("TMPDIR", "TEMP", "TMP")}
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def smoke_env(contract: SmokeContract) -> dict[str, str]:
    """Environment of a smoke run, on top of the builder's.

    The thread count (smoke.threads, 1 unless declared): torch sizes its intra-op pool from OMP_NUM_THREADS, which
    otherwise is every core, for each of the cells and builds running at once.

    Bytecode written: Python caches the bytecode of what it imports in the environment's __pycache__, as in an
    environment pip installed (it compiles at install). uv installs without it, and a builder whose environment sets
    PYTHONDONTWRITEBYTECODE (CI images do) would have every interpreter of the suite compile torch's modules again:
    `import torch` takes 2.1 s instead of 1.1 s here, and a suite that starts a dozen child interpreters 47 s instead
    of 22 s. Python reads an empty value as unset; the smoke environment is the cell's own, thrown away with it."""
    return {"OMP_NUM_THREADS": str(contract.threads), "PYTHONDONTWRITEBYTECODE": ""}


def pytest_args(
    tests: Path, junit: Path, features: Path, contract: SmokeContract, tier: Tier | None = None
) -> list[str]:
    """pytest's arguments for a smoke run: the staged suite, its JUnit report, then matrix.yaml's smoke.args (where
    `{features}` names the per-feature JSON file the engine reads) and the tier's selection (smoke.tiers)."""
    return [
        "-m",
        "pytest",
        str(tests),
        "-p",
        "no:cacheprovider",
        "-q",
        "-rs",
        f"--junitxml={junit}",
        "--import-mode=importlib",
        *contract.pytest_args(str(features), tier),
    ]


def read_junit(path: Path) -> SmokeCounts:
    if not path.is_file():
        return SmokeCounts(errors=1)
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = SmokeCounts()
    for suite in suites:
        tests = int(suite.get("tests", 0))
        failures = int(suite.get("failures", 0))
        errors = int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        counts.failed += failures
        counts.errors += errors
        counts.skipped += skipped
        counts.passed += tests - failures - errors - skipped
    return counts


MAX_FEATURE_REPORT = 4 << 20  # 1000 features of 2048 characters each, with room


def read_features(path: Path) -> dict[str, str]:
    """The suite's per-feature outcomes ({} when it wrote none); raises ValueError naming the file and the key of a
    report records cannot hold (a key that is not snake_case, an outcome of no vocabulary, not JSON)."""
    if not path.is_file():
        return {}
    # Named by its file name, not its path: the message is published, and the path is a temporary directory's.
    source = f"the suite's feature report ({path.name})"
    if path.stat().st_size > MAX_FEATURE_REPORT:
        raise ValueError(f"{source}: {path.stat().st_size} bytes (at most {MAX_FEATURE_REPORT})")
    return feature_report(path.read_text(encoding="utf-8", errors="replace"), source)
