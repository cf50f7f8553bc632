"""The plugin's import guard and `python -m torch_emu.doctor`, on the plugin's real Python sources with stand-in torch
and emu-driver packages: every environment gets a verdict, never a traceback, and no printed command names a plugin
wheel that might not exist. The same checks against a real built wheel run in the smoke suite (plugin/tests)."""

from __future__ import annotations

import ast
import functools
import http.server
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from doctor_env import BUILD_INFO, PLUGIN, doctor, fake_install
from packaging.specifiers import SpecifierSet
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def load_guard() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_emu_guard_under_test", PLUGIN / "_guard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


guard = load_guard()
BUILD = {k: ast.literal_eval(v) for k, v in (line.split(" = ", 1) for line in BUILD_INFO.splitlines())}


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("2.4.1", (2, 4)),
        ("2.4.1+cu121", (2, 4)),
        ("2.4.0a0+nv24.07", (2, 4)),
        ("2.4.0a0+git3f2e1a4", (2, 4)),
        ("2.10.0.dev20250101+cpu", (2, 10)),
        ("garbage", None),
        ("", None),
    ],
)
def test_release_line_reads_vendor_builds_like_the_pin(version: str, line: tuple[int, int] | None) -> None:
    assert guard.release_line(version) == line
    if line is not None:  # the wheel's Requires-Dist and the guard agree
        assert SpecifierSet(f"=={line[0]}.{line[1]}.*").contains(Version(version), prereleases=True)


def test_vendor_torch_build_passes_the_guard_and_a_range_pin_would_not() -> None:
    vendor = "2.4.0a0+nv24.07"
    assert guard.problems(BUILD, guard.Installed(vendor, False, (2, 1), "3.11")) == []
    assert Version(vendor) not in SpecifierSet(">=2.4,<2.5")  # why the wheels pin torch==2.4.* instead


def test_other_torch_gets_the_index_of_its_release_not_a_guessed_wheel() -> None:
    [problem] = guard.problems(BUILD, guard.Installed("2.12.1+cu126", False, (2, 1), "3.11"), "https://x.test/emu/")
    assert "built for torch 2.4.x, but torch 2.12.1+cu126 is installed" in problem
    assert "pip install torch-emu --only-binary=:all: --extra-index-url https://x.test/emu/torch2.12/simple/" in problem
    assert "==" not in problem.split("torch-emu", 1)[1].split("(or", 1)[0]


def test_old_driver_api_of_the_same_major_asks_for_the_driver_only() -> None:
    [problem] = guard.problems(BUILD, guard.Installed("2.4.1", False, (2, 0), "3.11"))
    assert "emu-driver 2.0 is installed" in problem and "upgrade the driver" in problem
    driver = "pip install 'emu-driver==2.1.0+emu' --only-binary=:all: --extra-index-url <site>/torch2.4/simple/"
    assert driver in problem
    assert "torch-emu" not in problem  # the torch_emu wheel for driver 2 is the one already installed


def test_unknown_driver_api_asks_for_the_driver_it_was_built_with() -> None:
    [problem] = guard.problems(BUILD, guard.Installed("2.4.1", False, (7, 3), "3.11"))
    assert "emu-driver 7.3 is installed, an API it was not built for" in problem
    assert "'emu-driver==2.1.0+emu'" in problem


def test_no_torch_and_no_driver_are_each_a_sentence() -> None:
    found = guard.problems(BUILD, guard.Installed(None, None, None, "3.11", torch_error="ModuleNotFoundError: torch"))
    assert len(found) == 2
    assert found[0].startswith("torch does not import (ModuleNotFoundError: torch)")
    assert "pip install 'torch==2.4.*'" in found[0]
    assert "the emu driver runtime is not installed" in found[1]


# --- `python -m torch_emu.doctor` in real interpreters, on the plugin's sources with stand-ins ---------------------


@pytest.mark.parametrize(
    ("torch", "driver", "expected"),
    [
        (None, "2, 1", "torch does not import (ModuleNotFoundError: No module named 'torch')"),
        ("broken", "2, 1", "torch does not import (OSError: libcublas.so.12: cannot open shared object file)"),
        ("2.4.1", None, "the emu driver runtime is not installed"),
        ("2.4.1", "unreadable", "emu-driver is installed but unreadable (ModuleNotFoundError"),
        ("2.4.1", "2, 0", "upgrade the driver: pip install 'emu-driver==2.1.0+emu'"),
        ("2.4.1", "3, 0", "emu-driver 3.0 is installed, an API it was not built for"),
        ("2.12.1", "2, 1", "pip install torch-emu --only-binary=:all: --extra-index-url <site>/torch2.12/simple/"),
        # Guard passes (vendor torch of the right line, right driver), but the extension cannot load.
        ("2.4.0a0+nv24.07", "2, 1", "the torch_emu extension failed to load"),
    ],
)
def test_doctor_gives_every_environment_a_verdict(
    tmp_path: Path, torch: str | None, driver: str | None, expected: str
) -> None:
    done = doctor(fake_install(tmp_path, torch, driver))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr == "", done.stderr
    assert "verdict: PROBLEM" in done.stdout and expected in done.stdout, done.stdout
    for line in done.stdout.splitlines():
        if "pip install" in line:  # never an exact plugin pin: the index picks a wheel that exists for this Python
            assert "torch-emu==" not in line and "'torch-emu" not in line, line


def test_doctor_fills_in_the_site_and_the_users_torch(tmp_path: Path) -> None:
    done = doctor(fake_install(tmp_path, "2.12.1", "2, 1"), "--site", "https://wheels.example/emu/")
    index = "https://wheels.example/emu/torch2.12/simple/"
    assert f"  for torch 2.12: pip install torch-emu --only-binary=:all: --extra-index-url {index}" in done.stdout, (
        done.stdout
    )
    assert "<site>" not in done.stdout


PUBLISHED = {"2.4": {"3.11", "3.12"}, "2.12": {"3.13"}, "2.13": {"3.11"}}


def test_torch_without_a_wheel_for_this_python_names_what_exists() -> None:
    [problem] = guard.problems(BUILD, guard.Installed("2.12.1", False, (2, 1), "3.11"), "https://x.test", PUBLISHED)
    assert "no torch_emu is published for torch 2.12 on Python 3.11" in problem
    assert "for torch 2.12: Python 3.13; for Python 3.11: torch 2.4, 2.13" in problem
    assert "torch2.12/simple" not in problem  # that index has no wheel for this Python
    command = "pip install torch-emu --only-binary=:all: --extra-index-url https://x.test/torch2.13/simple/"
    assert problem.endswith(f"({command})")
    [fine] = guard.problems(BUILD, guard.Installed("2.13.0+cpu", False, (2, 1), "3.11"), "https://x.test", PUBLISHED)
    assert "pip install torch-emu --only-binary=:all: --extra-index-url https://x.test/torch2.13/simple/" in fine


def served_table(directory: Path, python: str) -> Iterator[str]:
    """A site root serving a compatibility.json in which torch 2.12 has wheels for Python 3.13 only."""
    directory.mkdir()
    releases = [{"key": f"torch{m}-cuda", "minor": m} for m in ("2.4", "2.12")]
    wheel = {"filename": "w.whl", "path": "w", "sha256": "0"}
    cells = [
        {"release": "torch2.4-cuda", "python": python, "status": "passed", "wheel": wheel, "driver_wheel": wheel},
        {"release": "torch2.12-cuda", "python": "3.13", "status": "passed", "wheel": wheel, "driver_wheel": wheel},
        {"release": "torch2.12-cuda", "python": python, "status": "failed", "wheel": None, "driver_wheel": None},
    ]
    (directory / "compatibility.json").write_text(json.dumps({"releases": releases, "cells": cells}))
    yield from served_directory(directory)


def test_doctor_with_a_site_prints_only_commands_that_find_a_wheel(tmp_path: Path) -> None:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert python != "3.13", "this test needs a Python that torch 2.12's stand-in wheels leave out"
    site = fake_install(tmp_path, "2.12.1", "2, 1")
    for url in served_table(tmp_path / "www", python):
        done = doctor(site, "--site", url)
    assert done.returncode == 1 and done.stderr == "", done.stdout + done.stderr
    assert f"no torch_emu is published for torch 2.12 on Python {python}" in done.stdout, done.stdout
    assert "torch2.12/simple" not in done.stdout and f"{url}/torch2.4/simple/" in done.stdout


def test_doctor_with_an_unreachable_site_still_gives_a_verdict(tmp_path: Path) -> None:
    done = doctor(fake_install(tmp_path, "2.4.1", "2, 0"), "--site", "http://127.0.0.1:9/")
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert "could not read its compatibility.json" in done.stdout and "verdict: PROBLEM" in done.stdout


def python_in(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TORCH_EMU"))}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-S", *args], check=False, capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(
    "code",
    [
        "import sys, torch_emu.doctor as doctor; sys.exit(doctor.main([]))",
        "import sys; from torch_emu.doctor import main; sys.exit(main([]))",
        "import importlib, sys; sys.exit(importlib.import_module('torch_emu.doctor').main([]))",
        "import runpy; runpy.run_module('torch_emu.doctor', run_name='__main__')",
    ],
)
def test_doctor_gives_its_verdict_when_imported_and_through_runpy(tmp_path: Path, code: str) -> None:
    done = python_in(fake_install(tmp_path, "2.12.1", "2, 1"), "-c", code)
    assert done.returncode == 1 and done.stderr == "", done.stdout + done.stderr
    assert "verdict: PROBLEM" in done.stdout and "built for torch 2.4.x, but torch 2.12.1" in done.stdout


def test_nothing_keys_off_the_command_line(tmp_path: Path) -> None:
    """A process whose argv names the doctor imports torch_emu like any other: the guard's error, not half a
    package; and the half-loaded package the doctor works with raises that error when anything else is asked of it."""
    site = fake_install(tmp_path, "2.12.1", "2, 1")
    named = python_in(site, "-c", "import torch_emu", "torch_emu.doctor", "-m", "torch_emu.doctor")
    assert named.returncode == 1 and "ImportError: torch_emu cannot load" in named.stderr, named.stderr
    after = python_in(site, "-c", "import torch_emu.doctor, torch_emu; torch_emu.synchronize")
    assert after.returncode == 1 and "ImportError: torch_emu did not load (torch_emu cannot load" in after.stderr


def load_published() -> ModuleType:
    spec = importlib.util.spec_from_file_location("torch_emu_published_under_test", PLUGIN / "_published.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_lookup_has_a_total_deadline_and_a_size_cap(tmp_path: Path) -> None:
    """A server trickling one byte at a time never times a read out: the lookup still ends at its deadline."""
    import time

    from registry_server import trickling_server

    published = load_published()
    with trickling_server(b'{"releases": [], "cells": []}' * 4, interval=0.5, content_type="application/json") as url:
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"did not answer in full within 1\.5 s"):
            published.published_pythons(url.rstrip("/"), timeout=1.5)
        assert time.monotonic() - start < 4
    (tmp_path / "compatibility.json").write_bytes(b" " * 64 + b"{}")
    for url in served_directory(tmp_path):
        with pytest.raises(ValueError, match="answered more than 32 bytes"):
            published.read_url(f"{url}/compatibility.json", 5, max_bytes=32)
        assert published.read_url(f"{url}/compatibility.json", 5) == b" " * 64 + b"{}"


def served_directory(directory: Path) -> Iterator[str]:
    """The directory served on 127.0.0.1 while the generator runs; yields its root URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_doctor_output_matches_the_install_page(tmp_path: Path) -> None:
    """The install how-to shows the doctor for torch 2.12.1 beside a torch_emu built for 2.4: the real doctor, run on
    the plugin's sources with stand-in torch and driver, prints it (only the Python line names this machine)."""
    done = doctor(fake_install(tmp_path, "2.12.1", "2, 1"))
    page = (REPO / "docs" / "how-to" / "install-wheel.md").read_text(encoding="utf-8")
    [shown] = [b for b in re.findall(r"```text\n(.*?)```", page, flags=re.DOTALL) if "torch_emu doctor" in b]

    def comparable(text: str) -> list[str]:
        return [line for line in text.strip().splitlines() if not line.startswith("  python ")]

    assert done.returncode == 1
    assert comparable(done.stdout) == comparable(shown)
