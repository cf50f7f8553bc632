"""Every network read of a command has a total deadline (--network-deadline), whatever the server does: against a
server on 127.0.0.1 that trickles one byte at a time (no single read ever times out), each command that reads the
network ends soon after its deadline with exit code 9 and leaves nothing written (no registry answer cached, no
matrix.yaml edit, no report, no site, no docs)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_server import trickling_server

from torch_buildmatrix.errors import FetchError, RegistryError

from conftest import TINY_CONTRACT, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
# A valid PEP 691 page, about 200 bytes: at one byte per 0.5 s it would take 100 s in full.
PAGE = json.dumps(
    {"meta": {"api-version": "1.1"}, "name": "torch", "files": [{"filename": WHEEL, "url": f"/{WHEEL}"}]}
).encode()
DEADLINE = 1.5
# The command's own start (an interpreter, imports) on a loaded machine, beside the deadline; a read without a total
# deadline would take the page's 100 s (the per-request deadline is 120 s).
ENDS_WITHIN = DEADLINE + 20
MATRIX = """\
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: {index: "URL/a"}}
  - {version: "2.12.0", variant: cpu, wheels: {index: "URL/b"}}
"""


@pytest.fixture
def slow_index() -> Iterator[str]:
    with trickling_server(PAGE, interval=0.5) as url:
        yield url.rstrip("/")


@pytest.fixture
def project(tmp_path: Path, slow_index: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny project, its two torch sources two pages of the slow index; no other torch source on this machine."""
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX.replace("URL", slow_index) + TINY_CONTRACT)
    return root


def files_of(root: Path) -> dict[str, bytes]:
    """Every file of the project but lock files (a command takes its locks before it reads the network)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["matrix"], RegistryError.exit_code),
        (["outdated", "--apply", "--index-url", "INDEX/simple/"], RegistryError.exit_code),
        (["probe", "2.13", "--index-url", "INDEX/simple/"], RegistryError.exit_code),
        (["compat-table"], RegistryError.exit_code),
        (["fetch-site", "--site-url", "INDEX"], FetchError.exit_code),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else str(value),
)
def test_a_command_reading_a_trickling_server_ends_at_its_deadline_and_writes_nothing(
    project: Path, slow_index: str, args: list[str], code: int
) -> None:
    before = files_of(project)
    start = time.monotonic()
    args = [a.replace("INDEX", slow_index) for a in args]
    result = run_cli(project, *args, "--network-deadline", str(DEADLINE), timeout=120)
    took = time.monotonic() - start
    out = result.stdout + result.stderr
    assert result.returncode == code == 9, out
    assert "Traceback" not in out, out
    assert f"within the {DEADLINE:g} s all network reads of this command may take" in out or (
        f"total deadline of {DEADLINE:g} s" in out
    ), out
    assert took < ENDS_WITHIN, f"{args[0]} took {took:.1f} s"
    assert files_of(project) == before  # no cached answer, no edit, no report, no site, no docs
