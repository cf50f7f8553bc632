"""Builds the torch-emu wheel against the torch and emu-driver installed in this environment.

The compiled part is one shared library, torch_emu/libtorch_emu.so: the runtime, the kernels and the ops Python calls
(torch.ops.torch_emu.*), linked against libtorch and the driver only. It uses no CPython API and is loaded with
torch.ops.load_library, so the wheel is tagged py3-none-<platform>: one file serves every CPython 3 the torch release
supports, free-threaded builds included (an abi3 wheel would not).

The wheel's version (the build matrix's, see PLUGIN_VERSION) carries both as a PEP 440 local label, its
Requires-Dist pins torch to that release line (torch==2.13.*, which vendor builds such as
2.13.0a0+nv25.01 satisfy too, while >=2.13,<2.14 would not) and emu-driver to that API major, and
torch_emu/_build_info.py records what it was built against for the import-time guard.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import emu_driver
import torch
from packaging.version import Version
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 (torch 2.1's build environment pins setuptools < 80)
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).parent.resolve()
# The wheel's version, local label included (0.1.0+torch.2.13.drv.2), comes from the build matrix only: it writes
# matrix.yaml's plugin.version and the cell's label into its patched copy, so the label's scheme lives there alone.
VERSION_FILE = HERE / "PLUGIN_VERSION"
if not VERSION_FILE.is_file():
    sys.exit(
        f"{VERSION_FILE} is missing: build through the build matrix (`nox -s build`), which writes it from "
        "matrix.yaml's plugin.version and the cell's local label into its copy of plugin/"
    )
VERSION = VERSION_FILE.read_text().strip()

torch_version = Version(torch.__version__)
torch_minor = f"{torch_version.major}.{torch_version.minor}"
driver_major, driver_minor = emu_driver.API_VERSION
cxx11_abi = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
variant = "cuda" if torch.version.cuda else "cpu"

BUILD_INFO = f'''"""What this torch_emu wheel was built against (written by setup.py; read before the extension
loads)."""

PLUGIN_VERSION = {VERSION!r}
TORCH_VERSION = {torch.__version__!r}
TORCH_MINOR = {torch_minor!r}
TORCH_VARIANT = {variant!r}
CXX11_ABI = {cxx11_abi!r}
DRIVER_API = {f"{driver_major}.{driver_minor}"!r}
DRIVER_API_MAJOR = {driver_major!r}
DRIVER_VERSION = {importlib.metadata.version("emu-driver")!r}
'''
(HERE / "torch_emu" / "_build_info.py").write_text(BUILD_INFO)

LIBRARY = "torch_emu.libtorch_emu"  # installed as torch_emu/libtorch_emu.so
sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc").rglob("*.cpp"))
library = CppExtension(
    name=LIBRARY,
    sources=sources,
    include_dirs=[str(HERE / "csrc"), emu_driver.get_include()],  # our includes are rooted at csrc/
    library_dirs=[emu_driver.get_library_dir()],
    libraries=["emu_driver"],
    # The driver wheel installs beside torch_emu in site-packages: find its library there.
    extra_link_args=["-Wl,-rpath,$ORIGIN/../emu_driver/lib"],
    extra_compile_args=["-O2", "-g0", "-fvisibility=hidden"],
)
# libtorch only: torch_python is built for one Python, and nothing here uses it (cpp_extension adds it by default).
library.libraries = [name for name in library.libraries if name != "torch_python"]
# torch's headers are system headers (-isystem, in COMPILE_FLAGS): their warnings are torch's, not ours to fail on.
TORCH_INCLUDES = [path for path in library.include_dirs if path in include_paths()]
library.include_dirs = [path for path in library.include_dirs if path not in TORCH_INCLUDES]


# The library's own compile and link flags. distutils starts from the building interpreter's sysconfig: its CFLAGS,
# CCSHARED and LDSHARED, which for a pyenv Python carry -Wl,-rpath to that Python's lib/ (and Debian's add flags of
# their own). Right for that Python's extension modules, but this library is none: with them its bytes (and its
# RUNPATH) depended on which Python built it. The environment's CFLAGS, CXXFLAGS, CPPFLAGS and LDFLAGS still count:
# they are the builder's (the build matrix maps its work directory out of __FILE__ strings with them).
# Warnings: -Wall -Wextra in every build; EMU_WERROR=1 (development builds, the sanitizer runs) makes them errors. A
# release build (torch-buildmatrix build, as published) only warns: a warning a newer compiler adds must not stop a
# release. Neither -Werror nor -isystem changes the library's bytes.
WERROR = os.environ.get("EMU_WERROR", "") == "1"
COMPILE_FLAGS = [
    "-fPIC",
    "-DNDEBUG",
    "-pthread",
    "-Wall",
    "-Wextra",
    *(["-Werror"] if WERROR else []),
    *(flag for path in TORCH_INCLUDES for flag in ("-isystem", path)),
]
LINK_FLAGS = ["-shared", "-pthread"]


def environment_flags(*names: str) -> list[str]:
    return [flag for name in names for flag in shlex.split(os.environ.get(name, ""))]


def torch_prefix_maps(build_temp: str) -> list[str]:
    """__FILE__ in torch's inline headers (TORCH_CHECK, TORCH_INTERNAL_ASSERT) names the header's path, which runs
    through the building environment's lib/pythonX.Y/site-packages: map torch's directory to `torch`. Twice: as the
    compiler is given it (absolute), and relative to the directory it compiles in, which is how ccache hands it over
    when the build directory is under CCACHE_BASEDIR."""
    torch_dir = str(Path(torch.__file__).resolve().parent)
    relative = os.path.relpath(torch_dir, os.path.realpath(build_temp))
    return [f"-ffile-prefix-map={torch_dir}=torch", f"-ffile-prefix-map={relative}=torch"]


class BuildLibrary(BuildExtension.with_options(use_ninja=True, no_python_abi_suffix=True)):  # type: ignore[misc]
    """BuildExtension (ninja, torch's ABI and C++ standard flags) without the building Python's own flags;
    no_python_abi_suffix: libtorch_emu.so, not libtorch_emu.cpython-311-x86_64-linux-gnu.so (it is no Python module)."""

    def build_extensions(self) -> None:
        maps = torch_prefix_maps(self.build_temp)
        # The *_cxx commands exist in setuptools >= 72's distutils, which links C++ with linker_so_cxx (LDCXXSHARED).
        # torch's ninja build takes its C++ flags from compiler_so.
        commands = {
            "compiler_so": [*COMPILE_FLAGS, *environment_flags("CPPFLAGS", "CFLAGS"), *maps],
            "compiler_so_cxx": [*COMPILE_FLAGS, *environment_flags("CPPFLAGS", "CXXFLAGS"), *maps],
            "linker_so": [*LINK_FLAGS, *environment_flags("LDFLAGS")],
            "linker_so_cxx": [*LINK_FLAGS, *environment_flags("LDFLAGS")],
        }
        for name, flags in commands.items():
            command = getattr(self.compiler, name, None)
            if command:
                self.compiler.set_executable(name, [command[0], *flags])
        super().build_extensions()


class PlatformWheel(bdist_wheel):  # type: ignore[misc]
    """py3-none-<platform>: no CPython API in the compiled part, so any CPython 3 (free-threaded too) can load it."""

    def get_tag(self) -> Any:
        _python, _abi, platform = super().get_tag()
        return "py3", "none", platform


setup(
    name="torch-emu",
    version=VERSION,
    description="PyTorch PrivateUse1 backend for the emulated 'emu' accelerator",
    packages=["torch_emu", "torch_emu.contrib"],
    py_modules=["torch_emu_autoload"],
    ext_modules=[library],
    cmdclass={"build_ext": BuildLibrary, "bdist_wheel": PlatformWheel},
    python_requires=">=3.8",
    install_requires=[
        f"torch=={torch_minor}.*",
        f"emu-driver>={driver_major}.{driver_minor},<{driver_major + 1}",
    ],
    entry_points={
        "torch.backends": ["torch_emu = torch_emu_autoload:load"],
        # torch.compile(backend="emu"), as PyTorch's reference backend names one after its device.
        # torch.compile(backend="emugraphs"): AOTAutograd's graphs captured once and replayed (emu's reduce-overhead).
        "torch_dynamo_backends": [
            "emu = torch_emu._inductor_backend:compile_for_emu",
            "emugraphs = torch_emu._graphs_backend:compile_with_graphs",
        ],
    },
    zip_safe=False,
)
