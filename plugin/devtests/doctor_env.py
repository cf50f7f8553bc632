"""The plugin's doctor on its real Python sources with stand-in torch and emu-driver packages: an installed site to
run `python -m torch_emu.doctor` in (test_guard_doctor.py; tests/unit/test_publish_new_pythons.py runs it on a
published site)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "torch_emu"
BUILD_INFO = """\
PLUGIN_VERSION = '0.1.0+torch.2.4.drv.2'
TORCH_VERSION = '2.4.1'
TORCH_MINOR = '2.4'
TORCH_VARIANT = 'cuda'
CXX11_ABI = False
DRIVER_API = '2.1'
DRIVER_API_MAJOR = 2
DRIVER_VERSION = '2.1.0+emu'
"""


def fake_install(root: Path, torch: str | None, driver: str | None) -> Path:
    """site/ with torch_emu (real sources, the build facts above, no compiled _C), and stand-in torch and emu_driver.

    torch: a version, 'broken' (import raises OSError like a missing CUDA library), or None (absent).
    driver: 'MAJOR, MINOR', 'unreadable' (the package without its _version module), or None (absent).
    """
    site = root / "site"
    package = site / "torch_emu"
    shutil.copytree(PLUGIN, package, ignore=shutil.ignore_patterns("__pycache__", "_build_info.py", "_C*"))
    (package / "_build_info.py").write_text(BUILD_INFO)
    if torch is not None:
        (site / "torch").mkdir()
        body = (
            "raise OSError('libcublas.so.12: cannot open shared object file')\n"
            if torch == "broken"
            else f"__version__ = {torch!r}\nclass _C:\n    _GLIBCXX_USE_CXX11_ABI = False\n"
        )
        (site / "torch" / "__init__.py").write_text(body)
    if driver is not None:
        (site / "emu_driver").mkdir()
        (site / "emu_driver" / "__init__.py").write_text("from emu_driver._version import API_VERSION\n")
        if driver != "unreadable":
            (site / "emu_driver" / "_version.py").write_text(f"API_VERSION = ({driver})\n")
    return site


def doctor(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m torch_emu.doctor` as a user runs it; -S keeps site-packages (and any real torch) out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TORCH_EMU"))}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-S", "-m", "torch_emu.doctor", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
