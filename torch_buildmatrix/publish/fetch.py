"""`fetch-site`: a copy of the live site's release history, so that a machine without one (a fresh CI runner, a new
clone) publishes on top of it: its ledger (released.json), its compatibility.json, every wheel it serves (checked
against the ledger's sha256) and the logs of the results it shows. The copy becomes `wheels/site`, a version like any
other (versions.py), and `compat-table` then starts from it exactly as it does on the machine that published.

A site that has published before but serves no ledger stops the fetch, saying how to proceed: a 404 for the ledger of
a site that answers (or that the committed docs say has published wheels) is not "nothing released yet". A URL that
answers 404 for everything is "not found" (a wrong or renamed address), never "nothing published": a project's first
publish is said explicitly (`--first-publish`), and then the fetch makes a local site with an empty ledger, the base
compat-table publishes on. The fetch holds the site's publish lock (compat-table's) and finishes within one total
deadline, whatever the server does.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import urllib.error
from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.errors import FetchError, RecordError
from torch_buildmatrix.publish.index import cell_wheels, sha256_hex
from torch_buildmatrix.publish.ledger import LOST_IN_SCHEMA_1, MAX_LEDGER_BYTES, RELEASED, Ledger, parse_ledger
from torch_buildmatrix.publish.site import SITE_TABLE
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.tableparse import parse_table
from torch_buildmatrix.publish.verify import site_url_problem
from torch_buildmatrix.publish.versions import (
    COMPLETE,
    link,
    live_version,
    mark,
    new_version,
    publish_lock,
    read_ledger,
)
from torch_buildmatrix.util import http
from torch_buildmatrix.util.atomic import write_new
from torch_buildmatrix.util.paths import read_regular
from torch_buildmatrix.util.when import utc_iso

LEDGER_MAX = MAX_LEDGER_BYTES  # the reader's own limit: a ledger it may write, it may fetch
TABLE_MAX = 64 << 20
RETRY_WAIT = 2.0
WHEEL_MAX = 2 << 30  # a plugin wheel with CUDA kernels can be hundreds of MB
LOG_MAX = 64 << 20


@dataclass(frozen=True)
class FetchReport:
    url: str
    version: Path | None  # the local version made from it; None when the site has released nothing yet
    wheels: int = 0
    logs: int = 0
    ledger_entries: int = 0
    notes: tuple[str, ...] = ()


ATTEMPTS = 3  # a transient failure (no answer, a 5xx, the deadline) is tried again, after RETRY_WAIT s, then twice that
TOTAL_DEADLINE = 3600.0  # seconds for the whole fetch: every request, retry and wait


@dataclass(frozen=True)
class Deadline:
    """The fetch's time left: each request gets its own deadline, never past the total one."""

    end: float
    total: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self, url: str) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise FetchError(f"the fetch did not finish within its total deadline of {self.total:g} s (at {url})")
        return left


def _get(url: str, max_bytes: int, deadline: float, total: Deadline | None = None) -> bytes | None:
    """The body at `url`; None for a 404; raises FetchError for anything else that is not a 200, once a transient
    failure has been tried ATTEMPTS times, or when the total deadline passes."""
    total = total or Deadline.after(TOTAL_DEADLINE)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return http.get(url, deadline=min(deadline, total.left(url)), max_bytes=max_bytes).body
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            if exc.code < 500 or attempt == ATTEMPTS:
                raise FetchError(f"cannot read {url}: HTTP {exc.code} {exc.reason}") from None
        except http.TooLarge as exc:
            raise FetchError(f"cannot read {url}: {exc}") from None
        except (OSError, ValueError) as exc:
            if attempt == ATTEMPTS:
                raise FetchError(f"cannot read {url} ({ATTEMPTS} attempts): {exc}") from None
        time.sleep(min(RETRY_WAIT * attempt, total.left(url)))
    raise AssertionError("unreachable")


def _published_before(url: str, committed: CompatTable | None, deadline: float, total: Deadline) -> str:
    """Why the site at `url` has published before although it serves no ledger ('' when nothing says so)."""
    for page in ("index.html", SITE_TABLE):
        if _get(f"{url}/{page}", 1 << 20, deadline, total) is not None:
            return f"{url}/{page} answers"
    # The committed docs say so only when they were made for a site (with --site-url) and list wheels: docs made
    # locally, with no site, say nothing about one (this repository's first deploy has such docs).
    if committed is not None and committed.site_url and any(c.installable for c in committed.cells):
        return (
            f"the committed docs/compatibility.json lists {sum(c.installable for c in committed.cells)} installable "
            f"cell(s) published at {committed.site_url}"
        )
    return ""


def fetch_site(
    url: str,
    site: Path,
    *,
    committed: CompatTable | None = None,
    new_ledger: bool = False,
    first_publish: bool = False,
    deadline: float = http.DEFAULT_DEADLINE,
    total: float = TOTAL_DEADLINE,
) -> FetchReport:
    """Copy the live site at `url` into a new version beside `site` and make it live, writing under the site's
    publish lock (RunLocked, exit 6, while a compat-table or another fetch holds it); raises FetchError (exit 9) when
    it cannot be read or is not found, RecordError (exit 7) when its ledger or table is damaged or its ledger is
    lost."""
    if problem := site_url_problem(url):
        raise FetchError(problem)
    url = url.rstrip("/")
    return _fetch(
        url,
        site,
        committed=committed,
        new_ledger=new_ledger,
        first_publish=first_publish,
        deadline=deadline,
        total=Deadline.after(total),
    )


def _fetch(
    url: str,
    site: Path,
    *,
    committed: CompatTable | None,
    new_ledger: bool,
    first_publish: bool,
    deadline: float,
    total: Deadline,
) -> FetchReport:
    body = _get(f"{url}/{RELEASED}", LEDGER_MAX, deadline, total)
    if body is None:
        why = _published_before(url, committed, deadline, total)
        if not why and first_publish:
            report = _write(url, site, Ledger(), None, table_body=None, deadline=deadline, total=total)
            note = f"no site at {url} yet: the first publish starts its release history from an empty ledger"
            return dataclasses.replace(report, notes=(note, *report.notes))
        if not why:
            raise FetchError(
                f"not found: {url} answers 404 for {RELEASED}, index.html and {SITE_TABLE}. If the site is served "
                "elsewhere (a renamed repository, a custom domain; a user site is served at https://OWNER.github.io/, "
                "without a path), give its URL (the SITE_URL repository variable on CI). If this is the project's "
                "first publish, say so: `torch-buildmatrix fetch-site --first-publish` (on CI, the repository variable "
                "FIRST_PUBLISH=true for that run); nothing was written"
            )
        if not new_ledger:
            raise RecordError(
                f"{url}/{RELEASED}",
                f"missing (HTTP 404), but the site has published before ({why}). Without its ledger, released bytes "
                "could change under their filenames. To proceed: if the site moved (a renamed repository; a user "
                "site is served at https://OWNER.github.io/, without a path), give its URL (the SITE_URL repository "
                "variable on CI); or put released.json back from the last deployed site (e.g. the Pages artifact of "
                "the last deploy); or start a new ledger from the wheels its compatibility.json lists with "
                "`torch-buildmatrix fetch-site --new-ledger`",
            )
    try:
        ledger = parse_ledger(body.decode("utf-8"), f"{url}/{RELEASED}") if body is not None else Ledger()
    except UnicodeDecodeError as exc:
        raise RecordError(f"{url}/{RELEASED}", f"not UTF-8 ({exc})") from None
    table_body = _get(f"{url}/{SITE_TABLE}", TABLE_MAX, deadline, total)
    try:
        table = parse_table(table_body.decode("utf-8")) if table_body is not None else None
    except ValueError as exc:
        raise RecordError(f"{url}/{SITE_TABLE}", f"the live site's table is damaged ({exc})") from None
    if body is None and table is not None:  # --new-ledger: the wheels its table names, checked against it
        for cell in table.cells:
            for wheel in cell_wheels(cell) if cell.installable else ():
                if ledger.get(wheel.path) is None:
                    ledger.add(wheel.path, wheel.sha256, metadata_sha256="", requires_python=None, when="")
    return _write(url, site, ledger, table, table_body=table_body, deadline=deadline, total=total)


def _write(
    url: str,
    site: Path,
    ledger: Ledger,
    table: CompatTable | None,
    *,
    table_body: bytes | None,
    deadline: float,
    total: Deadline,
) -> FetchReport:
    """Under the publish lock (what is local is read and replaced only there): the fetched site, merged with the
    local one, as the new live version."""
    site.parent.mkdir(parents=True, exist_ok=True)
    with publish_lock(site):
        return _write_locked(url, site, ledger, table, table_body=table_body, deadline=deadline, total=total)


def _write_locked(
    url: str,
    site: Path,
    ledger: Ledger,
    table: CompatTable | None,
    *,
    table_body: bytes | None,
    deadline: float,
    total: Deadline,
) -> FetchReport:
    notes = []
    local = live_version(site) or (site if site.is_dir() and not site.is_symlink() else None)
    mine = read_ledger(local) if local is not None else None
    if mine is not None:
        ledger, conflicts = ledger.merged(mine)
        if conflicts:
            raise FetchError(
                f"the live site's ledger and the local one ({local}) disagree on {len(conflicts)} wheel(s): "
                + "; ".join(conflicts[:5])
            )
        notes.append(
            f"merged with the local site's ledger ({local.name if local else ''}, {len(mine)} wheel(s)); the local "
            "site stays beside it as a version"
        )
    site.parent.mkdir(parents=True, exist_ok=True)
    version = new_version(site)
    try:
        wheels, logs = _fill(version, url, local, ledger, table, table_body=table_body, deadline=deadline, total=total)
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)  # ours, never live: nothing half-fetched stays
        raise
    if site.is_dir() and not site.is_symlink():
        site.rename(site.with_name(f".{site.name}.legacy"))
    link(site, version)
    return FetchReport(url, version, wheels, logs, len(ledger), tuple(notes))


def _fill(
    version: Path,
    url: str,
    local: Path | None,
    ledger: Ledger,
    table: CompatTable | None,
    *,
    table_body: bytes | None,
    deadline: float,
    total: Deadline,
) -> tuple[int, int]:
    """Every wheel the ledger serves (checked against it), the table's logs, the ledger and the table."""
    wheels = 0
    for entry in ledger.served():
        data = _local_copy(local, entry.path, entry.sha256) or _get(f"{url}/{entry.path}", WHEEL_MAX, deadline, total)
        if data is None and ledger.upgraded_from == 1:  # schema 1 let failed cells' wheels go: lost, reserved
            ledger.remove(entry.path, LOST_IN_SCHEMA_1, utc_iso())
            ledger.wheels[entry.path] = dataclasses.replace(ledger.wheels[entry.path], restorable=True)
            continue
        if data is None:
            raise FetchError(
                f"{url}/{entry.path}: missing (HTTP 404), but the site's ledger says it released it. Put it back on "
                f"the site, or withdraw it knowingly (`torch-buildmatrix compat-table --remove {entry.filename} "
                "--reason "
                "...`) on a machine that has the ledger"
            )
        if sha256_hex(data) != entry.sha256:
            raise FetchError(f"{url}/{entry.path}: sha256 {sha256_hex(data)} is not the released {entry.sha256}")
        write_new(version / entry.path, data)
        wheels += 1
    logs = 0
    for cell in table.cells if table else ():
        if cell.log and (cell.log in (RELEASED, SITE_TABLE, "index.html") or os.path.lexists(version / cell.log)):
            raise RecordError(
                f"{url}/{SITE_TABLE}",
                f"the live site's table is damaged: {cell.id}'s log path {cell.log!r:.80} names a file of the site "
                "itself (a ledger, a table, a page or a wheel), not a log",
            )
        if cell.log and (data := _get(f"{url}/{cell.log}", LOG_MAX, deadline, total)) is not None:
            write_new(version / cell.log, data)
            logs += 1
    write_new(version / RELEASED, ledger.to_json())
    if table_body is not None:
        write_new(version / SITE_TABLE, table_body)
    mark(version, COMPLETE)
    os.sync()  # all of it on disk before the link points at it
    return wheels, logs


def _local_copy(local: Path | None, path: str, sha256: str) -> bytes | None:
    """A wheel the local site already holds with the released bytes (saves a download)."""
    if local is None:
        return None
    try:
        data = read_regular(local, path)
    except ValueError:
        return None
    return data if sha256_hex(data) == sha256 else None
