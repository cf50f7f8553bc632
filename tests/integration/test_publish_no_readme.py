"""Publishing needs no README when `publish.readme: false`: the tiny project, built for real and published with no
README (then with one that has no markers), gets its compatibility docs and site, and no README is written or
touched. With the README block on (the default), a missing README is refused naming the switch, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from torch_buildmatrix.errors import UserError

from conftest import TINY_CONTRACT, run_cli

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
MATRIX = """\
schema-version: 2
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: pip-find-links}
runner: local
"""
OFF = "publish: {readme: false}\n"


def cli(root: Path, *args: str) -> tuple[int, str]:
    done = run_cli(root, *args, "--matrix", str(root / "matrix.yaml"), timeout=900)
    return done.returncode, done.stdout + done.stderr


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and (p.is_relative_to(root / "docs") or p.name == "README.md")
    }


def test_publish_without_a_readme_when_the_block_is_off(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "README.md").unlink()  # a release engineer packaging someone else's sdist has none
    (root / "matrix.yaml").write_text(MATRIX + TINY_CONTRACT + OFF)
    code, said = cli(root, "build")
    assert code == 0, said

    code, said = cli(root, "compat-table")
    assert code == 0, said
    assert not (root / "README.md").exists()
    assert "| 2.13.0 (cpu) | 2.1 | ✓" in (root / "docs" / "compatibility.md").read_text()
    assert (root / "docs" / "compatibility.json").is_file() and (root / "wheels" / "site" / "index.html").is_file()
    code, said = cli(root, "compat-table", "--check")
    assert code == 0, said

    # A README without the markers is left alone.
    (root / "README.md").write_text("# tiny\n\nNo table here.\n")
    code, said = cli(root, "compat-table")
    assert code == 0, said
    assert (root / "README.md").read_text() == "# tiny\n\nNo table here.\n"

    # The block on (the default) and no README: refused, naming the file and the switch; no doc changes.
    (root / "README.md").unlink()
    (root / "matrix.yaml").write_text(MATRIX + TINY_CONTRACT)
    before = snapshot(root)
    code, said = cli(root, "compat-table")
    assert code == UserError.exit_code, said
    flat = " ".join(said.split())
    assert "README.md: unreadable" in flat and "set `publish: {readme: false}` in matrix.yaml" in flat
    assert snapshot(root) == before
