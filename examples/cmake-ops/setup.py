"""Builds cmake_ops with CMake against the torch installed in this environment (setup.py imports torch).

- CMakeLists.txt finds torch through torch's CMake config; this file runs `cmake` and copies the library it makes
  into the package as cmake_ops/_ops*.so (a plain shared library: torch.ops.load_library loads it, no Python API).
- The version comes from CMAKE_OPS_VERSION when set (torch-buildmatrix sets it: 0.1.0+torch.2.13), else 0.1.0.
- CMAKE_BUILD_PARALLEL_LEVEL (torch-buildmatrix sets it to the build's share of the cores) is read by `cmake --build`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import torch
from packaging.version import Version
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent.resolve()
VERSION = os.environ.get("CMAKE_OPS_VERSION", "0.1.0")
torch_version = Version(torch.__version__)
torch_minor = f"{torch_version.major}.{torch_version.minor}"


class CMakeBuild(build_ext):
    """Each extension is a CMake project's library, built and copied to where setuptools expects the module."""

    def build_extension(self, ext: Extension) -> None:
        work = Path(self.build_temp).resolve() / "cmake"
        configure = [
            "cmake",
            "-S",
            str(HERE),
            "-B",
            str(work),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
            "-DCMAKE_SKIP_RPATH=ON",  # torch's libraries are loaded by `import torch`, not found by path
        ]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(work)], check=True)
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(work / "libcmake_ops.so", target)


setup(
    name="cmake-ops",
    version=VERSION,
    description="One CPU operator (scaled_add) built with CMake and registered with TORCH_LIBRARY",
    packages=["cmake_ops"],
    ext_modules=[Extension("cmake_ops._ops", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=[f"torch=={torch_minor}.*"],
    zip_safe=False,
)
