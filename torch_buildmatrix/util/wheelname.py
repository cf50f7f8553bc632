"""Wheel filenames parsed once: a site of 10 000 cells names each wheel in a record, the table, the ledger and three
index pages, and packaging's parser costs about 0.1 ms a call."""

from __future__ import annotations

from functools import lru_cache

from packaging.tags import Tag
from packaging.utils import BuildTag, NormalizedName, parse_wheel_filename
from packaging.version import Version


@lru_cache(maxsize=1 << 16)
def parse_wheel(filename: str) -> tuple[NormalizedName, Version, BuildTag, frozenset[Tag]]:
    """packaging.utils.parse_wheel_filename, remembered; raises InvalidWheelFilename like it (never remembered)."""
    return parse_wheel_filename(filename)
