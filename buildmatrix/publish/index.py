"""The wheel index of the site: a PEP 503 simple index and per-torch-release find-links pages, with PEP 658 metadata.

Layout under the site root (it mirrors wheels/, so a result's wheel path is also its site path):
  simple/index.html, simple/<project>/index.html   every release; links carry #sha256= and data-core-metadata
  torch<minor>/simple/index.html, .../<project>/   one index root per torch release: only that release's plugin
                                                   wheels and the SDK wheels they were tested with, so an
                                                   installer given it can only pick a wheel for that torch
  torch<minor>/index.html                          find-links page with the same wheels
  torch<minor>/<wheel>, <sdk name>/<wheel>          each with <wheel>.metadata beside it (a wheel SDK's wheels)
Only wheels of passed cells are indexed (never an sdist, never a stale wheel), and no page lists no wheel.
"""

from __future__ import annotations

import hashlib
import html
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath

from packaging.utils import canonicalize_name, parse_wheel_filename

from buildmatrix.builder.results import WheelRecord
from buildmatrix.publish.table import CompatCell, CompatTable


@dataclass(frozen=True)
class IndexedWheel:
    project: str  # canonical name: the plugin's, or a wheel SDK's
    filename: str
    path: str  # relative to the site root
    sha256: str
    metadata_sha256: str
    requires_python: str | None = None


@dataclass(frozen=True)
class IndexPage:
    path: str  # relative to the site root, e.g. simple/my-ops/index.html
    html: str
    wheels: tuple[str, ...]  # filenames it lists


def project_of(filename: str) -> str:
    return str(canonicalize_name(parse_wheel_filename(filename)[0]))


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
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise ValueError(f"{wheel.name}: expected one .dist-info/METADATA, found {names}")
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


def release_wheels(table: CompatTable, minor: str) -> set[str]:
    """Paths of the plugin wheels of a torch release's passed cells and of the SDK wheels they were tested with."""
    cells = [c for c in table.cells if table.release(c.release).minor == minor and c.installable]
    return {w.path for c in cells for w in cell_wheels(c)}


def cell_wheels(cell: CompatCell) -> list[WheelRecord]:
    """The wheels a cell installs: its plugin wheel, and a wheel SDK's wheel."""
    return [w for w in (cell.wheel, cell.sdk_wheel) if w is not None]


def index_pages(table: CompatTable, wheels: list[IndexedWheel]) -> list[IndexPage]:
    """Every page of the index; a project or torch release without a wheel gets no page."""
    by_path = {w.path: w for w in wheels}
    pages = simple_pages("simple/", "Simple index", wheels)
    for minor in dict.fromkeys(r.minor for r in table.releases):
        paths = sorted(release_wheels(table, minor) & set(by_path))
        if not paths:
            continue
        path = f"torch{minor}/index.html"
        listed = [by_path[p] for p in paths]
        title = f"{table.plugin} for torch {minor} (find-links)"
        pages.append(
            IndexPage(path, _page(title, [_anchor(w, path) for w in listed]), tuple(w.filename for w in listed))
        )
        pages += simple_pages(f"torch{minor}/simple/", f"{table.plugin} for torch {minor} (simple index)", listed)
    return pages


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append({k: v or "" for k, v in attrs})


def page_anchors(text: str) -> list[dict[str, str]]:
    parser = _Anchors()
    parser.feed(text)
    return parser.anchors


def _file_sha(path: Path) -> str:
    return sha256_hex(path.read_bytes()) if path.is_file() else ""


def _check_page(site: Path, page: Path, table: CompatTable, expected: dict[str, str]) -> tuple[list[str], set[str]]:
    """Problems of one index page and the wheel filenames it lists."""
    problems: list[str] = []
    listed: set[str] = set()
    rel = page.relative_to(site).as_posix()
    for anchor in page_anchors(page.read_text()):
        href, _, fragment = anchor.get("href", "").partition("#")
        if rel.endswith("simple/index.html"):
            if not (page.parent / href / "index.html").is_file():
                problems.append(f"{rel}: project link {href} has no page")
            continue
        target = (page.parent / href).resolve()
        name = PurePosixPath(href).name
        if not name.endswith(".whl"):
            problems.append(f"{rel}: {name} is not a wheel (the index serves wheels only)")
            continue
        listed.add(name)
        if not target.is_file():
            problems.append(f"{rel}: {href} does not exist")
            continue
        digest = _file_sha(target)
        if fragment != f"sha256={digest}":
            problems.append(f"{rel}: {name} has fragment #{fragment}, the file's sha256 is {digest}")
        if name in expected and expected[name] != digest:
            problems.append(f"{rel}: {name} differs from the wheel its cell result recorded (sha256 {expected[name]})")
        meta = _file_sha(target.with_name(name + ".metadata"))
        for attr in ("data-dist-info-metadata", "data-core-metadata"):
            if anchor.get(attr) != f"sha256={meta}" or not meta:
                problems.append(f"{rel}: {name}: {attr}={anchor.get(attr)!r} does not match {name}.metadata")
    if not listed and not rel.endswith("simple/index.html"):
        problems.append(f"{rel}: lists no wheel")
    return problems, listed


def check_coverage(table: CompatTable, site: Path) -> list[str]:
    """Ways the index on disk and the results disagree; empty when every passed cell is installable from it and
    nothing else is."""
    problems: list[str] = []
    expected = {w.filename: w.sha256 for w in wheels_to_index(table)}
    pages = sorted(
        {*site.glob("simple/**/index.html"), *site.glob("torch*/index.html"), *site.glob("torch*/simple/**/index.html")}
    )
    listed_by_page: dict[str, set[str]] = {}
    for page in pages:
        page_problems, listed = _check_page(site, page, table, expected)
        problems += page_problems
        rel = page.relative_to(site).as_posix()
        listed_by_page[rel] = listed
        release_dir = rel.split("/", 1)[0]
        if release_dir.startswith("torch"):  # a release's own pages hold only that release's wheels
            own = {PurePosixPath(p).name for p in release_wheels(table, release_dir.removeprefix("torch"))}
            for stray in sorted(listed - own):
                problems.append(
                    f"{rel}: lists {stray}, which no passed cell of torch {release_dir[5:]} was tested with"
                )
    for cell in table.cells:
        if not cell.installable:
            continue
        minor = table.release(cell.release).minor
        for wheel in cell_wheels(cell):
            project = project_of(wheel.filename)
            for page_path in (
                f"simple/{project}/index.html",
                f"torch{minor}/index.html",
                f"torch{minor}/simple/{project}/index.html",
            ):
                if wheel.filename not in listed_by_page.get(page_path, set()):
                    problems.append(f"{cell.id} passed but {page_path} does not list {wheel.filename}")
    indexed: set[str] = set().union(*listed_by_page.values())
    for stray in sorted(indexed - set(expected)):
        problems.append(f"{stray} is in the index but no passed cell produced it")
    for path in sorted(site.rglob("*")):
        if path.is_file() and path.name.endswith((".tar.gz", ".zip", ".tar.bz2")):
            problems.append(f"{path.relative_to(site)}: source distributions are never published")
        elif path.is_file() and path.suffix == ".whl" and path.name not in expected:
            problems.append(f"{path.relative_to(site)}: a wheel no passed cell produced")
    return problems
