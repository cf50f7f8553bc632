"""python -m torch_emu.doctor: a verdict and the fix, also when import torch_emu would fail."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from smoke_gates import OTHER_MINOR, OTHER_TORCH, child_process_deep

import torch_emu
from torch_emu import _build_info

pytestmark = pytest.mark.feature("doctor")


def test_doctor_says_ok():
    done = subprocess.run(
        [sys.executable, "-m", "torch_emu.doctor"], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: OK" in done.stdout and "devices     2 x Emu Accelerator" in done.stdout


@child_process_deep
def test_doctor_names_the_fix_for_a_wrong_torch(tmp_path: Path):
    copy = tmp_path / "torch_emu"
    shutil.copytree(Path(torch_emu.__file__).parent, copy)
    info = copy / "_build_info.py"
    info.write_text(
        info.read_text().replace(f"TORCH_VERSION = {_build_info.TORCH_VERSION!r}", f"TORCH_VERSION = {OTHER_TORCH!r}")
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "torch_emu.doctor"], check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "verdict: PROBLEM" in done.stdout and f"built for torch {OTHER_MINOR}.x" in done.stdout
    index = f"<site>/torch{_build_info.TORCH_MINOR}/simple/"
    assert f"pip install torch-emu --only-binary=:all: --extra-index-url {index}" in done.stdout


def installed_copy(tmp_path: Path) -> Path:
    """Copies of the installed torch_emu and emu_driver side by side, as in site-packages: the extension's rpath
    ($ORIGIN/../emu_driver/lib) then loads the copied driver library."""
    import emu_driver

    shutil.copytree(Path(torch_emu.__file__).parent, tmp_path / "torch_emu")
    shutil.copytree(Path(emu_driver.__file__).parent, tmp_path / "emu_driver")
    return tmp_path


def run_doctor(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(path))
    return subprocess.run(
        [sys.executable, "-m", "torch_emu.doctor"], check=False, capture_output=True, text=True, env=env, timeout=120
    )


def assert_verdict(done: subprocess.CompletedProcess, expected: str) -> None:
    assert done.returncode == 1 and done.stderr == "", done.stdout + done.stderr
    assert "verdict: PROBLEM" in done.stdout and expected in done.stdout, done.stdout
    assert "torch-emu==" not in done.stdout  # never a guessed plugin pin


def test_doctor_without_torch(tmp_path: Path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('no torch in this environment')\n")
    assert_verdict(run_doctor(installed_copy(tmp_path)), "torch does not import (ImportError: no torch")


@child_process_deep
def test_doctor_with_a_damaged_driver_library(tmp_path: Path):
    path = installed_copy(tmp_path)
    (path / "emu_driver" / "lib" / "libemu_driver.so").write_bytes(b"\0not an ELF file")
    assert_verdict(run_doctor(path), "the torch_emu extension failed to load")


@child_process_deep
def test_doctor_with_an_older_driver_api_of_the_same_major(tmp_path: Path):
    path = installed_copy(tmp_path)
    major = _build_info.DRIVER_API_MAJOR
    (path / "emu_driver" / "_version.py").write_text(f"API_VERSION = ({major}, 0)\n")
    done = run_doctor(path)
    assert_verdict(done, f"upgrade the driver: pip install 'emu-driver=={_build_info.DRIVER_VERSION}'")


@child_process_deep
def test_doctor_with_an_unknown_driver_api(tmp_path: Path):
    path = installed_copy(tmp_path)
    (path / "emu_driver" / "_version.py").write_text("API_VERSION = (9, 7)\n")
    assert_verdict(run_doctor(path), "emu-driver 9.7 is installed, an API it was not built for")
