"""Writes what is rendered from a CompatTable: the docs (committed), the static site and wheel index.

Every publish starts from the live site: its release ledger (every wheel it ever served stays served) and its
compatibility.json (every cell keeps its last result), with this run's records laid over them and the committed docs.
The whole next version is built and checked beside the live one, then made live in one rename (versions.py).
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import shutil
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from buildmatrix.builder.records.model import CellResult
from buildmatrix.errors import DocsError, RecordError, RunLocked, UserError
from buildmatrix.model.cells import Cell
from buildmatrix.model.matrix import Matrix, TorchRelease
from buildmatrix.model.pythons import Python
from buildmatrix.publish.index import (
    IndexedWheel,
    cell_wheels,
    index_pages,
    released_wheel,
    requires_python,
    sha256_hex,
    wheel_metadata,
)
from buildmatrix.publish.ledger import (
    DEFAULT_LIMITS,
    LOST_IN_SCHEMA_1,
    RELEASED,
    Ledger,
    LedgerLimits,
    Released,
    reason_problem,
)
from buildmatrix.publish.markdown import compatibility_markdown, readme_section, replace_readme_section
from buildmatrix.publish.overlay import overlay_table
from buildmatrix.publish.page import site_page
from buildmatrix.publish.staleness import stale_problems
from buildmatrix.publish.table import CompatTable
from buildmatrix.publish.tableparse import parse_table
from buildmatrix.publish.verify import metadata_problems, site_problems
from buildmatrix.publish.versions import live_version, new_version, read_ledger, recover_site, swap
from buildmatrix.util.atomic import write_new, write_text_atomic
from buildmatrix.util.paths import read_regular, relative_path_problem
from buildmatrix.util.when import utc_iso

log = logging.getLogger(__name__)

DOCS_MARKDOWN = Path("docs/compatibility.md")
DOCS_TABLE = Path("docs/compatibility.json")  # the committed input the docs are rendered from
README = Path("README.md")


SITE_TABLE = "compatibility.json"  # the site's own table: the base of the next publish
NO_README_HINT = "to publish without a README table, set `publish: {readme: false}` in matrix.yaml"


@dataclass(frozen=True)
class DocsLayout:
    """Where the committed docs live, relative to the project root (matrix.yaml's publish.readme, publish.docs);
    readme None: `publish.readme: false`, no README block is written (nor needed)."""

    readme: Path | None = README
    docs: Path = DOCS_TABLE.parent

    @property
    def table(self) -> Path:  # the committed input the docs are rendered from
        return self.docs / DOCS_TABLE.name

    @property
    def markdown(self) -> Path:
        return self.docs / DOCS_MARKDOWN.name

    @classmethod
    def of(cls, matrix: Matrix) -> DocsLayout:
        return cls(matrix.contract.publish_readme, matrix.contract.publish_docs)


@dataclass(frozen=True)
class Withdrawal:
    """`compat-table --yank NAME --reason R` or `--remove NAME --reason R`: recorded in the ledger for good."""

    wheel: str  # its path on the site or its filename
    reason: str
    remove: bool = False  # False: a PEP 592 yank (still served, marked)


@dataclass(frozen=True)
class SiteReport:
    site: Path
    wheels: int
    pages: list[str]
    problems: list[str]  # why the staged site was not published; empty when it went live
    published: bool = True
    docs: tuple[Path, ...] = ()  # the docs rewritten with it (README, docs/compatibility.*), under the same lock
    notes: tuple[str, ...] = ()  # what the publish says besides (recovery, wheels it cannot serve, withdrawals)
    origins: Mapping[str, str] = field(default_factory=dict)  # cell id -> where its result came from
    off_site: tuple[str, ...] = ()  # passed cells shown without their wheels: this machine has no copy


@dataclass(frozen=True)
class LiveSite:
    """What the live site holds: the base of the next publish."""

    path: Path  # the live version's directory
    ledger: Ledger
    table: CompatTable | None  # its compatibility.json (None: it has none)


def rendered_docs(
    table: CompatTable, readme: str, readme_path: Path = README, layout: DocsLayout = DocsLayout()
) -> dict[Path, str]:
    """The committed files, by path relative to the project root (pure); raises DocsError naming readme_path when
    the README has not exactly one pair of compat-table markers (no README at all with `publish.readme: false`)."""
    docs = {layout.table: table.to_json(), layout.markdown: compatibility_markdown(table)}
    if layout.readme is None:
        return docs
    try:
        readme_text = replace_readme_section(readme, readme_section(table))
    except ValueError as exc:
        raise DocsError(f"{readme_path}: {exc}; {NO_README_HINT}") from None
    return {**docs, layout.readme: readme_text}


def docs_of(table: CompatTable, root: Path, layout: DocsLayout) -> dict[Path, str]:
    """rendered_docs with the project's README read from `root` (when the layout has one)."""
    return rendered_docs(table, read_readme(root, layout), root / (layout.readme or README), layout)


def read_docs_table(root: Path, layout: DocsLayout = DocsLayout()) -> CompatTable:
    """The committed docs/compatibility.json; raises DocsError naming it when it cannot be read or parsed."""
    path = root / layout.table
    try:
        return parse_table(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DocsError(
            f"{path}: unreadable ({type(exc).__name__}: {exc}); regenerate it with `buildmatrix compat-table`"
        ) from None


def read_readme(root: Path, layout: DocsLayout = DocsLayout()) -> str:
    """The README's text; "" with `publish.readme: false` (none is read or needed)."""
    if layout.readme is None:
        return ""
    try:
        return (root / layout.readme).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DocsError(f"{root / layout.readme}: unreadable ({exc}); {NO_README_HINT}") from None


def docs_problems(table: CompatTable, matrix: Matrix) -> list[str]:
    """Ways the committed docs are stale: the recorded table no longer matches matrix.yaml, or a file differs from its
    rendering."""
    layout = DocsLayout.of(matrix)
    problems = [f"{layout.table}: {p}; run `buildmatrix compat-table`" for p in stale_problems(table, matrix)]
    for rel, text in docs_of(table, matrix.root, layout).items():
        path = matrix.root / rel
        if not path.is_file() or path.read_text() != text:
            problems.append(f"{rel} is not what {layout.table} renders to; run `buildmatrix compat-table`")
    return problems


def write_docs(
    table: CompatTable,
    root: Path,
    layout: DocsLayout = DocsLayout(),
    rendered: dict[Path, str] | None = None,
) -> list[Path]:
    """Write the docs whose content changed (`rendered`: rendered_docs' answer, when the caller has it); returns
    them."""
    changed = []
    if rendered is None:
        rendered = docs_of(table, root, layout)
    for rel, text in rendered.items():
        path = root / rel
        if not path.is_file() or path.read_text() != text:
            write_text_atomic(path, text)
            changed.append(path)
    return changed


def _site_table(live: Path) -> CompatTable | None:
    path = live / SITE_TABLE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return parse_table(read_regular(live, SITE_TABLE).decode("utf-8"))
    except (ValueError, OSError) as exc:  # UnicodeDecodeError is a ValueError
        raise RecordError(
            str(path), f"the live site's table is damaged ({exc}); restore it from a copy of the site"
        ) from None


def read_live(site: Path, new_ledger: bool = False, limits: LedgerLimits = DEFAULT_LIMITS) -> LiveSite | None:
    """The live site's ledger and table; None when there is no site yet.

    A damaged ledger or table is a RecordError (exit code 7). A site that has published before (it serves wheels, or
    its table lists installable cells) but holds no ledger stops the publish too, saying how to proceed; with
    `new_ledger`, the ledger starts again from the wheels the site serves.
    """
    live = live_version(site) or (site if site.is_dir() else None)
    if live is None:
        return None
    ledger = read_ledger(live, limits)
    table = _site_table(live)
    if ledger is None:
        served = sorted(p.relative_to(live).as_posix() for p in live.rglob("*.whl") if p.is_file())
        listed = [c.id for c in table.cells if c.installable] if table else []
        if (served or listed) and not new_ledger:
            raise RecordError(
                str(live / RELEASED),
                f"missing, but this site has published before ({len(served)} wheel(s) served, {len(listed)} "
                "installable cell(s) in its compatibility.json). Without its ledger, released bytes could change "
                "under their filenames. To proceed: put the ledger back (a copy of the served released.json, e.g. "
                "from the last deployed site or `buildmatrix fetch-site`), or start a new ledger from the wheels "
                "this site serves with `buildmatrix compat-table --new-ledger`",
            )
        ledger = Ledger(limits=limits)
        for rel in served:
            ledger.add(rel, sha256_hex((live / rel).read_bytes()), metadata_sha256="", requires_python=None, when="")
    return LiveSite(live, ledger, table)


@dataclass
class _Staged:
    """What staging put in the next version so far."""

    staging: Path
    ledger: Ledger
    indexed: list[IndexedWheel] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    logs: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unserved: set[str] = field(default_factory=set)
    directories: set[Path] = field(default_factory=set)  # made in the staging version so far

    def put(self, dest: Path, data: bytes, source: Path | None) -> None:
        """A file of the staging version (made durable all at once before it goes live): hard-linked from `source`
        (a file of the live site, already checked) when there is one, else written."""
        if dest.parent not in self.directories:
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.directories.add(dest.parent)
        if source is not None:
            try:
                os.link(source, dest)
                return
            except OSError:
                pass  # another file system, or links not allowed: a copy
        write_new(dest, data, parent_made=True)

    def place(
        self,
        path: str,
        data: bytes,
        *,
        sha256: str,
        minors: Iterable[str],
        cells: Iterable[str],
        when: str,
        source: Path | None,
    ) -> None:
        """The wheel and its PEP 658 metadata in the staging version, and in the ledger; a wheel carried from the
        live site (`source`, already checked) is hard-linked, not copied. `sha256` is the hash of `data`, which the
        caller computed when it checked these bytes (_read_wheel); the staged file is hashed again from disk by the
        site's checks."""
        self.put(self.staging / path, data, source)
        known = self.ledger.get(path)
        # A carried wheel's released metadata, when the live site holds it with the ledger's hash: linked, not
        # extracted from the wheel again (its bytes were checked against the ledger just before).
        metadata = _released_metadata(source, known)
        if metadata is None:
            try:
                metadata = wheel_metadata(data, path.rsplit("/", 1)[-1])  # the bytes just staged
            except (ValueError, zipfile.BadZipFile) as exc:
                self.problems.append(f"{path}: {exc}")
                return
            self.put(self.staging / (path + ".metadata"), metadata, None)
        else:
            assert source is not None
            self.put(self.staging / (path + ".metadata"), metadata, source.with_name(source.name + ".metadata"))
        # The staged .metadata's bytes are hashed from disk by the site's checks, against the hash of `metadata`
        # recorded here (every served wheel's anchor carries it): here, its headers against the filename.
        self.problems += metadata_problems(path, metadata)
        digest, meta = sha256, sha256_hex(metadata)
        if known is not None and known.metadata_sha256 and known.metadata_sha256 != meta:
            self.problems.append(f"{path}: its METADATA (sha256 {meta}) is not the released {known.metadata_sha256}")
            return
        self.ledger.add(
            path,
            digest,
            metadata_sha256=meta,
            requires_python=requires_python(metadata),
            when=when,
            indexes=minors,
            cells=cells,
        )
        self.paths.add(path)


def _released_metadata(source: Path | None, known: Released | None) -> bytes | None:
    """The .metadata beside a carried wheel, when it has the hash the ledger recorded; else None."""
    if source is None or known is None or not known.metadata_sha256:
        return None
    try:
        data = read_regular(source.parent, source.name + ".metadata")
    except ValueError:
        return None
    return data if sha256_hex(data) == known.metadata_sha256 else None


def _read_wheel(base: Path | None, path: str, sha256: str) -> bytes | None:
    """The bytes at base/path when they are a regular file with this sha256, else None."""
    if base is None:
        return None
    try:
        data = read_regular(base, path)
    except ValueError:
        return None
    return data if sha256_hex(data) == sha256 else None


def _needed(table: CompatTable) -> dict[str, tuple[str, set[str], set[str]]]:
    """Every wheel the installable cells name: path -> (sha256, torch minors whose index lists it, cell ids)."""
    out: dict[str, tuple[str, set[str], set[str]]] = {}
    for cell in table.cells:
        if not cell.installable:
            continue
        minor = table.release(cell.release).minor
        for wheel in cell_wheels(cell):
            entry = out.get(wheel.path)
            if entry is None:
                entry = out[wheel.path] = (wheel.sha256, set(), set())
            sha, minors, cells = entry
            if sha != wheel.sha256:
                continue  # two cells name one path with other bytes: the ledger check refuses the second below
            minors.add(minor)
            cells.add(cell.id)
    return out


def _stage_wheels(
    table: CompatTable, wheels_dir: Path, live: LiveSite | None, staged: _Staged, *, fresh: set[str] | None, when: str
) -> None:
    """Every wheel the table's cells name (from wheels/, else the live site), then every other wheel the ledger
    serves (from the live site): released wheels never leave the index."""
    live_dir = live.path if live else None
    for path, (sha, minors, cells) in sorted(_needed(table).items()):
        ours = fresh is None or bool(cells & fresh)  # this run's record names it: it must be here and allowed
        local = wheels_dir / path
        data, source = None, None
        if ours and (local.exists() or local.is_symlink()):  # this run's wheel: it must be what its record says
            data = _read_wheel(wheels_dir, path, sha)
            if data is None:
                staged.problems.append(_missing(wheels_dir, path, sha))
                continue
        known = staged.ledger.get(path)
        if known is not None and known.sha256 == sha:  # released: the live site's copy, linked with its metadata
            released = _read_wheel(live_dir, path, sha)
            if released is not None and live_dir is not None:
                data, source = released, live_dir / path
        if data is None:
            data = _read_wheel(wheels_dir, path, sha)
        refusal = staged.ledger.refusal(path, sha) if data is not None else ""
        if data is None or refusal:
            if not ours:
                staged.unserved.add(path)
            else:
                staged.problems.append(refusal or _missing(wheels_dir, path, sha))
            continue
        staged.place(path, data, sha256=sha, minors=minors, cells=cells, when=when, source=source)
    for entry in staged.ledger.served():
        if entry.path not in staged.paths:
            _stage_released(entry, live_dir, staged, when)


def _missing(wheels_dir: Path, path: str, sha256: str) -> str:
    """Why a recorded wheel is not in wheels/ with its recorded bytes."""
    local = wheels_dir / path
    if not local.exists() and not local.is_symlink():
        return f"{path} is recorded by a passed cell but missing from {wheels_dir}"
    try:
        digest = sha256_hex(read_regular(wheels_dir, path))
    except ValueError as exc:
        return f"{path}: a recorded wheel: {exc}"
    return f"{path}: sha256 {digest} differs from its cell's record ({sha256})"


def _stage_released(entry: Released, live_dir: Path | None, staged: _Staged, when: str) -> None:
    """A wheel the ledger serves that no cell of the table names now: from the live site, with its recorded bytes."""
    data = _read_wheel(live_dir, entry.path, entry.sha256)
    if data is not None:
        assert live_dir is not None
        staged.place(
            entry.path,
            data,
            sha256=entry.sha256,
            minors=_upgraded_indexes(entry),
            cells=(),
            when=when,
            source=live_dir / entry.path,
        )
    elif staged.ledger.upgraded_from == 1:
        staged.ledger.remove(entry.path, LOST_IN_SCHEMA_1, when)
        staged.ledger.wheels[entry.path] = dataclasses.replace(staged.ledger.wheels[entry.path], restorable=True)
        staged.notes.append(
            f"{entry.path}: released but no longer on the site (schema 1 let it go); its bytes stay reserved, and "
            "a rebuild with the same bytes serves it again"
        )
    else:
        staged.problems.append(
            f"{entry.path}: the ledger says the site released it (sha256 {entry.sha256}), but the live site "
            f"{live_dir} does not hold it with those bytes. Put it back (from a copy of the site, e.g. "
            "`buildmatrix fetch-site`), or withdraw it knowingly: `buildmatrix compat-table --remove "
            f"{entry.filename} --reason ...`"
        )


def _upgraded_indexes(entry: Released) -> tuple[str, ...]:
    """The torch release indexes of a schema 1 entry, which did not record them: a plugin wheel's from its path."""
    if entry.indexes or not entry.path.startswith("torch"):
        return entry.indexes
    return (entry.path.split("/", 1)[0].removeprefix("torch"),)


def _stage_logs(table: CompatTable, wheels_dir: Path, live: LiveSite | None, staged: _Staged) -> None:
    """Each cell's log: this run's from wheels/, a carried result's from the live site when wheels/ lacks it. A log
    the live site holds with the same bytes is hard-linked from there (a site version is never written again), not
    copied: wheels/ is not linked, a rebuild rewrites its logs in place."""
    live_dir = live.path if live else None
    for cell in table.cells:
        if not cell.log:
            continue
        if problem := relative_path_problem(cell.log):
            staged.problems.append(f"{cell.id}: its log path {cell.log!r} {problem}")
            continue
        for base in (wheels_dir, live_dir):
            if base is None or not os.path.lexists(base / cell.log):
                continue
            try:
                data = read_regular(base, cell.log)
            except ValueError as exc:
                staged.problems.append(f"{cell.id}: its log {exc}")
            else:
                source = live_dir / cell.log if live_dir is not None and _same_bytes(live_dir, cell.log, data) else None
                staged.put(staged.staging / cell.log, data, source)
                staged.logs.add(cell.log)
            break


def _unreadable_table(text: str, table: CompatTable) -> list[str]:
    """Why the site's table as written would not read back as this table (empty when it does): the site never goes
    live with a table its next publish, or fetch-site, would refuse."""
    try:
        back = parse_table(text)
    except ValueError as exc:
        return [f"{SITE_TABLE}: the table as written does not read back ({exc}); nothing was published"]
    if back != table:
        return [f"{SITE_TABLE}: the table as written reads back different; nothing was published"]
    return []


def _same_bytes(base: Path, relative: str, data: bytes) -> bool:
    """base/relative is a regular file (reached through no symlink) holding exactly `data`."""
    try:
        return os.path.lexists(base / relative) and read_regular(base, relative) == data
    except ValueError:
        return False


def _withdraw(ledger: Ledger, withdrawals: Iterable[Withdrawal], when: str) -> list[str]:
    notes = []
    for item in withdrawals:
        if problem := reason_problem(item.reason):
            raise UserError(f"--{'remove' if item.remove else 'yank'} {item.wheel}: --reason {problem}")
        reason = item.reason  # kept exactly as given: it round-trips through the ledger and the index
        try:
            entry = ledger.remove(item.wheel, reason, when) if item.remove else ledger.yank(item.wheel, reason, when)
        except KeyError as exc:
            raise UserError(f"--{'remove' if item.remove else 'yank'}: {exc.args[0]}") from None
        first = reason.strip().splitlines()[0]
        notes.append(f"{entry.path}: {'removed' if item.remove else 'yanked'} ({first[:200]})")
    return notes


def site_table(table: CompatTable, unserved: set[str]) -> CompatTable:
    """The table as this site shows it: a passed cell whose wheels it does not hold (it has no copy) is shown passed,
    marked off-site, without its wheels, so no page links to a file the site lacks."""
    cells = tuple(
        dataclasses.replace(c, wheel=None, sdk_wheel=None, off_site=True)
        if c.installable and {w.path for w in cell_wheels(c)} & unserved
        else c
        for c in table.cells
    )
    return dataclasses.replace(table, cells=cells)


def _publishable(root: Path) -> None:
    """0755 directories and 0644 files, whatever the umask: a web server running as another user reads them."""
    root.chmod(0o755)
    _publishable_entries(root)


def _publishable_entries(directory: Path) -> None:
    """What is below `directory`, symlinks left alone (one listing per directory, no stat per file)."""
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink():
                continue
            path = directory / entry.name
            if entry.is_dir(follow_symlinks=False):
                path.chmod(0o755)
                _publishable_entries(path)
            else:
                path.chmod(0o644)


def write_site(
    table: CompatTable,
    wheels_dir: Path,
    site: Path,
    matrix: Matrix | None = None,
    docs_root: Path | None = None,
    *,
    withdrawals: Iterable[Withdrawal] = (),
    new_ledger: bool = False,
    layout: DocsLayout = DocsLayout(),
    limits: LedgerLimits = DEFAULT_LIMITS,
) -> SiteReport:
    """Build the whole site beside the live one, check it, and only then make it live in one atomic swap; then, with
    `docs_root`, rewrite the docs there from the same table, still under the publish lock (a second publisher cannot
    leave docs that describe another site than the live one).

    Every wheel the live site's ledger serves stays served. With problems, the staged copy is removed and the live
    site and the docs are left as they were. With `matrix`, the table is also checked against matrix.yaml.
    """
    site.parent.mkdir(parents=True, exist_ok=True)
    with _publish_lock(site):
        notes = recover_site(site)
        live = read_live(site, new_ledger, limits)
        report = _write_site(
            table, wheels_dir, site, matrix, live=live, fresh=None, withdrawals=withdrawals, limits=limits
        )
        return _with_docs(dataclasses.replace(report, notes=(*notes, *report.notes)), table, docs_root, layout)


def publish(
    matrix: Matrix,
    cells: list[Cell],
    results: list[CellResult],
    available: Mapping[TorchRelease, set[Python]],
    *,
    wheels_dir: Path,
    site: Path,
    site_url: str = "",
    docs_root: Path | None = None,
    withdrawals: Iterable[Withdrawal] = (),
    new_ledger: bool = False,
    layout: DocsLayout | None = None,
    limits: LedgerLimits = DEFAULT_LIMITS,
) -> tuple[CompatTable, SiteReport]:
    """compat-table: under the publish lock, read the live site, lay this run's records over its table and the
    committed one (results accumulate), and publish the result as write_site does. Returns the table and the report
    (with each cell's origin)."""
    site.parent.mkdir(parents=True, exist_ok=True)
    with _publish_lock(site):
        notes = recover_site(site)
        live = read_live(site, new_ledger, limits)
        bases: list[tuple[str, CompatTable]] = []
        if live is not None and live.table is not None:
            bases.append((f"the live site ({live.path.name}/{SITE_TABLE})", live.table))
        root = docs_root or matrix.root
        layout = layout or DocsLayout.of(matrix)
        if (root / layout.table).is_file():
            bases.append((str(layout.table), read_docs_table(root, layout)))
        table, origins = overlay_table(matrix, cells, results, available, site_url=site_url, bases=bases)
        docs = docs_of(table, root, layout)  # they must render first
        fresh = {cell_id for cell_id, origin in origins.items() if origin == "records"}
        report = _write_site(
            table, wheels_dir, site, matrix, live=live, fresh=fresh, withdrawals=withdrawals, limits=limits
        )
        report = dataclasses.replace(report, notes=(*notes, *report.notes), origins=origins)
        return table, _with_docs(report, table, docs_root, layout, docs)


def _with_docs(
    report: SiteReport,
    table: CompatTable,
    docs_root: Path | None,
    layout: DocsLayout,
    rendered: dict[Path, str] | None = None,
) -> SiteReport:
    if report.published and docs_root is not None:
        return dataclasses.replace(report, docs=tuple(write_docs(table, docs_root, layout, rendered)))
    return report


@contextmanager
def _publish_lock(site: Path) -> Iterator[None]:
    """One publisher at a time: a second would read a live site the first is about to replace."""
    with site.with_name(f".{site.name}-publish.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(f"another command is publishing or fetching {site}; wait for it to finish") from None
        yield  # the kernel drops the lock when the file closes, or when its holder dies


def _write_site(
    table: CompatTable,
    wheels_dir: Path,
    site: Path,
    matrix: Matrix | None,
    *,
    live: LiveSite | None,
    fresh: set[str] | None,
    withdrawals: Iterable[Withdrawal],
    limits: LedgerLimits,
) -> SiteReport:
    when = utc_iso()
    ledger = Ledger(dict(live.ledger.wheels), live.ledger.upgraded_from, limits) if live else Ledger(limits=limits)
    withdrawn = _withdraw(ledger, withdrawals, when)
    staging = new_version(site)
    try:
        staged = _Staged(staging, ledger, notes=withdrawn)
        _stage_wheels(table, wheels_dir, live, staged, fresh=fresh, when=when)
        _stage_logs(table, wheels_dir, live, staged)
        shown = site_table(table, staged.unserved)
        off_site = tuple(c.id for c in shown.cells if c.off_site)
        if off_site:
            staged.notes.append(
                f"{len(off_site)} passed cell(s) shown without their wheels, which this machine has no copy of "
                "(their results come from an earlier table; `buildmatrix fetch-site` copies the live site's)"
            )
        indexed = [released_wheel(w) for w in staged.ledger.served() if w.path in staged.paths]
        pages = index_pages(shown, indexed)
        for page in pages:
            write_new(staging / page.path, page.html)
        table_text = shown.compact_json()
        if not staged.problems:  # a problem found already names the cause; this would repeat it
            staged.problems += _unreadable_table(table_text, shown)
        write_new(staging / SITE_TABLE, table_text)
        write_new(staging / "index.html", site_page(shown, staged.logs, [p.path for p in pages]))
        write_new(staging / RELEASED, staged.ledger.to_json())  # read back by the reader as it is written
        _publishable(staging)
        problems = staged.problems or site_problems(shown, staging, matrix, served=indexed)
        report = SiteReport(
            site,
            len(indexed),
            [p.path for p in pages],
            problems,
            not problems,
            notes=tuple(staged.notes),
            off_site=off_site,
        )
        if problems:
            shutil.rmtree(staging)
            return report
        swap(site, staging, staged.ledger)
    except BaseException:
        if staging.exists() and live_version(site) != staging.resolve():
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return report
