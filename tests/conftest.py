"""Shared fixtures: a minimal valid matrix written on the fly."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

VALID = """\
schema-version: 1
plugin:
  distribution: torch-emu
  version: 0.1.0
  source: plugin
  smoke-tests: plugin/tests
driver:
  source: driver
  versions: ["1.4", "2.1"]
python: ["3.9", "3.10", "3.11"]
torch:
  - version: "2.4.1"
    patches: [pre-2.7]
  - version: "2.13.0"
    variant: cpu
    wheels: pip-find-links
runner: auto
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "plugin" / "tests").mkdir(parents=True)
    (tmp_path / "driver").mkdir()
    (tmp_path / "patches" / "pre-2.7").mkdir(parents=True)
    (tmp_path / "patches" / "pre-2.7" / "series").write_text("# empty\n")
    return tmp_path


@pytest.fixture
def write_matrix(project: Path):  # type: ignore[no-untyped-def]
    def write(text: str = VALID) -> Path:
        path = project / "matrix.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    return write
