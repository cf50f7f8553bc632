"""The import-time guard: checks torch and the driver against what this wheel was built for.

It runs before the compiled extension is loaded, because with the wrong torch loading
the extension itself fails (undefined symbol, or worse). Pure Python, no torch_emu._C.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

PROJECT = "torch-emu"


@dataclass(frozen=True)
class Installed:
    torch_version: str
    torch_cxx11_abi: bool | None
    driver_api: tuple[int, int] | None  # None: the emu-driver wheel is missing
    python: str


def _minor(version: str) -> tuple[int, int]:
    parts = version.split("+", maxsplit=1)[0].split(".")
    return int(parts[0]), int(parts[1])


def wheel_hint(plugin_version: str, torch_version: str, driver_major: int) -> str:
    base = plugin_version.split("+", maxsplit=1)[0]
    major, minor = _minor(torch_version)
    return f"pip install '{PROJECT}=={base}+torch{major}.{minor}.drv{driver_major}'"


def problems(build: dict, installed: Installed) -> list:
    """What does not match, each as one sentence naming what is installed, what is needed and the fix."""
    found = []
    built_minor = _minor(build["TORCH_VERSION"])
    if _minor(installed.torch_version) != built_minor:
        found.append(
            f"this torch_emu ({build['PLUGIN_VERSION']}) was built for torch {built_minor[0]}.{built_minor[1]}.x, "
            f"but torch {installed.torch_version} is installed. Install the torch_emu wheel built for your torch: "
            f"{wheel_hint(build['PLUGIN_VERSION'], installed.torch_version, build['DRIVER_API_MAJOR'])} "
            f"(or install torch {built_minor[0]}.{built_minor[1]}.*)"
        )
    elif installed.torch_cxx11_abi is not None and installed.torch_cxx11_abi != build["CXX11_ABI"]:
        found.append(
            f"this torch_emu was built against a torch with _GLIBCXX_USE_CXX11_ABI={int(build['CXX11_ABI'])}, "
            f"but the installed torch {installed.torch_version} uses {int(installed.torch_cxx11_abi)}: "
            f"install the torch build published for this wheel ({build['TORCH_VERSION']})"
        )
    need = tuple(int(x) for x in build["DRIVER_API"].split("."))
    if installed.driver_api is None:
        found.append(
            f"the emu driver runtime is not installed: this torch_emu needs emu-driver {need[0]}.x "
            f"(API {build['DRIVER_API']} or newer within {need[0]}.x): pip install 'emu-driver>={build['DRIVER_API']},<{need[0] + 1}'"
        )
    elif installed.driver_api[0] != need[0] or installed.driver_api < need:
        have = f"{installed.driver_api[0]}.{installed.driver_api[1]}"
        found.append(
            f"this torch_emu needs emu driver API {need[0]}.x (>= {build['DRIVER_API']}), but emu-driver {have} is installed: "
            f"pip install 'emu-driver>={build['DRIVER_API']},<{need[0] + 1}', or install the torch_emu wheel for driver "
            f"{installed.driver_api[0]}: {wheel_hint(build['PLUGIN_VERSION'], installed.torch_version, installed.driver_api[0])}"
        )
    return found


def running_doctor() -> bool:
    """True while `python -m torch_emu.doctor` imports the package (it must load even when the guard fails)."""
    argv = getattr(sys, "orig_argv", None)
    if argv is None:
        try:
            with open("/proc/self/cmdline", "rb") as handle:
                argv = [a.decode(errors="replace") for a in handle.read().split(b"\0")]
        except OSError:
            argv = sys.argv
    return "torch_emu.doctor" in argv


def installed_now() -> Installed:
    import torch

    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
    try:
        from emu_driver import API_VERSION
    except ImportError:
        driver = None
    else:
        driver = (int(API_VERSION[0]), int(API_VERSION[1]))
    return Installed(
        torch.__version__, None if abi is None else bool(abi), driver, "{}.{}".format(*sys.version_info[:2])
    )


def check(build: dict) -> None:
    found = problems(build, installed_now())
    if found:
        raise ImportError("torch_emu cannot load: " + " Also: ".join(found))
