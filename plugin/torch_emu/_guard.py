"""The import-time guard: checks torch and the driver against what this wheel was built for.

It runs before the compiled extension is loaded, because with the wrong torch loading
the extension itself fails (undefined symbol, or worse). Pure Python, no libtorch_emu.so, no
third-party imports: it must work in any environment, including one without torch.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

PROJECT = "torch-emu"
DRIVER_PROJECT = "emu-driver"
SITE_PLACEHOLDER = "<site>"
# Wheels only: where an index has no wheel for this Python, pip would otherwise build the public index's sdist of the
# name (someone else's, or ours without the SDK) instead of saying so.
ONLY_BINARY = "--only-binary=:all:"
_RELEASE_LINE = re.compile(r"\s*v?(\d+)\.(\d+)")


@dataclass(frozen=True)
class Installed:
    torch_version: str | None  # None: torch does not import (torch_error says why)
    torch_cxx11_abi: bool | None
    driver_api: tuple[int, int] | None  # None: emu-driver is missing, or unreadable (driver_error says why)
    python: str
    torch_error: str = ""
    driver_error: str = ""


def release_line(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version, the way the wheel's `torch==X.Y.*` pin reads it.

    Vendor builds count as their release line: 2.4.0a0+nv24.07 and 2.4.1+cu121 are both (2, 4).
    None when the string names no release at all.
    """
    match = _RELEASE_LINE.match(version)
    return (int(match[1]), int(match[2])) if match else None


def site_of(build: dict) -> str:
    return str(build.get("SITE_URL") or SITE_PLACEHOLDER).rstrip("/")


def index_command(line: tuple[int, int], site: str = SITE_PLACEHOLDER) -> str:
    """The per-torch-release index: it holds only that release's wheels, so pip and uv pick the one for
    the running Python and keep the installed torch. It names no wheel, so it never names one that is missing."""
    return f"pip install {PROJECT} {ONLY_BINARY} --extra-index-url {site}/torch{line[0]}.{line[1]}/simple/"


def driver_command(build: dict, site: str) -> str:
    """The driver wheel this torch_emu was built and tested with (it is on this release's index)."""
    line = release_line(build["TORCH_VERSION"]) or (0, 0)
    version = build.get("DRIVER_VERSION")
    major = int(build["DRIVER_API_MAJOR"])
    pin = f"=={version}" if version else f">={build['DRIVER_API']},<{major + 1}"
    index = f"{site}/torch{line[0]}.{line[1]}/simple/"
    return f"pip install '{DRIVER_PROJECT}{pin}' {ONLY_BINARY} --extra-index-url {index}"


def _torch_problems(build: dict, installed: Installed, site: str, published: dict | None) -> list:
    built = release_line(build["TORCH_VERSION"]) or (0, 0)
    built_text = f"{built[0]}.{built[1]}"
    if installed.torch_version is None:
        why = f" ({installed.torch_error})" if installed.torch_error else ""
        return [
            f"torch does not import{why}: this torch_emu ({build['PLUGIN_VERSION']}) was built for torch "
            f"{build['TORCH_VERSION']}; install torch {built_text}.* first (pip install 'torch=={built_text}.*')"
        ]
    have = release_line(installed.torch_version)
    if have is None:
        return [
            f"torch reports the version {installed.torch_version!r}, which names no release line; this torch_emu "
            f"was built for torch {built_text}.*: install torch {built_text}.* (pip install 'torch=={built_text}.*')"
        ]
    if have != built and published is not None and installed.python not in published.get(f"{have[0]}.{have[1]}", ()):
        here = sorted((m for m, pythons in published.items() if installed.python in pythons), key=release_line)
        there = sorted(published.get(f"{have[0]}.{have[1]}", ()), key=release_line)
        return [
            f"this torch_emu ({build['PLUGIN_VERSION']}) was built for torch {built_text}.x, but torch "
            f"{installed.torch_version} is installed, and no torch_emu is published for torch {have[0]}.{have[1]} on "
            f"Python {installed.python} (for torch {have[0]}.{have[1]}: Python {', '.join(there) or 'none'}; for "
            f"Python {installed.python}: torch {', '.join(here) or 'none'}). Install one of those torch releases, then "
            f"torch_emu from its index ({index_command(release_line(here[-1]) or built, site) if here else 'none yet'})"
        ]
    if have != built:
        return [
            f"this torch_emu ({build['PLUGIN_VERSION']}) was built for torch {built_text}.x, "
            f"but torch {installed.torch_version} is installed. Install the torch_emu wheel built for your torch: "
            f"{index_command(have, site)} (or install torch {built_text}.*)"
        ]
    if installed.torch_cxx11_abi is not None and installed.torch_cxx11_abi != build["CXX11_ABI"]:
        return [
            f"this torch_emu was built against a torch with _GLIBCXX_USE_CXX11_ABI={int(build['CXX11_ABI'])}, "
            f"but the installed torch {installed.torch_version} uses {int(installed.torch_cxx11_abi)}: "
            f"install the torch build published for this wheel ({build['TORCH_VERSION']})"
        ]
    return []


def _driver_problems(build: dict, installed: Installed, site: str) -> list:
    need = tuple(int(x) for x in str(build["DRIVER_API"]).split("."))
    fix = driver_command(build, site)
    if installed.driver_api is None and installed.driver_error:
        return [
            f"emu-driver is installed but unreadable ({installed.driver_error}): reinstall it: {fix} --force-reinstall"
        ]
    if installed.driver_api is None:
        return [
            f"the emu driver runtime is not installed: this torch_emu needs emu-driver {need[0]}.x "
            f"(API {build['DRIVER_API']} or newer within {need[0]}.x): {fix}"
        ]
    have = f"{installed.driver_api[0]}.{installed.driver_api[1]}"
    if installed.driver_api[0] != need[0]:
        return [
            f"this torch_emu needs emu driver API {need[0]}.x (>= {build['DRIVER_API']}), but emu-driver {have} "
            f"is installed, an API it was not built for: install the driver it was built with: {fix}"
        ]
    if installed.driver_api < need:
        return [
            f"this torch_emu needs emu driver API >= {build['DRIVER_API']}, but emu-driver {have} is installed: "
            f"upgrade the driver: {fix}"
        ]
    return []


def problems(build: dict, installed: Installed, site: str | None = None, published: dict | None = None) -> list:
    """What does not match, each as one sentence naming what is installed, what is needed and the fix.

    `published` (torch release line -> Pythons with a wheel, from the site) lets the fix name only what exists.
    """
    where = site_of(build) if site is None else site.rstrip("/")
    return _torch_problems(build, installed, where, published) + _driver_problems(build, installed, where)


DOCTOR = "torch_emu.doctor"
# The modules whose frames run an import: the import system (by either of its names) and runpy (`python -m`).
_IMPORT_MACHINERY = ("importlib._bootstrap", "_frozen_importlib", "runpy")


def importing_doctor() -> bool:
    """True while this import of torch_emu is the first half of importing torch_emu.doctor, however it is imported:
    `python -m torch_emu.doctor`, runpy.run_module, `import torch_emu.doctor`, importlib.import_module.

    It reads the import in progress from the import system's own frames (the module name it is loading), never the
    command line: a process that merely mentions the doctor in its argv imports torch_emu like any other.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") in _IMPORT_MACHINERY:
            names = (frame.f_locals.get("name"), frame.f_locals.get("mod_name"))
            if DOCTOR in names:
                return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def installed_now() -> Installed:
    """What this environment has; never raises (a torch or driver that fails to import is reported, not raised)."""
    python = "{}.{}".format(*sys.version_info[:2])
    try:
        import torch
    except Exception as exc:  # ImportError, or OSError from a damaged CUDA library: either way, no torch
        torch_version, abi, torch_error = None, None, _first_line(exc)
    else:
        torch_version, torch_error = str(getattr(torch, "__version__", "")), ""
        flag = getattr(getattr(torch, "_C", None), "_GLIBCXX_USE_CXX11_ABI", None)
        abi = None if flag is None else bool(flag)
    driver: tuple[int, int] | None = None
    driver_error = ""
    try:
        from emu_driver import API_VERSION

        driver = (int(API_VERSION[0]), int(API_VERSION[1]))
    except ModuleNotFoundError as exc:
        if exc.name != "emu_driver":
            driver_error = _first_line(exc)  # the package is there but part of it is missing
    except Exception as exc:
        driver_error = _first_line(exc)
    return Installed(torch_version, abi, driver, python, torch_error, driver_error)


def check(build: dict) -> None:
    found = problems(build, installed_now())
    if found:
        raise ImportError("torch_emu cannot load: " + " Also: ".join(found))
