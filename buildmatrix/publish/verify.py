"""Checks a staged site before it goes live: wheels against their records and the released bytes, metadata
against the wheels, the page against the table and the matrix, and every link against the staged files."""

from __future__ import annotations

import json
import posixpath
import zipfile
from collections.abc import Mapping
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name, parse_wheel_filename

from buildmatrix.model.matrix import Matrix
from buildmatrix.model.vocab import Status
from buildmatrix.publish.index import check_coverage, sha256_hex
from buildmatrix.publish.table import CompatTable, stale_problems

RELEASED = "released.json"  # every wheel the site ever served, path -> sha256: released bytes never change
RELEASED_SCHEMA_VERSION = 1


def read_released(site: Path) -> tuple[dict[str, str], list[str]]:
    """What the live site released (its ledger and the wheels it serves), and problems reading it."""
    released: dict[str, str] = {}
    if not site.is_dir():
        return released, []
    ledger = site / RELEASED
    if ledger.is_file():
        try:
            data = json.loads(ledger.read_text(encoding="utf-8"))
            if data.get("schema_version") != RELEASED_SCHEMA_VERSION or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in data["wheels"].items()
            ):
                raise ValueError("not a released-wheels ledger of this schema")
            released.update(data["wheels"])
        except (ValueError, KeyError, AttributeError, TypeError, UnicodeDecodeError) as exc:
            return released, [f"{ledger}: unreadable ({exc}); restore it from the served copy before publishing"]
    for wheel in sorted(site.rglob("*.whl")):
        released.setdefault(wheel.relative_to(site).as_posix(), sha256_hex(wheel.read_bytes()))
    return released, []


def released_json(released: Mapping[str, str]) -> str:
    body = {"schema_version": RELEASED_SCHEMA_VERSION, "wheels": dict(sorted(released.items()))}
    return json.dumps(body, indent=2) + "\n"


def immutability_problem(path: str, sha256: str, released: Mapping[str, str]) -> str:
    old = released.get(path)
    if old is None or old == sha256:
        return ""
    return (
        f"{path}: a different build (sha256 {sha256}) of a released wheel (sha256 {old}); released bytes never "
        "change, so the site keeps serving the released one. Rebuild it from the same inputs (builds are "
        "reproducible), or publish the change under a new version (raise plugin.version in matrix.yaml)"
    )


def metadata_problems(path: str, wheel: Path, metadata: Path) -> list[str]:
    """The staged .metadata is the wheel's own METADATA, and its Name and Version are the filename's."""
    name, version, _build, _tags = parse_wheel_filename(wheel.name)
    try:
        with zipfile.ZipFile(wheel) as archive:
            inside = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(inside) != 1:
                return [f"{path}: expected one .dist-info/METADATA, found {inside}"]
            own = archive.read(inside[0])
    except (zipfile.BadZipFile, OSError) as exc:
        return [f"{path}: not a readable wheel ({exc})"]
    problems = []
    if not metadata.is_file() or metadata.read_bytes() != own:
        problems.append(f"{path}.metadata is not the wheel's own METADATA")
    headers: dict[str, str] = {}
    for line in own.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), value.strip())
    if canonicalize_name(headers.get("name", "")) != name:
        problems.append(f"{path}: METADATA Name {headers.get('name')!r} is not the filename's {name}")
    if headers.get("version") != str(version):
        problems.append(f"{path}: METADATA Version {headers.get('version')!r} is not the filename's {version}")
    return problems


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, str] = {}  # td id -> class
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "td" and "id" in found:
            self.cells[found["id"]] = found.get("class", "")
        if tag == "a" and "href" in found:
            self.links.append(found["href"])


def link_problem(staging: Path, page: str, href: str) -> str:
    """A link of a staged page must be relative, stay inside the site and resolve to a staged file (or index.html)."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith("/") or "\\" in href:
        return f"{page}: link {href!r:.80} is not a relative link inside the site"
    target = unquote(parts.path)
    if not target:
        return ""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        return f"{page}: link {href!r:.80} leads outside the site"
    file = staging / joined
    if target.endswith("/") or joined == ".":
        file = file / "index.html"
    if not file.is_file():
        return f"{page}: link {href!r:.80} leads to no file of the site"
    return ""


def page_problems(table: CompatTable, staging: Path) -> list[str]:
    """index.html shows every cell of the table with its status, and every link of every page resolves."""
    problems = []
    page = _PageParser()
    page.feed((staging / "index.html").read_text(encoding="utf-8"))
    for cell in table.cells:
        expected = {Status.PASSED: "passed", Status.NOT_BUILT: "not-built"}.get(cell.status, "failed")
        shown = page.cells.get(cell.id)
        if shown != expected:
            problems.append(f"index.html: cell {cell.id} is shown as {shown or 'absent'}, its result is {cell.status}")
    for extra in sorted(set(page.cells) - {c.id for c in table.cells}):
        problems.append(f"index.html: shows a cell {extra} the table does not have")
    problems += [p for href in page.links if (p := link_problem(staging, "index.html", href))]
    for listing in sorted(staging.rglob("index.html")):
        rel = listing.relative_to(staging).as_posix()
        if rel == "index.html":
            continue
        parser = _PageParser()
        parser.feed(listing.read_text(encoding="utf-8"))
        problems += [p for href in parser.links if (p := link_problem(staging, rel, href))]
    recorded = staging / "compatibility.json"
    if not recorded.is_file() or CompatTable.from_json(recorded.read_text(encoding="utf-8")) != table:
        problems.append("compatibility.json is not the table the pages were rendered from")
    return problems


def site_url_problem(url: str) -> str:
    """--site-url goes into every install command and link: an http(s) URL without credentials ('' when it is)."""
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--site-url {url!r:.80} is not an http:// or https:// URL"
    if parts.username or parts.password:
        return f"--site-url {parts.scheme}://***@{parts.hostname}...: holds credentials, which would be published"
    if parts.query or parts.fragment or any(c in url for c in " \t\n\"'<>`\\"):
        return f"--site-url {url!r:.80}: no query, fragment, quotes, spaces or angle brackets"
    return ""


def site_problems(table: CompatTable, staging: Path, matrix: Matrix | None) -> list[str]:
    """Every check of a staged site; empty when it may go live."""
    url = site_url_problem(table.site_url)
    problems = [url] if url else []
    problems += (
        [f"{p} (the table no longer describes matrix.yaml)" for p in stale_problems(table, matrix)] if matrix else []
    )
    return problems + page_problems(table, staging) + check_coverage(table, staging)
