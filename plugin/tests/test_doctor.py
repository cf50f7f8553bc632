"""python -m torch_emu.doctor: a verdict and the fix, also when import torch_emu would fail."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from smoke_gates import OTHER_MINOR, OTHER_TORCH

import torch_emu
from torch_emu import _build_info

pytestmark = pytest.mark.feature("doctor")


def test_doctor_says_ok():
    done = subprocess.run([sys.executable, "-m", "torch_emu.doctor"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: OK" in done.stdout and "devices     2 x Emu Accelerator" in done.stdout


def test_doctor_names_the_fix_for_a_wrong_torch(tmp_path: Path):
    copy = tmp_path / "torch_emu"
    shutil.copytree(Path(torch_emu.__file__).parent, copy)
    info = copy / "_build_info.py"
    info.write_text(
        info.read_text().replace(f"TORCH_VERSION = {_build_info.TORCH_VERSION!r}", f"TORCH_VERSION = {OTHER_TORCH!r}")
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "torch_emu.doctor"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "verdict: PROBLEM" in done.stdout and f"built for torch {OTHER_MINOR}.x" in done.stdout
    assert f"+torch{_build_info.TORCH_MINOR}.drv{_build_info.DRIVER_API_MAJOR}'" in done.stdout
