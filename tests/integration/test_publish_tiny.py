"""End to end on the tiny project, with fake credentials in the environment: a rebuild gives the same wheel bytes,

and after build and compat-table nothing under wheels/ (logs, records, site) holds a credential."""

from __future__ import annotations

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
# uv never reads PIP_*; the proxy is bypassed for every host, so these fake values change nothing but what a log
# could show.
FAKE = {
    "PIP_INDEX_URL": "https://fakeuser:FAKE-INDEX-PASSWORD-7f3a@index.invalid/simple/",
    "PIP_EXTRA_INDEX_URL": "https://FAKE-EXTRA-TOKEN-91be@extra.invalid/simple/",
    "HTTPS_PROXY": "http://proxyuser:FAKE-PROXY-PASSWORD-c0de@127.0.0.1:9",
    "NO_PROXY": "*",
    "GITHUB_TOKEN": "FAKE-GITHUB-TOKEN-5e5e",
    "TWINE_PASSWORD": "FAKE-TWINE-PASSWORD-aa11",
}
SECRETS = [
    b"FAKE-INDEX-PASSWORD-7f3a",
    b"FAKE-EXTRA-TOKEN-91be",
    b"FAKE-PROXY-PASSWORD-c0de",
    b"FAKE-GITHUB-TOKEN-5e5e",
]
SECRETS.append(b"FAKE-TWINE-PASSWORD-aa11")


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **FAKE, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", *args, "--matrix", str(root / "matrix.yaml")],
        check=False,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=root,
        env=env,
    )


def wheel_bytes(root: Path) -> dict[str, bytes]:
    wheels = root / "wheels"
    return {p.relative_to(wheels).as_posix(): p.read_bytes() for p in sorted(wheels.glob("*/*.whl"))}


def test_tiny_rebuild_is_byte_identical_and_nothing_published_holds_a_secret(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX + TINY_CONTRACT)
    (root / "README.md").write_text("# tiny\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    first = cli(root, "build")
    assert first.returncode == 0, first.stdout + first.stderr
    built = wheel_bytes(root)
    assert [name.split("-")[0] for name in built] == ["driver/tiny_driver", "torch2.13/tiny_plugin"], built
    # Rebuild everything from the same inputs, the driver wheel too (its cache emptied): the same bytes.
    shutil.rmtree(root / "build" / "cache" / "driver-wheels")
    second = cli(root, "build", "--force")
    assert second.returncode == 0, second.stdout + second.stderr
    assert wheel_bytes(root) == built

    published = cli(root, "compat-table", "--offline")
    assert published.returncode == 0, published.stdout + published.stderr
    site = root / "wheels" / "site"
    assert (site / "logs" / "torch2.13-cpu-cp311-drv2.log").read_text().count("\n$ ") >= 3
    leaks = [
        (path.relative_to(root).as_posix(), secret.decode())
        for path in sorted((root / "wheels").rglob("*"))
        if path.is_file()
        for secret in SECRETS
        if secret in path.read_bytes()
    ]
    assert leaks == []
    output = first.stdout + first.stderr + second.stdout + published.stdout + published.stderr
    assert not any(secret.decode() in output for secret in SECRETS)


def snapshot(root: Path) -> dict[str, bytes]:
    """The live site (through its link), the docs and README: what a failed compat-table must leave as it was."""
    site = root / "wheels" / "site"
    files = {f"site/{p.relative_to(site).as_posix()}": p.read_bytes() for p in site.rglob("*") if p.is_file()}
    files["link"] = site.readlink().as_posix().encode()
    for doc in ("README.md", "docs/compatibility.md", "docs/compatibility.json"):
        files[doc] = (root / doc).read_bytes()
    return files


def test_compat_table_refuses_a_tampered_wheel_and_a_damaged_record_and_build_rebuilds_it(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX + TINY_CONTRACT)
    (root / "README.md").write_text("# tiny\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    assert cli(root, "build").returncode == 0
    assert cli(root, "compat-table", "--offline").returncode == 0
    live = snapshot(root)

    wheel = next((root / "wheels" / "torch2.13").glob("*.whl"))
    original = wheel.read_bytes()
    wheel.write_bytes(original + b"\0")
    refused = cli(root, "compat-table", "--offline")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "not published: the live site" in refused.stdout
    assert f"torch2.13/{wheel.name}: sha256" in refused.stdout and "differs from its cell's record" in refused.stdout
    assert snapshot(root) == live
    wheel.write_bytes(original)

    record = root / "wheels" / "results" / "cells" / "torch2.13-cpu-cp311-drv2.json"
    record.write_text(record.read_text().replace('"log": "logs/', '"log": "/etc/../logs/'))
    damaged = cli(root, "compat-table", "--offline")
    assert damaged.returncode == 7, damaged.stdout + damaged.stderr
    assert f"{record}: log: '/etc/../logs/torch2.13-cpu-cp311-drv2.log' is absolute" in damaged.stderr
    assert "Traceback" not in damaged.stderr and snapshot(root) == live

    rebuilt = cli(root, "build")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "torch2.13-cpu-cp311-drv2 rebuilt: its record was damaged" in rebuilt.stdout
    assert cli(root, "compat-table", "--offline").returncode == 0
    assert snapshot(root)["site/released.json"] == live["site/released.json"]  # the same bytes again
