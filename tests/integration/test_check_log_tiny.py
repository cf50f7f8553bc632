"""What a build's source and check steps say, in the build's log and on the console: the patches applied, the wheel
relabelled (or where its version came from), its torch pin, and the symbol check, passed or failed.

The tiny project (no SDK) built against the real torch 2.13 CPU wheel (pip's find-links), `--builds-only`: real uv
environments, a real compiler, and the symbol check run against torch's own libraries (the module leaves one symbol
of libc10.so undefined).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
REPO = Path(__file__).parents[2]
MATRIX = """\
schema-version: 2
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: pip-find-links}
runner: local
"""
BUILD = "torch2.13-cpu-cp311"
WHEEL = "tiny_plugin-0.1.0+torch.2.13-cp311-cp311-linux_x86_64.whl"
MODULE = "tiny_plugin/_C.cpython-311-x86_64-linux-gnu.so"
AGAINST = "torch 2.13.0+cpu's libraries"


def project(tmp_path: Path, contract: str, *hooks: str) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("driver"))
    (root / "matrix.yaml").write_text(MATRIX + contract)
    for hook in hooks:
        (root / "plugin" / hook).write_text("")
    return root


def build(root: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(root, "build", "--builds-only", "--matrix", str(root / "matrix.yaml"), timeout=900)


def said(log: str) -> list[str]:
    """The lines the source and check steps wrote into the build's log (its comment lines naming those steps)."""
    return [line[2:] for line in log.splitlines() if line.startswith(("# source: ", "# check: "))]


def test_a_relabelled_build_says_what_its_check_did(tmp_path: Path) -> None:
    # A project whose build fixes its own version (0.1.0), as a published sdist's does: the tool relabels the wheel.
    root = project(
        tmp_path,
        "build: {relabel: true, generated: [_build_info.py]}\ncheck: {build-info: tiny_plugin/_build_info.py}\n",
        "TORCH_SYMBOL",
    )
    (root / "plugin" / "PLUGIN_VERSION").write_text("0.1.0\n")
    result = build(root)
    assert result.returncode == 0, result.stdout + result.stderr

    lines = [
        "source: no patch applied: torch 2.13.0 lists no patch series",
        "check: relabelled tiny_plugin-0.1.0 -> 0.1.0+torch.2.13 (build.relabel)",
        f"check: {WHEEL} is the build's distribution, version and label (relabelled), tags for Python 3.11",
        "check: torch pin: Requires-Dist 'torch==2.13.*' (check.torch-pin: release-line)",
        "check: built against torch 2.13.0+cpu (tiny_plugin/_build_info.py: TORCH_VERSION)",
        f"check: symbols: 1 undefined symbol(s) of {MODULE} resolved against {AGAINST}; none missing",
    ]
    log = (root / "wheels" / "logs" / "builds" / f"{BUILD}.log").read_text()
    assert said(log) == lines, log
    # The console (no terminal: one line per event) says the same, each line inside its step.
    console = [line for line in result.stdout.splitlines() if line.startswith(f"build {BUILD}: ")]
    assert [line.removeprefix(f"build {BUILD}: ") for line in console] == [
        "source",
        lines[0],
        "interpreter",
        "build-env",
        "build",
        "check",
        *lines[1:],
        "publish",
        "passed",
    ], result.stdout
    # What the lines say is so: the published wheel is the relabelled one.
    assert sorted(p.name for p in (root / "wheels" / "torch2.13").glob("*.whl")) == [WHEEL]
    made = json.loads((root / "wheels" / "results" / "builds" / f"{BUILD}.json").read_text())
    assert made["status"] == "passed" and made["wheel"]["filename"] == WHEEL


def test_a_failed_symbol_check_says_what_is_missing_and_publishes_nothing(tmp_path: Path) -> None:
    from conftest import TINY_CONTRACT

    # The version from build.version-file, no torch pin checked, and a symbol no library defines.
    contract = TINY_CONTRACT.replace("check: {", "check: {torch-pin: none, ")
    root = project(tmp_path, contract, "TORCH_SYMBOL", "MISSING_SYMBOL")
    result = build(root)
    assert result.returncode == 1, result.stdout + result.stderr

    error = "1 symbol(s) not provided by torch 2.13.0+cpu: tiny_symbol_nobody_defines"
    log = (root / "wheels" / "logs" / "builds" / f"{BUILD}.log").read_text()
    assert said(log) == [
        "source: no patch applied: torch 2.13.0 lists no patch series",
        f"check: {WHEEL} is the build's distribution, version and label (version written to PLUGIN_VERSION: "
        "build.version-file), tags for Python 3.11",
        "check: torch pin: not checked, the wheel requires 'torch==2.13.*' (check.torch-pin: none)",
        "check: built against torch 2.13.0+cpu (tiny_plugin/_build_info.py: TORCH_VERSION)",
        f"check: symbols: 1 of 2 undefined symbol(s) of {MODULE} not provided by {AGAINST}",
    ], log
    assert log.rstrip().endswith(f"# FAILED in step check: {error}"), log
    assert f"build {BUILD}: check: symbols: 1 of 2 undefined symbol(s) of {MODULE} not provided by" in result.stdout
    assert f"build {BUILD}: failed" in result.stdout
    # The failure report names the build's log where the guide says logs are.
    report = f"{BUILD} failed in check (deterministic): {error}  (log: {root}/wheels/logs/builds/{BUILD}.log)"
    assert report in result.stdout.replace("\n", ""), result.stdout

    # On disk: the record says why, nothing is published, the scratch directory stays with the wheel to inspect.
    made = json.loads((root / "wheels" / "results" / "builds" / f"{BUILD}.json").read_text())
    assert made["status"] == "failed" and made["failed_step"] == "check" and made["error"] == error
    assert made["wheel"] is None and made["log"] == f"logs/builds/{BUILD}.log"
    assert not list((root / "wheels").rglob("*.whl"))
    scratch = root / "build" / "matrix" / "builds" / BUILD
    assert [p.name for p in scratch.rglob("*.whl")] == [WHEEL]
    guide = (REPO / "docs" / "guide" / "use-buildmatrix.md").read_text().replace("\n  ", " ")
    assert "(a build's under `build/matrix/builds/<build id>/`) for inspection" in guide
