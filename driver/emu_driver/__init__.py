"""The emu driver's runtime as a wheel: where its headers and library are, and which API it implements.

Builds use get_include() and get_library_dir(); programs that need the library loaded
without an rpath call load().
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from emu_driver._version import API_VERSION

__all__ = ["API_VERSION", "api_version", "get_include", "get_library_dir", "library_path", "load"]

_HERE = Path(__file__).resolve().parent


def api_version() -> str:
    """The driver API version this wheel was built at, as 'MAJOR.MINOR'."""
    return "{}.{}".format(*API_VERSION)


def get_include() -> str:
    return str(_HERE / "include")


def get_library_dir() -> str:
    return str(_HERE / "lib")


def library_path() -> str:
    return str(Path(get_library_dir()) / "libemu_driver.so")


def load() -> ctypes.CDLL:
    """Loads libemu_driver.so (globally, so extensions linked against it resolve to this copy)."""
    return ctypes.CDLL(library_path(), mode=ctypes.RTLD_GLOBAL)
