"""The real plugin on the cheap torch 2.13 CPU cells: built, checked and smoke-tested through the local runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("driver", ["1", "2"])
def test_cell_is_green(real_cells: Path, driver: str) -> None:
    record = json.loads((real_cells / "wheels" / "results" / "cells" / f"torch2.13-cpu-cp311-drv{driver}.json").read_text())
    log = (real_cells / "wheels" / record["log"]).read_text()
    assert record["status"] == "passed", f"{record['failed_step']}: {record['error']}\n{log[-6000:]}"
    smoke = record["smoke"]
    assert smoke["failed"] == 0 and smoke["errors"] == 0 and smoke["passed"] >= 20, smoke
    assert record["torch_build"]["version"] == "2.13.0+cpu" and record["torch_build"]["cxx11_abi"] is True
    assert record["wheel"]["filename"].startswith(f"torch_emu-0.1.0+torch2.13.drv{driver}-cp311-cp311-")
    assert (real_cells / "wheels" / record["wheel"]["path"]).is_file()
    assert record["driver_wheel"]["filename"].startswith("emu_driver-")


def test_noop_rerun_rebuilds_nothing(real_cells: Path) -> None:
    from conftest import run_cli

    again = run_cli(real_cells, "build", "--matrix", str(real_cells / "matrix.yaml"), "--torch", "2.13", "--runner", "local")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("up-to-date") == 2
