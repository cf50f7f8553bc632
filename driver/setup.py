"""Builds the emu driver's user-space runtime wheel (`emu-driver`) at one API version.

The API version comes from EMU_DRIVER_API_VERSION ("2.4" by default) and becomes the
wheel's version with the driver's patch release from release.txt (2.4.1+emu), the generated
emu_driver_version.h, and emu_driver.api_version. Every API version's wheel is built from this one
tree, so a change here changes the bytes of every API version's wheel: a published wheel is never
replaced, so such a change takes a new patch release (tests/unit/test_driver_release.py holds that).
The local label (+emu) is what makes an exact pin squat-proof: the public index refuses
local versions, so nobody can publish an emu-driver==2.2.0+emu there.
The library is a plain shared object (not a Python extension): the wheel is tagged
py3-none-<platform> because it is the same for every Python.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sysconfig
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).parent.resolve()
LOCAL_LABEL = "emu"


def patch_release() -> int:
    """The driver's patch release: the newest `patch N inputs <sha256>` line of release.txt."""
    patches = [int(n) for n in re.findall(r"^patch (\d+) inputs ", (HERE / "release.txt").read_text(), re.MULTILINE)]
    if not patches:
        raise SystemExit(f"{HERE / 'release.txt'}: no `patch N inputs <sha256>` line")
    return max(patches)


def api_version() -> tuple[int, int]:
    text = os.environ.get("EMU_DRIVER_API_VERSION", "2.4")
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not match:
        raise SystemExit(f"EMU_DRIVER_API_VERSION={text!r}: expected MAJOR.MINOR, for example 2.2")
    return int(match[1]), int(match[2])


def werror() -> list[str]:
    """-Werror where EMU_WERROR=1 (our CI and development builds); a release build warns but does not fail. The flag
    does not change the library's bytes."""
    return ["-Werror"] if os.environ.get("EMU_WERROR", "") == "1" else []


def sanitizer_flags() -> list[str]:
    """EMU_SANITIZE=address,undefined: an instrumented library for sanitizer runs, never one to publish (loading it
    needs the sanitizer runtime)."""
    names = [name for name in os.environ.get("EMU_SANITIZE", "").split(",") if name]
    if not names:
        return []
    return [f"-fsanitize={','.join(names)}", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-g"]


class BuildDriver(build_py):
    """Generates the version header, compiles libemu_driver.so and lays both out in the package."""

    def run(self) -> None:
        super().run()
        major, minor = api_version()
        package = Path(self.build_lib) / "emu_driver"
        include = package / "include"
        lib = package / "lib"
        include.mkdir(parents=True, exist_ok=True)
        lib.mkdir(parents=True, exist_ok=True)
        template = (HERE / "include" / "emu_driver_version.h.in").read_text()
        (include / "emu_driver_version.h").write_text(
            template.replace("@MAJOR@", str(major)).replace("@MINOR@", str(minor))
        )
        (include / "emu_driver.h").write_text((HERE / "include" / "emu_driver.h").read_text())
        (package / "_version.py").write_text(f"API_VERSION = ({major}, {minor})\n")
        sources = sorted(str(p) for p in (HERE / "src").glob("*.cpp"))
        cxx = shlex.split(os.environ.get("CXX", "g++"))
        command = [
            *cxx,
            "-std=c++17",
            "-O2",
            "-g0",
            "-fPIC",
            "-shared",
            "-fvisibility=hidden",
            "-pthread",
            "-Wall",
            "-Wextra",
            *werror(),
            *sanitizer_flags(),
            f"-I{include}",
            f"-I{HERE / 'src'}",
            *sources,
            "-Wl,-soname,libemu_driver.so",
            "-o",
            str(lib / "libemu_driver.so"),
        ]
        print(" ".join(command))
        subprocess.run(command, check=True)


class PlatformWheel(bdist_wheel):
    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self) -> tuple[str, str, str]:
        return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")


class BinaryDistribution(Distribution):
    """Installs into platlib: the package carries a compiled library."""

    def has_ext_modules(self) -> bool:
        return True


major, minor = api_version()
setup(
    distclass=BinaryDistribution,
    name="emu-driver",
    version=f"{major}.{minor}.{patch_release()}+{LOCAL_LABEL}",
    description="User-space runtime of the emulated 'emu' accelerator (shared library, headers, build helper)",
    packages=["emu_driver"],
    python_requires=">=3.8",
    cmdclass={"build_py": BuildDriver, "bdist_wheel": PlatformWheel},
    zip_safe=False,
)
