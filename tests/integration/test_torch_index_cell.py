"""A cell built with torch from an index only (a loopback copy of PyTorch's CPU index), as a stock runner builds it."""

from __future__ import annotations

import http.server
from pathlib import Path

import loopback_http
import pytest

from conftest import TINY_CONTRACT

CPU_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.mark.integration
def test_a_cell_builds_with_torch_from_an_index_only(tmp_path: Path) -> None:
    """What a stock runner does: no mirror, torch 2.13 CPU installed from an index (a loopback copy of PyTorch's)."""
    import hashlib
    import json
    import os
    import shutil
    import subprocess
    import sys

    from torch_buildmatrix.model.registry import pip_configured_find_links

    wheel = next((Path(p) / CPU_WHEEL for p in pip_configured_find_links() if (Path(p) / CPU_WHEEL).is_file()), None)
    if wheel is None:
        pytest.skip(f"no {CPU_WHEEL} in pip's find-links to serve")
    served = tmp_path / "served" / "whl" / "cpu"
    (served / "torch").mkdir(parents=True)
    (served / CPU_WHEEL).symlink_to(wheel)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    quoted = CPU_WHEEL.replace("+", "%2B")
    (served / "torch" / "index.html").write_text(f'<a href="../{quoted}#sha256={digest}">{CPU_WHEEL}</a>\n')
    requests: list[str] = []

    class Recording(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            requests.append(self.path)

    root = tmp_path / "project"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "tiny", root)
    # No find-links anywhere, and a uv cache of its own: torch can only come from the index.
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "PIP_FIND_LINKS": "",
        "PIP_CONFIG_FILE": os.devnull,
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
    }
    with loopback_http.served(tmp_path / "served", Recording) as url:
        index = f"{url}/whl/cpu"
        (root / "matrix.yaml").write_text(
            "schema-version: 2\n"  # the tiny project's no-SDK shape
            "plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests}\n"
            'python: ["3.11"]\n'
            f'torch:\n  - {{version: "2.13.0", variant: cpu, wheels: {{index: "{index}"}}}}\n'
            "runner: local\n" + TINY_CONTRACT
        )
        try:
            done = subprocess.run(
                [sys.executable, "-m", "torch_buildmatrix", "build", "--runner", "local"],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
        finally:
            shutil.rmtree(tmp_path / "uv-cache", ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((root / "wheels" / "results" / "cells" / "torch2.13-cpu-cp311.json").read_text())
    assert record["status"] == "passed" and record["torch_build"]["version"] == "2.13.0+cpu"
    assert f"/whl/cpu/{quoted}" in requests  # the wheel was fetched from the index
    assert f"--extra-index-url {index}" in (root / "wheels" / record["log"]).read_text()
