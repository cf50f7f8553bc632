"""Builds propops against the torch installed in this environment (setup.py imports torch, as most do).

The version comes from PROPOPS_VERSION when set (torch-buildmatrix sets it: 0.1.0+torch.2.13), else 0.1.0.
"""

from __future__ import annotations

import os

import torch
from packaging.version import Version
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

torch_version = Version(torch.__version__)

setup(
    name="propops",
    version=os.environ.get("PROPOPS_VERSION", "0.1.0"),
    description="One CPU operator (running_max) whose own tests need hypothesis and NumPy",
    packages=["propops"],
    ext_modules=[
        CppExtension(name="propops._ops", sources=["csrc/running_max.cpp"], extra_compile_args=["-O2", "-g0"])
    ],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
    install_requires=[f"torch=={torch_version.major}.{torch_version.minor}.*"],
    zip_safe=False,
)
