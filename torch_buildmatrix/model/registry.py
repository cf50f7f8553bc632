"""Which Pythons a torch release supports, read from the wheels actually published (PEP 691/503 index, find-links)."""

from __future__ import annotations

import configparser
import fnmatch
import hashlib
import json
import logging
import os
import platform
import time
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from torch_buildmatrix.errors import MatrixError, Problem, RegistryError, RegistryUnreachable
from torch_buildmatrix.model.matrix import PIP_CONFIG, Matrix, TorchRelease, WheelSource
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util import http
from torch_buildmatrix.util.atomic import write_text_atomic
from torch_buildmatrix.vocab import WheelSourceKind

log = logging.getLogger(__name__)

DEFAULT_INDEX = "https://pypi.org/simple/"
PEP691 = "application/vnd.pypi.simple.v1+json"
JSON_PAGES = frozenset({PEP691, "application/vnd.pypi.simple.latest+json"})  # PEP 691
HTML_PAGES = frozenset({"text/html", "application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.latest+html"})
CACHE_SECONDS = 24 * 3600
PAGE_MAX_BYTES = 64 << 20  # PyPI's torch page is about 0.4 MB, PyTorch's own HTML index a few MB


@dataclass(frozen=True)
class PublishedWheel:
    filename: str
    version: Version
    python: Python  # interpreter the wheel is for, e.g. 3.11, or 3.13t (its cp313t wheel: free-threaded)
    url: str
    yanked: str | None = None  # PEP 592: None when not yanked, else the reason ("" when none was given)


@dataclass(frozen=True)
class IndexFile:
    """One file an index lists for a project, with its PEP 592 yank status."""

    filename: str
    url: str
    yanked: str | None = None


def pythons_from_filenames(filenames: list[tuple[str, str]], version: Version, machine: str) -> list[PublishedWheel]:
    """CPython Linux wheels of exactly `version` for this machine's architecture (a free-threaded one for 3.13t)."""
    return [w for w in linux_wheels([IndexFile(f, u) for f, u in filenames], machine) if w.version == version]


def linux_wheels(files: list[IndexFile], machine: str) -> list[PublishedWheel]:
    """CPython Linux wheels of every version for this machine's architecture: cpXY-cpXY ones for Python X.Y, and
    cpXY-cpXYt ones (free-threaded) for X.Yt, read apart (a release may publish one without the other)."""
    out = []
    for file in files:
        filename = file.filename
        if not filename.endswith(".whl"):
            continue
        try:
            _name, wheel_version, _build, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        for tag in tags:
            digits = tag.interpreter[2:]
            if (
                tag.interpreter.startswith("cp")
                and digits.isdigit()
                and len(digits) >= 2
                and tag.abi in (tag.interpreter, f"{tag.interpreter}t")
                and "linux" in tag.platform
                and tag.platform.endswith(machine)
            ):
                python = Python(Version(f"{digits[0]}.{digits[1:]}"), free_threaded=tag.abi.endswith("t"))
                out.append(PublishedWheel(filename, wheel_version, python, file.url, file.yanked))
                break
    return out


def pip_configured_find_links() -> list[str]:
    """The find-links pip uses on this machine: PIP_FIND_LINKS, else pip's config files (later files win)."""
    env = os.environ.get("PIP_FIND_LINKS")
    if env:
        return env.split()
    files = [
        Path("/etc/pip.conf"),
        Path("/etc/xdg/pip/pip.conf"),
        Path.home() / ".config/pip/pip.conf",
        Path.home() / ".pip/pip.conf",
    ]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    found: list[str] = []
    for file in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(file)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                found = parser.get(section, "find-links").split()
    return found


@dataclass(frozen=True)
class TorchSource:
    """Where this machine installs a release's torch from, beyond the registry: find-links and extra indexes."""

    find_links: tuple[str, ...] = ()
    index_urls: tuple[str, ...] = ()

    def describe(self) -> str:
        """Where torch was installed from, as a record says it: an index source mirrored locally reads as the
        find-links it was really installed from, not as the index matrix.yaml names."""
        if self.find_links:
            return "find-links " + " ".join(self.find_links)
        if self.index_urls:
            return "index " + " ".join(self.index_urls)
        return "registry"


class _AnchorParser(HTMLParser):
    """Collects (text, href) of every link on a PEP 503 project page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, str | None]] = []
        self._href: str | None = None
        self._yanked: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            attributes = dict(attrs)
            self._href = attributes.get("href") or ""
            # PEP 592: data-yanked, its value the reason (empty when none was given).
            self._yanked = (attributes["data-yanked"] or "") if "data-yanked" in attributes else None

    def handle_data(self, data: str) -> None:
        if self._href is not None and data.strip():
            self.links.append((data.strip(), self._href, self._yanked))
            self._href = None


def yank_reason(value: object) -> str | None:
    """PEP 691's "yanked" (false, true or a reason) as None when not yanked, else the reason ("" for none given)."""
    if value is None or value is False:
        return None
    return "" if value is True else str(value)


def simple_page_files(body: str, page_url: str) -> list[tuple[str, str]]:
    """(filename, absolute url) of a project page, PEP 691 JSON or PEP 503 HTML (PyTorch's indexes serve HTML)."""
    return [(f.filename, f.url) for f in simple_page_entries(body, page_url)]


def simple_page_entries(body: str, page_url: str) -> list[IndexFile]:
    """The files of a project page, PEP 691 JSON or PEP 503 HTML, with their yank status; raises ValueError for an
    answer that is not one (the caller makes it a RegistryError naming the page)."""
    if body.lstrip().startswith("{"):
        data = json.loads(body)
        files = data.get("files", []) if isinstance(data, dict) else None
        if not isinstance(files, list):
            raise ValueError("a PEP 691 answer without a list of files")
        out = []
        for index, entry in enumerate(files):
            if not (
                isinstance(entry, dict) and isinstance(entry.get("filename"), str) and isinstance(entry.get("url"), str)
            ):
                raise ValueError(f"files[{index}] of the PEP 691 answer is not a file with a filename and a url")
            url = urllib.parse.urljoin(page_url, entry["url"])
            out.append(IndexFile(entry["filename"], url, yank_reason(entry.get("yanked"))))
        return out
    parser = _AnchorParser()
    parser.feed(body)
    return [IndexFile(name, urllib.parse.urljoin(page_url, href), yanked) for name, href, yanked in parser.links]


def project_page_files(answer: http.Answer, page_url: str) -> list[IndexFile]:
    """The files of an index's answer for a project page; raises ValueError when the answer is not a PEP 691 or
    PEP 503 project page (another media type, JSON without PEP 691's meta.api-version 1.x, undecodable text)."""
    try:
        text = answer.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the answer is not UTF-8 text ({exc})") from None
    if answer.content_type in JSON_PAGES:
        data = json.loads(text)
        meta = data.get("meta") if isinstance(data, dict) else None
        version = meta.get("api-version") if isinstance(meta, dict) else None
        if not (isinstance(version, str) and version.split(".")[0] == "1"):
            raise ValueError(f"a {answer.content_type} answer without PEP 691's meta.api-version 1.x")
        return simple_page_entries(text, page_url)
    if answer.content_type in HTML_PAGES:
        if text.lstrip().startswith("{"):
            raise ValueError(f"JSON served as {answer.content_type}")
        return simple_page_entries(text, page_url)
    shown = answer.content_type or "no Content-Type"
    raise ValueError(f"answered {shown}, not a PEP 691 (JSON) or PEP 503 (HTML) project page")


def cache_name(project: str, page_url: str) -> str:
    """The cache file of one index page: named after the URL read, so two indexes never share an answer."""
    return f"{project}-{hashlib.sha256(page_url.encode()).hexdigest()[:16]}.json"


class Registry:
    """Answers 'which wheels of torch X exist?', caching index answers on disk."""

    def __init__(
        self,
        cache_dir: Path,
        index_url: str = DEFAULT_INDEX,
        offline: bool = False,
        refresh: bool = False,
        *,
        deadline: float = http.DEFAULT_DEADLINE,
        total: float = http.NETWORK_DEADLINE,
    ) -> None:
        self.deadline = deadline  # seconds for one index page in all: a trickling server cannot hold a command
        self.budget = http.Budget(total)  # seconds for every page this Registry (one command) reads, in all
        self.refresh = refresh  # --force: ask the index again even when the cached answer is fresh
        self.cache_dir = cache_dir
        self.index_url = index_url.rstrip("/") + "/"
        self.offline = offline
        self.machine = platform.machine()
        self._read: dict[str, list[IndexFile]] = {}  # index page -> its files, read once per Registry (one command)
        self._listed: dict[Path, list[Path]] = {}  # find-links directory -> its torch wheels, read once too

    def torch_wheels_in(self, directory: Path) -> list[Path]:
        """The torch-*.whl files of a find-links directory, sorted; each directory is listed once per Registry."""
        if directory not in self._listed:
            self._listed[directory] = sorted(directory.glob("torch-*.whl")) if directory.is_dir() else []
        return self._listed[directory]

    def find_links_locations(self, source: WheelSource) -> list[str]:
        if source.kind == WheelSourceKind.INDEX:
            return self._local_mirror(source)
        if source.location == PIP_CONFIG:
            locations = pip_configured_find_links()
            if not locations:
                raise RegistryError(
                    "wheels: pip-find-links, but pip has no find-links configured (PIP_FIND_LINKS or pip.conf)"
                )
            return locations
        return [source.location]

    def _local_mirror(self, source: WheelSource) -> list[str]:
        """An index source's local find-links, as directories; [] when it names none."""
        if not source.local_find_links:
            return []
        if source.local_find_links == PIP_CONFIG:
            return pip_configured_find_links()
        return [source.local_find_links]

    def _mirrored_locally(self, release: TorchRelease) -> list[str]:
        """The local find-links of an index source if they hold this release's wheels, else []."""
        pattern = f"torch-{release.requirement_version}-*.whl"
        locations = self._local_mirror(release.wheels)
        held = [
            loc
            for loc in locations
            if any(fnmatch.fnmatch(p.name, pattern) for p in self.torch_wheels_in(Path(loc.removeprefix("file://"))))
        ]
        return locations if held else []

    def source(self, release: TorchRelease) -> TorchSource:
        """Where cells of this release install torch from on this machine."""
        wheels = release.wheels
        if wheels.kind == WheelSourceKind.REGISTRY:
            return TorchSource()
        if wheels.kind == WheelSourceKind.INDEX:
            local = self._mirrored_locally(release)
            return TorchSource(find_links=tuple(local)) if local else TorchSource(index_urls=(wheels.location,))
        return TorchSource(find_links=tuple(self.find_links_locations(wheels)))

    def release_files(self, release: TorchRelease) -> tuple[str, list[tuple[str, str]]]:
        """Where the release's wheels come from on this machine (for messages), and every torch file there."""
        if release.wheels.kind == WheelSourceKind.REGISTRY:
            return self.index_url + "torch/", self._index_files("torch")
        if release.wheels.kind == WheelSourceKind.INDEX and not self._mirrored_locally(release):
            return release.wheels.location + "/torch/", self._index_files("torch", release.wheels.location)
        locations = list(self.source(release).find_links)
        files: list[tuple[str, str]] = []
        for location in locations:
            directory = Path(location.removeprefix("file://"))
            if not directory.is_absolute() or not directory.is_dir():
                raise RegistryError(
                    f"find-links location '{location}' is not an absolute directory (allowed: an absolute path "
                    "or file:// URL of a directory of wheels)"
                )
            files += [(p.name, p.as_uri()) for p in self.torch_wheels_in(directory)]
        return "find-links " + " ".join(locations), files

    def wheels(self, release: TorchRelease) -> list[PublishedWheel]:
        _where, files = self.release_files(release)
        return pythons_from_filenames(files, Version(release.requirement_version), self.machine)

    def pythons(self, release: TorchRelease) -> set[Python]:
        return {w.python for w in self.wheels(release)}

    def published(self, source: WheelSource) -> list[PublishedWheel]:
        """Every torch wheel of every version a source offers for this machine, with yank status where indexes say.

        An index source that cannot be read falls back to its local find-links mirror when it has one.
        """
        if source.kind == WheelSourceKind.REGISTRY:
            return linux_wheels(self.index_entries("torch"), self.machine)
        if source.kind == WheelSourceKind.INDEX:
            try:
                return linux_wheels(self.index_entries("torch", source.location), self.machine)
            except RegistryError as exc:
                if not self._local_mirror(source):
                    raise
                log.warning("%s; reading its local find-links mirror instead", exc)
                locations = self._local_mirror(source)
        else:
            locations = self.find_links_locations(source)
        out: list[PublishedWheel] = []
        for location in locations:
            directory = Path(location.removeprefix("file://"))
            files = [IndexFile(p.name, p.as_uri()) for p in self.torch_wheels_in(directory)]
            out += linux_wheels(files, self.machine)
        return out

    def index_files(self, project: str) -> list[tuple[str, str]]:
        """(filename, url) of every file the index lists for the project (cached for a day)."""
        return self._index_files(project)

    def index_entries(self, project: str, index_url: str = "") -> list[IndexFile]:
        """Every file an index (default: the registry) lists for the project, with its yank status."""
        return self._index_entries(project, index_url)

    def _index_files(self, project: str, index_url: str = "") -> list[tuple[str, str]]:
        return [(f.filename, f.url) for f in self._index_entries(project, index_url)]

    def _index_entries(self, project: str, index_url: str = "") -> list[IndexFile]:
        base = index_url.rstrip("/") + "/" if index_url else self.index_url
        page = f"{base}{project}/"
        if page not in self._read:
            self._read[page] = self._read_index(project, base)
        return self._read[page]

    def cache_path(self, project: str, index_url: str = "") -> Path:
        """Where the answer of an index (default: the registry) for a project is cached."""
        base = index_url.rstrip("/") + "/" if index_url else self.index_url
        return self.cache_dir / cache_name(project, f"{base}{project}/")

    def _read_index(self, project: str, base: str) -> list[IndexFile]:
        page = f"{base}{project}/"
        cache = self.cache_path(project, base)
        cached, damage = _read_cache(cache, page)
        if damage:
            log.warning("%s; fetching it again", damage)
        fresh = cached is not None and time.time() - cache.stat().st_mtime < CACHE_SECONDS and not self.refresh
        if not fresh and not self.offline:
            try:
                answer = self.budget.get(
                    page,
                    deadline=self.deadline,
                    max_bytes=PAGE_MAX_BYTES,
                    headers={"Accept": f"{PEP691}, text/html;q=0.1"},
                )
            except OSError as exc:
                if cached is None:
                    hint = "" if base == self.index_url else "; a machine without it can name a local-find-links mirror"
                    why = damage or f"no cached copy in {cache}"
                    raise RegistryUnreachable(f"cannot read {page} ({exc}) and {why}{hint}") from None
                log.warning("registry unreachable (%s); using cached %s", exc, cache)
                return cached
            except ValueError as exc:  # larger than the cap
                raise RegistryError(f"cannot read {page} ({exc})") from None
            # An answer that is not an index page (a captive portal, a proxy's error page) is an error, and never
            # cached: kept, it would stand for the registry's answer for a day.
            try:
                files = project_page_files(answer, page)
            except (ValueError, RecursionError) as exc:
                raise RegistryError(
                    f"cannot read {page} ({answer.url} answered something that is not a project page: {exc})"
                ) from None
            if not any(f.filename.endswith(".whl") for f in files):
                before = f"; the answer cached before listed {len(cached)} file(s)" if cached else ""
                raise RegistryError(
                    f"cannot read {page}: {answer.url} answered a page that lists no wheel for {project}{before}; "
                    "not an index's project page (a captive portal or a proxy's error page?), so it is not kept"
                )
            records = [
                {"filename": f.filename, "url": f.url} | ({} if f.yanked is None else {"yanked": f.yanked})
                for f in files
            ]
            write_text_atomic(cache, json.dumps({"url": page, "files": records}))
            return files
        if cached is None:
            why = damage or f"no cached copy of the {project} index {base} in {cache}"
            raise RegistryError(f"offline and {why}; run once without --offline")
        return cached


def _read_cache(cache: Path, page: str) -> tuple[list[IndexFile] | None, str]:
    """The cached answer of `page`, verified by parsing it; (None, why) when it is missing, damaged, lists no wheel
    or is another page's (then fetched again)."""
    if not cache.is_file():
        return None, ""
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
        # Caches written before yank status was kept hold PyPI's raw answer ("yanked": false) or no key at all.
        files = [
            IndexFile(str(f["filename"]), str(f["url"]), yank_reason(f.get("yanked"))) for f in data.get("files", [])
        ]
        recorded = data.get("url", page)
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return None, f"the cached registry answer {cache} is damaged ({type(exc).__name__}: {exc})"
    if recorded != page:
        return None, f"the cached registry answer {cache} is the answer of {recorded!r:.200}, not of {page}"
    if not any(f.filename.endswith(".whl") for f in files):
        return None, f"the cached registry answer {cache} is damaged (it lists no wheel)"
    return files, ""


def file_versions(files: list[tuple[str, str]]) -> set[Version]:
    """Every version a list of wheel files offers, whatever its tags."""
    out = set()
    for filename, _url in files:
        try:
            out.add(parse_wheel_filename(filename)[1])
        except InvalidWheelFilename:
            continue
    return out


def published_pythons(matrix: Matrix, registry: Registry) -> dict[TorchRelease, set[Python]]:
    """Per release, the Pythons its wheels support; a release with no wheel there is a located MatrixError, never
    silently left out of the matrix."""
    problems: list[Problem] = []
    unreachable: dict[str, list[str]] = {}  # what could not be read -> the entries (file:line: key) that name it
    out: dict[TorchRelease, set[Python]] = {}
    parsed: dict[str, list[PublishedWheel]] = {}  # where -> its Linux wheels: each source's filenames parsed once
    for index, release in enumerate(matrix.torch):
        key = f"torch[{index}]"
        try:
            where, files = registry.release_files(release)
        except RegistryUnreachable as exc:  # the network's problem: matrix.yaml is not invalid (exit 9, not 3)
            unreachable.setdefault(str(exc), []).append(f"{matrix.path}:{matrix.lines.line(f'{key}.wheels')}: {key}")
            continue
        except RegistryError as exc:
            problems.append(Problem(str(matrix.path), matrix.lines.line(f"{key}.wheels"), f"{key}.wheels", str(exc)))
            continue
        wanted = Version(release.requirement_version)
        if where not in parsed:
            parsed[where] = linux_wheels([IndexFile(f, u) for f, u in files], registry.machine)
        pythons = {w.python for w in parsed[where] if w.version == wanted}
        if pythons:
            out[release] = pythons
            continue
        offered = file_versions(files)
        if not files:
            why = f"{where} lists no torch wheel at all"
        elif wanted not in offered:
            near = sorted(
                (v for v in offered if (v.major, v.minor) == (wanted.major, wanted.minor)), reverse=True
            ) or sorted(offered, reverse=True)
            shown = ", ".join(str(v) for v in near[:6])
            why = f"torch {wanted} ({release.variant}) is not on {where} (it has: {shown})"
        else:
            why = f"torch {wanted} on {where} has no CPython Linux {registry.machine} wheel"
        problems.append(Problem(str(matrix.path), matrix.lines.line(f"{key}.version"), f"{key}.version", why))
    if problems:
        raise MatrixError(problems)
    if unreachable:
        raise RegistryUnreachable("; ".join(f"{', '.join(keys)}: {why}" for why, keys in unreachable.items()))
    return out
