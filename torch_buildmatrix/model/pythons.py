"""The Python axis of the cells: a CPython minor, with the GIL or free-threaded ("3.13", "3.13t").

Free-threaded CPython (PEP 703, officially supported from 3.14 by PEP 779) is an interpreter of its own: its ABI tag is
cp313t, torch publishes wheels for it separately, an abi3 wheel does not install on it. So it is a Python of its own
everywhere a Python is named: matrix.yaml's lists, cell ids (torch2.10-cuda-cp313t-drv2), table columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.version import Version

PYTHON_TEXT = re.compile(r"(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?P<t>t?)")
FREE_THREADED_SUFFIX = "t"


@dataclass(frozen=True, order=True)
class Python:
    """A CPython minor: 3.13 (with the GIL) sorts before 3.13t (free-threaded), which sorts before 3.14."""

    version: Version  # major.minor
    free_threaded: bool = False

    @classmethod
    def parse(cls, text: str) -> Python:
        """ "3.13" or "3.13t"; raises ValueError for anything else."""
        found = PYTHON_TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
        if found is None:
            raise ValueError(f"{text!r:.40} is not a Python minor (e.g. 3.13, or 3.13t for the free-threaded build)")
        return cls(Version(f"{int(found['major'])}.{int(found['minor'])}"), bool(found["t"]))

    @classmethod
    def of(cls, version: Version, free_threaded: bool = False) -> Python:
        """The minor of a full version (3.13.5 -> 3.13)."""
        return cls(Version(f"{version.major}.{version.minor}"), free_threaded)

    @property
    def major(self) -> int:
        return self.version.major

    @property
    def minor(self) -> int:
        return self.version.minor

    @property
    def series(self) -> str:
        """The X.Y of the interpreter, without the free-threaded mark ("3.13" for 3.13t)."""
        return f"{self.major}.{self.minor}"

    @property
    def tag(self) -> str:
        """The interpreter's ABI tag: cp313, cp313t."""
        return f"cp{self.major}{self.minor}{FREE_THREADED_SUFFIX if self.free_threaded else ''}"

    @property
    def executable_name(self) -> str:
        """What the interpreter is called on PATH: python3.13, python3.13t."""
        return f"python{self}"

    @property
    def with_gil(self) -> Python:
        return Python(self.version)

    def __str__(self) -> str:
        return f"{self.series}{FREE_THREADED_SUFFIX if self.free_threaded else ''}"


def installs_on(wheel_tags: frozenset[Tag], python: Python) -> bool:
    """Whether CPython `python` (its ABI tag cp311, or cp314t for a free-threaded build) accepts one of these tags,
    whatever their platform: its own cpXY-cpXY, abi3 (not on a free-threaded build), none, or py3-none."""
    platforms = sorted({tag.platform for tag in wheel_tags})
    version = (python.major, python.minor)
    accepted = {
        *cpython_tags(version, abis=[python.tag], platforms=platforms),
        *compatible_tags(version, f"cp{python.major}{python.minor}", platforms),
    }
    return not wheel_tags.isdisjoint(accepted)
