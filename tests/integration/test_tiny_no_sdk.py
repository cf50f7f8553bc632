"""The tiny project in its no-SDK shape (a plain C extension, cells torch x Python), built, recorded and published
end to end with the local runner: no SDK step, wheel, pin, column, selector or index entry anywhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY_CONTRACT

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
REPO = Path(__file__).parents[2]
MATRIX = (
    """\
schema-version: 2
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}
python: ["3.11"]
torch:
  - {version: "2.13.0", variant: cpu, wheels: pip-find-links}
runner: local
"""
    + TINY_CONTRACT
)
BUILD = "torch2.13-cpu-cp311"  # a build per Python (the default): its id names the Python
CELL = "torch2.13-cpu-cp311"
WHEEL = "tiny_plugin-0.1.0+torch.2.13-cp311-cp311-linux_x86_64.whl"


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", *args, "--matrix", str(root / "matrix.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=root,
        env=env,
    )


def test_no_sdk_shape_builds_and_publishes_with_no_sdk_part(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("driver"))  # a plain extension has no SDK tree
    (root / "matrix.yaml").write_text(MATRIX)
    (root / "README.md").write_text("# tiny\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")

    listed = cli(root, "matrix", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [c["id"] for c in json.loads(listed.stdout)] == [CELL]

    built = cli(root, "build")
    assert built.returncode == 0, built.stdout + built.stderr
    record = json.loads((root / "wheels" / "results" / "cells" / f"{CELL}.json").read_text())
    assert record["status"] == "passed" and record["sdk_wheel"] is None
    assert record["cell"] == {
        "id": CELL,
        "torch": "2.13.0",
        "torch_minor": "2.13",
        "variant": "cpu",
        "python": "3.11",
        "label": "torch.2.13",
        "patches": "",
        "build": {"id": BUILD, "torch": "2.13.0", "variant": "cpu", "python": "3.11", "label": "torch.2.13"},
    }
    assert [s["name"] for s in record["steps"]] == ["source", "check", "interpreter", "smoke-env", "smoke"]
    made = json.loads((root / "wheels" / "results" / "builds" / f"{BUILD}.json").read_text())
    assert made["status"] == "passed" and made["wheel"] == record["wheel"] and made["sdk_wheel"] is None
    assert [s["name"] for s in made["steps"]] == ["source", "interpreter", "build-env", "build", "check", "publish"]
    wheels = sorted(p.relative_to(root / "wheels").as_posix() for p in (root / "wheels").rglob("*.whl"))
    assert wheels == [f"torch2.13/{WHEEL}"]

    published = cli(root, "compat-table", "--offline")
    assert published.returncode == 0, published.stdout + published.stderr
    site = root / "wheels" / "site"
    page = (site / "index.html").read_text()
    assert 'id="sdk"' not in page and "tiny-plugin==0.1.0+torch.2.13 --only-binary=:all: " in page
    assert not (site / "driver").exists() and (site / "torch2.13" / WHEEL).is_file()
    table = json.loads((root / "docs" / "compatibility.json").read_text())
    assert table["sdk"] is None and table["sdks"] == [] and [c["id"] for c in table["cells"]] == [CELL]
    assert "| torch | Python 3.11 |" in (root / "docs" / "compatibility.md").read_text()
    checked = cli(root, "compat-table", "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
