"""Checks a staged site before it goes live: wheels against their records and the released bytes, metadata
against the wheels, the page against the table and the matrix, and every link against the staged files."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.publish.index import IndexedWheel, check_coverage, link_problem
from torch_buildmatrix.publish.ledger import RELEASED as _RELEASED
from torch_buildmatrix.publish.pagescan import start_tags
from torch_buildmatrix.publish.sitefiles import SiteFiles
from torch_buildmatrix.publish.staleness import stale_problems
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.util.wheelname import parse_wheel
from torch_buildmatrix.vocab import Status

RELEASED = _RELEASED  # the release ledger's file name (publish/ledger.py)


def metadata_problems(path: str, own: bytes) -> list[str]:
    """The wheel's METADATA (`own`: read from the wheel, or the released .metadata with the ledger's hash) names the
    filename's Name and Version. The staged .metadata file is checked against `own` by its hash, with every link of
    the index (check_coverage: each anchor's data-core-metadata is the hash of `own`)."""
    name, version, _build, _tags = parse_wheel(path.rsplit("/", 1)[-1])
    problems: list[str] = []
    headers: dict[str, str] = {}
    try:
        text = own.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [*problems, f"{path}: its METADATA is not UTF-8 ({exc})"]
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), value.strip())
    if canonicalize_name(headers.get("name", "")) != name:
        problems.append(f"{path}: METADATA Name {headers.get('name')!r} is not the filename's {name}")
    if headers.get("version") != str(version):
        problems.append(f"{path}: METADATA Version {headers.get('version')!r} is not the filename's {version}")
    return problems


class _PageParser:
    """The cells (td id -> class) and the links of one of our pages."""

    def __init__(self, text: str) -> None:
        self.cells: dict[str, str] = {}
        self.links: list[str] = []
        for tag, found in start_tags(text, frozenset({"a", "td"})):
            if tag == "td" and "id" in found:
                self.cells[found["id"]] = found.get("class", "")
            if tag == "a" and "href" in found:
                self.links.append(found["href"])


def page_problems(table: CompatTable, staging: Path, files: SiteFiles | None = None) -> list[str]:
    """index.html shows every cell of the table with its status, and every link of every page resolves (`files`: the
    staged files, listed after the last write)."""
    files = files if files is not None else SiteFiles.of(staging)
    problems = []
    page = _PageParser((staging / "index.html").read_text(encoding="utf-8"))
    for cell in table.cells:
        expected = {Status.PASSED: "passed", Status.NOT_BUILT: "not-built"}.get(cell.status, "failed")
        shown = page.cells.get(cell.id)
        if shown != expected:
            problems.append(f"index.html: cell {cell.id} is shown as {shown or 'absent'}, its result is {cell.status}")
    for extra in sorted(set(page.cells) - {c.id for c in table.cells}):
        problems.append(f"index.html: shows a cell {extra} the table does not have")
    problems += [p for href in page.links if (p := link_problem(staging, "index.html", href, files))]
    # The index pages' links (every other index.html) are checked by check_coverage, target and hash alike.
    recorded = staging / "compatibility.json"
    if not recorded.is_file() or recorded.read_text(encoding="utf-8") != table.compact_json():
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


def site_problems(
    table: CompatTable, staging: Path, matrix: Matrix | None, served: list[IndexedWheel] | None = None
) -> list[str]:
    """Every check of a staged site (`served`: what its ledger serves, when the caller has it); empty when it may go
    live."""
    url = site_url_problem(table.site_url)
    problems = [url] if url else []
    problems += (
        [f"{p} (the table no longer describes matrix.yaml)" for p in stale_problems(table, matrix)] if matrix else []
    )
    files = SiteFiles.of(staging)  # nothing writes the staged version from here on
    return problems + page_problems(table, staging, files) + check_coverage(table, staging, served, files)
