"""Two published sites compared as a user sees them: the wheels (by path and sha256), the wheel index pages (which
carry every hash), compatibility.json (the table) and the install page. When each cell was recorded differs between
two machines that built the same cells (each at its own time), so times are left out of the comparison."""

from __future__ import annotations

import hashlib
import json
import re
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
    assert without_times(one / "compatibility.json") == without_times(other / "compatibility.json")
    assert without_times(one / "index.html") == without_times(other / "index.html")


TIME = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?")


def without_times(path: Path) -> object:
    """A table (JSON) without its cells' recorded times; a page or the Markdown docs with every date blanked."""
    if path.suffix == ".json":
        table = json.loads(path.read_text())
        for cell in table["cells"]:
            assert cell.pop("recorded", None) or cell["status"] == "not built", cell
            if "latest" in cell:
                cell["latest"].pop("recorded", None)
        return table
    return TIME.sub("<time>", path.read_text())
