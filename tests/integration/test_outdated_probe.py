"""`outdated --apply` end to end on the tiny plugin: a release found in find-links is added and probed for real."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from registry_server import Answers

from conftest import run_cli

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
CPU_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
# The tiny project lists only a torch 2.12.0 CPU build (never built here); find-links also hold the real 2.13.0 one.
MATRIX = """\
schema-version: 2
plugin:  # the tiny plugin
  distribution: tiny-plugin
  version: 0.1.0
  source: plugin
  smoke-tests: plugin/tests
  label: "torch.{torch_minor}.drv.{sdk_major}"
sdk:
  kind: wheel
  name: driver
  id: "drv{sdk_major}"
  distribution: tiny-driver
  source: driver
  version-env: TINY_DRIVER_VERSION
  versions: ["1.4", "2.1"]
build: {version-file: PLUGIN_VERSION, generated: [_build_info.py, PLUGIN_VERSION]}
check: {build-info: tiny_plugin/_build_info.py}
smoke: {args: ["--tiny-features-json={features}"]}
python: ["3.11"]
torch:
  # the one release we know
  - {version: "2.12.0", variant: cpu, wheels: pip-find-links}
runner: local
"""

EXPECTED_ADDITION = """\
  - version: "2.13.0"
    variant: cpu
    wheels: pip-find-links
    python: ["3.11"]
exclude:
  - {torch: "2.13", sdk: "1"}
runner: local
"""


def machine_cpu_wheel() -> Path:
    from torch_buildmatrix.model.registry import pip_configured_find_links

    for location in pip_configured_find_links():
        candidate = Path(location.removeprefix("file://")) / CPU_WHEEL
        if candidate.is_file():
            return candidate
    pytest.skip(f"no {CPU_WHEEL} in pip's find-links on this machine")


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: Answers) -> Path:
    wheel = machine_cpu_wheel()
    links = tmp_path / "find-links"
    links.mkdir()
    (links / CPU_WHEEL).symlink_to(wheel)
    (links / "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX)
    return root


def apply(root: Path, answers: Answers) -> str:
    result = run_cli(root, "outdated", "--apply", "--variant", "cpu", "--index-url", answers.url, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_new_release_is_added_and_probed_green(tiny: Path, answers: Answers) -> None:
    out = apply(tiny, answers)
    assert "torch 2.13.0: builds and passes as is" in out
    matrix = (tiny / "matrix.yaml").read_text()
    assert matrix == MATRIX.replace("runner: local\n", "") + EXPECTED_ADDITION
    report = (tiny / "build" / "outdated" / "report.md").read_text()
    assert "- torch 2.13.0 (cpu), cell `torch2.13-cpu-cp311-drv2`: **builds and passes as is**" in report
    probe = tiny / "build" / "probe" / "torch2.13.0"
    assert "Result: **passed**" in (probe / "report.md").read_text()
    # The probe's own workspace: its wheel is there, nothing reached the project's wheels/ or results.
    assert list((probe / "out").rglob("tiny_plugin-*.whl"))
    assert not (tiny / "wheels").exists()


def test_a_release_that_breaks_the_build_needs_shims_with_the_errors_grouped(tiny: Path, answers: Answers) -> None:
    (tiny / "plugin" / "BREAK_BUILD").write_text("")
    out = apply(tiny, answers)
    assert "torch 2.13.0: needs shims: other (tiny_plugin/_C.c)" in out
    # The matrix change stays: the pull request carries it together with what the probe found.
    assert 'version: "2.13.0"' in (tiny / "matrix.yaml").read_text()
    report = (tiny / "build" / "outdated" / "report.md").read_text()
    assert "**needs shims: other (tiny_plugin/_C.c)**" in report
    assert (
        "  - other (tiny_plugin/_C.c)\n    - `tiny_plugin/_C.c:5` (header refuses this build configuration): " in report
    )
    assert "broken on purpose" in report
    # The log is named as the project (and the workflow's outdated-report artifact) holds it: never a runner's path.
    [log_line] = [line for line in report.splitlines() if "full log: " in line]
    log = log_line.split("`")[1]
    assert log.startswith("build/probe/torch2.13.0/") and log.endswith(".log") and (tiny / log).is_file()
    assert str(tiny) not in report
