"""Builds segops against the torch installed in this environment (its setup.py imports torch, as most do).

- The version comes from SEGOPS_VERSION when set (torch-buildmatrix sets it: plugin.version and the cell's local label,
  e.g. 0.1.0+pt2.13), else the plain release below.
- torch >= 2.10 builds against the LibTorch stable ABI (SEGOPS_STABLE_ABI, TORCH_TARGET_VERSION 2.10): one such build
  loads on every later release. Older releases get an ordinary build. SEGOPS_STABLE_ABI=0 or 1 forces a mode.
- segops/_build_info.py records what the wheel was built against. Requires-Dist pins torch's release line for an
  ordinary build (torch==2.7.*), and says `torch>=2.10` for a stable-ABI build made against 2.10: it installs with
  every later release (its lower bound is the release built against, the oldest one its builder tested).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from packaging.version import Version
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = Path(__file__).parent.resolve()
VERSION = os.environ.get("SEGOPS_VERSION", "0.1.0")
STABLE_FROM = Version("2.10")  # TORCH_TARGET_VERSION below says the same

torch_version = Version(torch.__version__)
torch_minor = f"{torch_version.major}.{torch_version.minor}"
forced = os.environ.get("SEGOPS_STABLE_ABI", "")
stable = forced == "1" if forced in ("0", "1") else Version(torch_version.base_version) >= STABLE_FROM
if stable and Version(torch_version.base_version) < STABLE_FROM:
    raise SystemExit(f"SEGOPS_STABLE_ABI=1 needs torch >= {STABLE_FROM}; this is {torch.__version__}")

macros = [("SEGOPS_STABLE_ABI", None), ("TORCH_TARGET_VERSION", "0x020a000000000000")] if stable else []
(HERE / "segops" / "_build_info.py").write_text(
    '"""What this segops wheel was built against (written by setup.py)."""\n\n'
    f"TORCH_VERSION = {torch.__version__!r}\n"
    f"STABLE_ABI = {stable!r}\n"
)

setup(
    name="segops",
    version=VERSION,
    description="Segment reductions (sum, count, mean) as torch operators, with autograd",
    packages=["segops"],
    ext_modules=[
        CppExtension(
            name="segops._segops",
            sources=["csrc/segment_ops.cpp"],
            include_dirs=[str(HERE / "csrc")],
            define_macros=macros,
            extra_compile_args=["-O2", "-g0", "-fvisibility=hidden"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
    install_requires=[f"torch>={torch_minor}" if stable else f"torch=={torch_minor}.*"],
    zip_safe=False,
)
