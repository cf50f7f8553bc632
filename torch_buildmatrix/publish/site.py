"""Writes what is rendered from a CompatTable: the docs (committed), the static site and wheel index.

Every publish starts from the live site: its release ledger (every wheel it ever served stays served) and its
compatibility.json (every cell keeps its last result), with this run's records laid over them and the committed docs.
The whole next version is built and checked beside the live one, then made live in one rename (versions.py).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torch_buildmatrix.builder.records.model import CellResult
from torch_buildmatrix.errors import RecordError
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.docs import DocsLayout, docs_of, read_docs_table, write_docs
from torch_buildmatrix.publish.index import (
    cell_wheels,
    index_pages,
    released_wheel,
    sha256_hex,
)
from torch_buildmatrix.publish.ledger import (
    DEFAULT_LIMITS,
    RELEASED,
    Ledger,
    LedgerLimits,
)
from torch_buildmatrix.publish.overlay import overlay_table
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.staging import LiveSite, Staged, Withdrawal, stage_logs, stage_wheels, withdraw
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.tableparse import parse_table, read_back_problem
from torch_buildmatrix.publish.verify import site_problems
from torch_buildmatrix.publish.versions import live_version, new_version, publish_lock, read_ledger, recover_site, swap
from torch_buildmatrix.util.atomic import write_new
from torch_buildmatrix.util.paths import read_regular
from torch_buildmatrix.util.when import utc_iso

log = logging.getLogger(__name__)


SITE_TABLE = "compatibility.json"  # the site's own table: the base of the next publish


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
                "from the last deployed site or `torch-buildmatrix fetch-site`), or start a new ledger from the wheels "
                "this site serves with `torch-buildmatrix compat-table --new-ledger`",
            )
        ledger = Ledger(limits=limits)
        for rel in served:
            ledger.add(rel, sha256_hex((live / rel).read_bytes()), metadata_sha256="", requires_python=None, when="")
    return LiveSite(live, ledger, table)


def _unreadable_table(text: str, table: CompatTable) -> list[str]:
    """Why the site's table as written would not read back as this table (empty when it does): the site never goes
    live with a table its next publish, or fetch-site, would refuse."""
    problem = read_back_problem(text, table)
    return [f"{SITE_TABLE}: the table as written {problem}; nothing was published"] if problem else []


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
    with publish_lock(site):
        notes = recover_site(site)
        live = read_live(site, new_ledger, limits)
        docs = docs_of(table, docs_root, layout) if docs_root is not None else None  # they must render first
        report = _write_site(
            table, wheels_dir, site, matrix, live=live, fresh=None, withdrawals=withdrawals, limits=limits
        )
        return _with_docs(dataclasses.replace(report, notes=(*notes, *report.notes)), table, docs_root, layout, docs)


def publish(
    matrix: Matrix,
    cells: list[Cell],
    results: list[CellResult],
    available: Mapping[TorchRelease, set[Python]],
    *,
    wheels_dir: Path,
    site: Path,
    site_url: str | None = None,
    docs_root: Path | None = None,
    withdrawals: Iterable[Withdrawal] = (),
    new_ledger: bool = False,
    layout: DocsLayout | None = None,
    limits: LedgerLimits = DEFAULT_LIMITS,
    first_publish: bool = False,
) -> tuple[CompatTable, SiteReport]:
    """compat-table: under the publish lock, read the live site, lay this run's records over its table and the
    committed one (results accumulate), and publish the result as write_site does. Returns the table and the report
    (with each cell's origin)."""
    site.parent.mkdir(parents=True, exist_ok=True)
    with publish_lock(site):
        notes = recover_site(site)
        live = read_live(site, new_ledger, limits)
        bases: list[tuple[str, CompatTable]] = []
        if live is not None and live.table is not None:
            bases.append((f"the live site ({live.path.name}/{SITE_TABLE})", live.table))
        root = docs_root or matrix.root
        layout = layout or DocsLayout.of(matrix)
        committed = read_docs_table(root, layout) if (root / layout.table).is_file() else None
        if committed is not None:
            bases.append((str(layout.table), committed))
        ours = committed if committed is not None and committed.plugin == matrix.plugin.distribution else None
        if live is None and not first_publish and ours is not None:
            _refuse_a_new_history(site, layout, ours)
        if site_url is None:  # not given: the site the committed docs name stays the site (CI passes its URL)
            site_url = ours.site_url if ours is not None else ""
        table, origins = overlay_table(matrix, cells, results, available, site_url=site_url, bases=bases)
        docs = docs_of(table, root, layout)  # they must render first
        fresh = {cell_id for cell_id, origin in origins.items() if origin == "records"}
        report = _write_site(
            table, wheels_dir, site, matrix, live=live, fresh=fresh, withdrawals=withdrawals, limits=limits
        )
        report = dataclasses.replace(report, notes=(*notes, *report.notes), origins=origins)
        return table, _with_docs(report, table, docs_root, layout, docs)


def _refuse_a_new_history(site: Path, layout: DocsLayout, committed: CompatTable) -> None:
    """No local site, but the committed docs say this project has published: publishing now would start an empty
    release history over the live one (after a `git clean`, on a fresh clone). RecordError (exit 7) saying how on."""
    listed = sum(c.installable for c in committed.cells)
    if not committed.site_url and not listed:
        return
    said = f"names the site {committed.site_url}" if committed.site_url else ""
    said += (" and " if said else "") + f"lists {listed} passed cell(s)" if listed else ""
    url = committed.site_url or "URL"
    raise RecordError(
        str(site / RELEASED),
        f"missing: there is no local site, but {layout.table} {said}, so this project has published before. "
        "Publishing now would start a new, empty release history over the live one. Fetch the live site's ledger "
        f"first: `torch-buildmatrix fetch-site --site-url {url}`; if this really is the project's first publish, say "
        "so: "
        "`torch-buildmatrix compat-table --first-publish`",
    )


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
    withdrawn = withdraw(ledger, withdrawals, when)
    staging = new_version(site)
    try:
        staged = Staged(staging, ledger, notes=withdrawn)
        stage_wheels(table, wheels_dir, live, staged, fresh=fresh, when=when)
        stage_logs(table, wheels_dir, live, staged)
        shown = site_table(table, staged.unserved)
        off_site = tuple(c.id for c in shown.cells if c.off_site)
        if off_site:
            staged.notes.append(
                f"{len(off_site)} passed cell(s) shown without their wheels, which this machine has no copy of "
                "(their results come from an earlier table; `torch-buildmatrix fetch-site` copies the live site's)"
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
