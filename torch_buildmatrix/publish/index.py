"""The wheel index of the site: a PEP 503 simple index and per-torch-release find-links pages, with PEP 658 metadata.

Layout under the site root (it mirrors wheels/, so a result's wheel path is also its site path):
  simple/index.html, simple/<project>/index.html   every release; links carry #sha256= and data-core-metadata
  torch<minor>/simple/index.html, .../<project>/   one index root per torch release: only that release's plugin
                                                   wheels and the SDK wheels they were tested with, so an
                                                   installer given it can only pick a wheel for that torch
  torch<minor>/index.html                          find-links page with the same wheels
  torch<minor>/<wheel>, <sdk name>/<wheel>          each with <wheel>.metadata beside it (a wheel SDK's wheels)
The index serves every wheel of the release ledger (released.json) that was not removed: the wheels of passed
cells, and every wheel published before, whether or not its cell passed this time (yanked ones marked, PEP 592).
Never an sdist, never a wheel the ledger does not hold, and no page lists no wheel.
"""

from __future__ import annotations

import hashlib
import html
import io
import posixpath
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name

from torch_buildmatrix.builder.records.model import WheelRecord
from torch_buildmatrix.publish.pagescan import anchors
from torch_buildmatrix.publish.sitefiles import SiteFiles
from torch_buildmatrix.publish.table import CompatCell, CompatTable
from torch_buildmatrix.util.wheelname import parse_wheel

if TYPE_CHECKING:
    from torch_buildmatrix.publish.ledger import Released


@dataclass(frozen=True)
class IndexedWheel:
    project: str  # canonical name: the plugin's, or a wheel SDK's
    filename: str
    path: str  # relative to the site root
    sha256: str
    metadata_sha256: str
    requires_python: str | None = None
    indexes: tuple[str, ...] = ()  # torch minors whose own index (torch<minor>/) lists it
    yanked: str | None = None  # PEP 592 reason ("" for none given); None: not yanked


@dataclass(frozen=True)
class IndexPage:
    path: str  # relative to the site root, e.g. simple/my-ops/index.html
    html: str
    wheels: tuple[str, ...]  # filenames it lists


@lru_cache(maxsize=1 << 16)
def project_of(filename: str) -> str:
    return str(canonicalize_name(parse_wheel(filename)[0]))


def wheels_to_index(table: CompatTable) -> list[WheelRecord]:
    """Plugin wheels of passed cells and the SDK wheels they were tested with, each once."""
    out: dict[str, WheelRecord] = {}
    for cell in table.cells:
        if cell.installable:
            for wheel in cell_wheels(cell):
                out.setdefault(wheel.path, wheel)
    return sorted(out.values(), key=lambda w: w.path)


def read_metadata(wheel: Path) -> bytes:
    """The METADATA file of a wheel (PEP 658 serves it beside the wheel)."""
    return wheel_metadata(wheel.read_bytes(), wheel.name)


def wheel_metadata(data: bytes, filename: str) -> bytes:
    """The METADATA file of the wheel whose bytes are `data`; raises ValueError or zipfile.BadZipFile naming it."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise ValueError(f"{filename}: expected one .dist-info/METADATA, found {names}")
        return archive.read(names[0])


def requires_python(metadata: bytes) -> str | None:
    for line in metadata.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break  # headers end at the first blank line
        if line.lower().startswith("requires-python:"):
            return line.split(":", 1)[1].strip()
    return None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _relative(target: str, page: str) -> str:
    """href from the page at `page` to the file at `target` (both relative to the site root)."""
    depth = len(PurePosixPath(page).parent.parts)
    return "../" * depth + target


def _anchor(wheel: IndexedWheel, page: str) -> str:
    attrs = [f'href="{html.escape(_relative(wheel.path, page))}#sha256={wheel.sha256}"']
    if wheel.requires_python:
        attrs.append(f'data-requires-python="{html.escape(wheel.requires_python)}"')
    # PEP 658 named the attribute data-dist-info-metadata; PEP 714 renamed it data-core-metadata. Older pips read the
    # first.
    attrs.append(f'data-dist-info-metadata="sha256={wheel.metadata_sha256}"')
    attrs.append(f'data-core-metadata="sha256={wheel.metadata_sha256}"')
    if wheel.yanked is not None:
        attrs.append(f'data-yanked="{html.escape(wheel.yanked)}"')
    return f"    <a {' '.join(attrs)}>{html.escape(wheel.filename)}</a><br>"


def _page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.0">\n'
        f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
        + "\n".join(body)
        + "\n  </body>\n</html>\n"
    )


def simple_pages(root: str, title: str, wheels: list[IndexedWheel]) -> list[IndexPage]:
    """A PEP 503 index rooted at `root` (e.g. "simple/" or "torch2.4/simple/"); nothing when there is no wheel."""
    projects = sorted({w.project for w in wheels})
    if not projects:
        return []
    links = [f'    <a href="{html.escape(p)}/">{html.escape(p)}</a><br>' for p in projects]
    pages = [IndexPage(f"{root}index.html", _page(title, links), tuple(w.filename for w in wheels))]
    for project in projects:
        path = f"{root}{project}/index.html"
        listed = [w for w in wheels if w.project == project]
        pages.append(
            IndexPage(
                path,
                _page(f"Links for {project}", [_anchor(w, path) for w in listed]),
                tuple(w.filename for w in listed),
            )
        )
    return pages


def cell_wheels(cell: CompatCell) -> list[WheelRecord]:
    """The wheels a cell installs: its plugin wheel, and a wheel SDK's wheel."""
    return [w for w in (cell.wheel, cell.sdk_wheel) if w is not None]


def index_pages(table: CompatTable, wheels: list[IndexedWheel]) -> list[IndexPage]:
    """Every page of the index; a project or torch release without a wheel gets no page. A release's own pages list
    the wheels recorded for it (its plugin wheels and the SDK wheels they were tested with), including releases
    matrix.yaml no longer lists: what was published stays served."""
    pages = simple_pages("simple/", "Simple index", wheels)
    minors = dict.fromkeys([*(r.minor for r in table.releases), *sorted({m for w in wheels for m in w.indexes})])
    for minor in minors:
        listed = sorted((w for w in wheels if minor in w.indexes), key=lambda w: w.path)
        if not listed:
            continue
        path = f"torch{minor}/index.html"
        title = f"{table.plugin} for torch {minor} (find-links)"
        pages.append(
            IndexPage(path, _page(title, [_anchor(w, path) for w in listed]), tuple(w.filename for w in listed))
        )
        pages += simple_pages(f"torch{minor}/simple/", f"{table.plugin} for torch {minor} (simple index)", listed)
    return pages


def page_anchors(text: str) -> list[dict[str, str]]:
    return anchors(text)


def _joined(page: str, target: str) -> str:
    """The site path `target` names from the page at `page` (both relative to the site root), normalised."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(page), target))


def _folder_index(joined: str) -> str:
    return "index.html" if joined == "." else f"{joined}/index.html"


def link_problem(site: Path, page: str, href: str, files: SiteFiles | None = None) -> str:
    """A link of a page must be relative, stay inside the site and resolve to a file of it (or a folder's
    index.html): never a scheme such as javascript:, never ../ out of the site. `files`: the site's files, listed
    once by the caller (else each link is looked up on disk)."""
    return _resolve_link(site, page, href, files)[0]


def _resolve_link(site: Path, page: str, href: str, files: SiteFiles | None) -> tuple[str, str]:
    """link_problem's answer, and the site path the link's path names ('' when it names none)."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith("/") or "\\" in href:
        return f"{page}: link {href!r:.80} is not a relative link inside the site", ""
    target = unquote(parts.path)
    if not target:
        return "", ""
    joined = _joined(page, target)
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        return f"{page}: link {href!r:.80} leads outside the site", ""
    file = _folder_index(joined) if target.endswith("/") or joined == "." else joined
    if not (files.has(file) if files is not None else (site / file).is_file()):
        return f"{page}: link {href!r:.80} leads to no file of the site", joined
    return "", joined


def _check_page(files: SiteFiles, rel: str, expected: dict[str, tuple[str, str | None]]) -> tuple[list[str], set[str]]:
    """Problems of the index page at `rel` and the wheel filenames it lists; `expected` is filename -> (sha256,
    yank)."""
    problems: list[str] = []
    listed: set[str] = set()
    for anchor in page_anchors((files.root / rel).read_text()):
        href, _, fragment = anchor.get("href", "").partition("#")
        link, joined = _resolve_link(files.root, rel, anchor.get("href", ""), files)
        if link:
            problems.append(link)
            continue
        if rel.endswith("simple/index.html"):
            if not files.has(_joined(rel, f"{href}/index.html")):
                problems.append(f"{rel}: project link {href} has no page")
            continue
        # our pages link within the site: the path the link's path names (its fragment, the hash, apart)
        target = joined or _joined(rel, unquote(href))
        name = PurePosixPath(href).name
        if not name.endswith(".whl"):
            problems.append(f"{rel}: {name} is not a wheel (the index serves wheels only)")
            continue
        listed.add(name)
        if not files.has(target):
            problems.append(f"{rel}: {href} does not exist")
            continue
        digest = files.sha256(target)
        if fragment != f"sha256={digest}":
            problems.append(f"{rel}: {name} has fragment #{fragment}, the file's sha256 is {digest}")
        if name in expected and expected[name][0] != digest:
            problems.append(f"{rel}: {name} differs from the released wheel (sha256 {expected[name][0]})")
        if name in expected and anchor.get("data-yanked") != expected[name][1]:
            problems.append(
                f"{rel}: {name}: data-yanked={anchor.get('data-yanked')!r}, the ledger says {expected[name][1]!r}"
            )
        meta = files.sha256(posixpath.join(posixpath.dirname(target), name + ".metadata"))
        for attr in ("data-dist-info-metadata", "data-core-metadata"):
            if anchor.get(attr) != f"sha256={meta}" or not meta:
                problems.append(f"{rel}: {name}: {attr}={anchor.get(attr)!r} does not match {name}.metadata")
    if not listed and not rel.endswith("simple/index.html"):
        problems.append(f"{rel}: lists no wheel")
    return problems, listed


def released_wheel(w: Released) -> IndexedWheel:
    """A ledger entry as the index serves it."""
    return IndexedWheel(
        project_of(w.filename),
        w.filename,
        w.path,
        w.sha256,
        w.metadata_sha256,
        w.requires_python,
        w.indexes,
        w.yanked,
    )


def served_wheels(table: CompatTable, site: Path) -> list[IndexedWheel]:
    """What the site's ledger serves (every entry not removed); without a ledger, the installable cells' wheels."""
    from torch_buildmatrix.publish.ledger import RELEASED, parse_ledger

    ledger_file = site / RELEASED
    if ledger_file.is_file():
        ledger = parse_ledger(ledger_file.read_text(encoding="utf-8"), str(ledger_file))
        return [released_wheel(w) for w in ledger.served()]
    out: dict[str, IndexedWheel] = {}
    for cell in table.cells:
        if cell.installable:
            minor = table.release(cell.release).minor
            for wheel in cell_wheels(cell):
                old = out.get(wheel.path)
                indexes = tuple(sorted({*(old.indexes if old else ()), minor}))
                out[wheel.path] = IndexedWheel(
                    project_of(wheel.filename), wheel.filename, wheel.path, wheel.sha256, "", None, indexes
                )
    return sorted(out.values(), key=lambda w: w.path)


def check_coverage(
    table: CompatTable, site: Path, served: list[IndexedWheel] | None = None, files: SiteFiles | None = None
) -> list[str]:
    """Ways the index on disk, the ledger and the results disagree; empty when every wheel the ledger serves
    (`served`, else read from the site's ledger) is listed where it belongs with its bytes, every passed cell shown
    with its wheels is installable from it, and nothing else is listed or served. `files`: the site's files, when the
    caller listed them after its last write."""
    served = served if served is not None else served_wheels(table, site)
    files = files if files is not None else SiteFiles.of(site)
    expected = {w.filename: (w.sha256, w.yanked) for w in served}
    problems, listed_by_page = _pages_problems(files, served, expected)
    problems += _coverage_problems(table, served, listed_by_page)
    indexed: set[str] = set().union(*listed_by_page.values())
    for stray in sorted(indexed - set(expected)):
        problems.append(f"{stray} is in the index but the site's ledger does not serve it")
    unserved: list[tuple[str, str]] = []  # (path, why)
    for rel in files.paths:
        name = rel.rsplit("/", 1)[-1]
        if name.endswith((".tar.gz", ".zip", ".tar.bz2")):
            unserved.append((rel, "source distributions are never published"))
        elif PurePosixPath(name).suffix == ".whl" and name not in expected:
            unserved.append((rel, "a wheel the site's ledger does not serve"))
    return problems + [f"{rel}: {why}" for rel, why in sorted(unserved, key=lambda item: PurePosixPath(item[0]))]


def _is_index_page(rel: str) -> bool:
    """simple/**/index.html, torch*/index.html and torch*/simple/**/index.html."""
    parts = rel.split("/")
    if parts[-1] != "index.html" or len(parts) < 2:
        return False
    if parts[0] == "simple":
        return True
    return parts[0].startswith("torch") and (len(parts) == 2 or (parts[1] == "simple" and len(parts) > 2))


def _pages_problems(
    files: SiteFiles, served: list[IndexedWheel], expected: dict[str, tuple[str, str | None]]
) -> tuple[list[str], dict[str, set[str]]]:
    """Each index page checked, and what each lists; a release's own pages hold only that release's wheels."""
    problems: list[str] = []
    listed_by_page: dict[str, set[str]] = {}
    own_by_minor: dict[str, set[str]] = {}
    for wheel in served:
        for minor in wheel.indexes:
            own_by_minor.setdefault(minor, set()).add(wheel.filename)
    for rel in sorted(filter(_is_index_page, files.paths), key=PurePosixPath):
        page_problems, listed = _check_page(files, rel, expected)
        problems += page_problems
        listed_by_page[rel] = listed
        release_dir = rel.split("/", 1)[0]
        if release_dir.startswith("torch"):
            minor = release_dir.removeprefix("torch")
            own = own_by_minor.get(minor, set())
            problems += [
                f"{rel}: lists {stray}, which was never released for torch {minor}" for stray in sorted(listed - own)
            ]
    return problems, listed_by_page


def _coverage_problems(
    table: CompatTable, served: list[IndexedWheel], listed_by_page: dict[str, set[str]]
) -> list[str]:
    """Every served wheel on the pages its ledger entry names; every installable cell's wheels on its release's."""
    wanted: list[tuple[str, str, str]] = []  # (page, filename, whose)
    for wheel in served:
        project = project_of(wheel.filename)
        wanted.append((f"simple/{project}/index.html", wheel.filename, "the site released it"))
        for m in wheel.indexes:
            wanted += [
                (f"torch{m}/index.html", wheel.filename, "the site released it"),
                (f"torch{m}/simple/{project}/index.html", wheel.filename, "the site released it"),
            ]
    for cell in table.cells:
        if not cell.installable:
            continue
        minor = table.release(cell.release).minor
        for record in cell_wheels(cell):
            project = project_of(record.filename)
            for page in (
                f"simple/{project}/index.html",
                f"torch{minor}/index.html",
                f"torch{minor}/simple/{project}/index.html",
            ):
                wanted.append((page, record.filename, f"{cell.id} passed"))
    return [
        f"{whose} but {page} does not list {filename}"
        if whose != "the site released it"
        else f"{page} does not list {filename}, which the site released"
        for page, filename, whose in wanted
        if filename not in listed_by_page.get(page, set())
    ]
