"""Two published sites compared as a user sees them: the wheels (by path and sha256), the wheel index pages (which
carry every hash), compatibility.json (the table) and the install page."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def site_wheels(site: Path) -> dict[str, str]:
    return {p.relative_to(site).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in site.rglob("*.whl")}


def site_index_pages(site: Path) -> dict[str, str]:
    """The wheel index pages (they carry every wheel's sha256), by path."""
    return {p.relative_to(site).as_posix(): p.read_text() for p in (site / "simple").rglob("*.html")}


def assert_same_site(one: Path, other: Path) -> None:
    """The two sites serve the same wheels, index, table and page."""
    wheels = site_wheels(one)
    assert wheels, f"{one} publishes no wheel"
    assert wheels == site_wheels(other)
    assert site_index_pages(one) == site_index_pages(other)
    assert json.loads((one / "compatibility.json").read_text()) == json.loads(
        (other / "compatibility.json").read_text()
    )
    assert (one / "index.html").read_text() == (other / "index.html").read_text()
