"""Smaller things a newcomer meets on the command line: `--version`, and a torch source the network cannot reach
being a registry error (exit 9) that names the matrix entry, not "matrix.yaml is invalid" (exit 3)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import torch_buildmatrix
from torch_buildmatrix import __version__
from torch_buildmatrix.errors import MatrixError, RegistryError

from conftest import TINY_CONTRACT, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny"
UNREACHABLE = """\
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["2.1"]}
python: ["3.11"]
torch:
  - {version: "2.4.1", variant: cuda, wheels: {index: "http://127.0.0.1:9/simple"}}
  - {version: "2.5.1", variant: cuda, wheels: {index: "http://127.0.0.1:9/simple"}}
"""


def test_version(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "--version", timeout=60)
    assert done.returncode == 0 and done.stdout == f"torch-buildmatrix {__version__}\n", done.stdout + done.stderr
    assert (
        f'__version__ = "{__version__}"' in Path(torch_buildmatrix.__file__).read_text()
    )  # the one place it is written


def test_an_unreachable_torch_source_is_a_registry_error_naming_the_entry(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(UNREACHABLE + TINY_CONTRACT)
    done = run_cli(root, "matrix", timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == RegistryError.exit_code != MatrixError.exit_code, said
    assert "invalid" not in said and "Traceback" not in said
    # One line for the one index both entries name, each entry located.
    assert re.search(
        r"matrix\.yaml:7: torch\[0\], \S*matrix\.yaml:8: torch\[1\]: cannot read http://127\.0\.0\.1:9/", said
    )
    assert not list((root / "build" / "cache" / "registry").glob("*.json"))  # no answer cached
