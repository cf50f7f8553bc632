"""The import guard: a mismatched torch or driver gives an ImportError that names the fix."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from smoke_gates import OTHER_MINOR, OTHER_TORCH

import torch_emu
from torch_emu import _build_info
from torch_emu._guard import Installed, problems

pytestmark = pytest.mark.feature("import_guard")

BUILD = {k: v for k, v in vars(_build_info).items() if k.isupper()}
DRIVER = tuple(int(x) for x in BUILD["DRIVER_API"].split("."))


def test_matching_install_has_no_problems():
    assert problems(BUILD, Installed(torch.__version__, BUILD["CXX11_ABI"], DRIVER, "3.11")) == []


def test_other_torch_minor_names_the_right_wheel():
    found = problems(BUILD, Installed(OTHER_TORCH, BUILD["CXX11_ABI"], DRIVER, "3.11"))
    assert len(found) == 1
    assert f"was built for torch {BUILD['TORCH_MINOR']}.x, but torch {OTHER_TORCH} is installed" in found[0]
    # The index of the installed torch's release picks a wheel that exists for this Python; no guessed pin.
    assert f"pip install torch-emu --only-binary=:all: --extra-index-url <site>/torch{OTHER_MINOR}/simple/" in found[0]


def test_vendor_build_of_the_same_release_line_passes():
    vendor = f"{BUILD['TORCH_MINOR']}.0a0+nv24.07"  # what NVIDIA's containers report; the wheel pins torch==X.Y.*
    assert problems(BUILD, Installed(vendor, BUILD["CXX11_ABI"], DRIVER, "3.11")) == []


def test_missing_or_old_driver():
    missing = problems(BUILD, Installed(torch.__version__, BUILD["CXX11_ABI"], None, "3.11"))
    pin = f"'emu-driver=={BUILD['DRIVER_VERSION']}'"
    assert "emu driver runtime is not installed" in missing[0] and pin in missing[0]
    other_major = (DRIVER[0] % 2 + 1, 0)
    wrong = problems(BUILD, Installed(torch.__version__, BUILD["CXX11_ABI"], other_major, "3.11"))
    assert f"needs emu driver API {DRIVER[0]}.x" in wrong[0] and pin in wrong[0] and "torch-emu" not in wrong[0]


def run_import(tmp_path: Path, prelude: str = "", edit=None) -> subprocess.CompletedProcess:
    """Imports a copy of the installed torch_emu package (optionally with edited build info) in a fresh interpreter."""
    copy = tmp_path / "torch_emu"
    shutil.copytree(Path(torch_emu.__file__).parent, copy)
    if edit:
        info = copy / "_build_info.py"
        info.write_text(edit(info.read_text()))
    code = prelude + f"\nimport sys; sys.path.insert(0, {str(tmp_path)!r})\nimport torch_emu\n"
    return subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=dict(os.environ), timeout=120
    )


def test_wheel_for_another_torch_raises_import_error_not_a_crash(tmp_path):
    done = run_import(
        tmp_path,
        edit=lambda text: text.replace(
            f"TORCH_VERSION = {BUILD['TORCH_VERSION']!r}", f"TORCH_VERSION = {OTHER_TORCH!r}"
        ),
    )
    assert done.returncode == 1, done.stderr
    assert "ImportError: torch_emu cannot load: this torch_emu" in done.stderr
    assert f"built for torch {OTHER_MINOR}.x" in done.stderr and "undefined symbol" not in done.stderr


def test_missing_driver_raises_import_error(tmp_path):
    done = run_import(
        tmp_path,
        prelude=textwrap.dedent("""
        import sys
        sys.modules['emu_driver'] = None  # as if the emu-driver wheel were not installed
    """),
    )
    assert done.returncode == 1
    assert "the emu driver runtime is not installed" in done.stderr
