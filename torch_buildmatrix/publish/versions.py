"""The site's versions on disk: `wheels/site` is a symlink to one complete, checked version (`wheels/.site.<ns>`).

Each version this code makes carries a marker (VERSION_MARKER): "staging" while it is built, "complete" once it was
checked and is about to go live. The history is never deleted:
- recovery (at the start of every publish, and whenever `site` is missing or dangles) relinks the newest intact
  version: complete (or unmarked, from before markers) and holding a readable ledger;
- only directories this code made and marked are ever removed: a "staging" one left by a killed run, and complete
  ones older than the last KEEP that the live ledger supersedes (every wheel they released is in the live one);
- a version holding a ledger is never removed by recovery; anything unmarked is never removed at all.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.errors import RecordError, RunLocked
from torch_buildmatrix.publish.ledger import DEFAULT_LIMITS, RELEASED, Ledger, LedgerLimits, parse_ledger

log = logging.getLogger(__name__)

VERSION_MARKER = ".buildmatrix-version"
STAGING, COMPLETE = "staging", "complete"
KEEP = 2  # complete versions kept besides the live one, to roll back to
_NUMBERED = re.compile(r"\.(?P<name>.+)\.(?P<ns>\d+)")


@dataclass(frozen=True)
class Version:
    path: Path
    ns: int  # when it was made (time.time_ns() in its name); 0 for the legacy directory
    state: str | None  # staging | complete; None: not marked (made before markers, or not by us)

    @property
    def ours(self) -> bool:
        return self.state is not None


def _state(path: Path) -> str | None:
    marker = path / VERSION_MARKER
    try:
        data = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() and not marker.is_symlink() else None
    except (OSError, ValueError):
        return None
    state = data.get("state") if isinstance(data, dict) else None
    return state if state in (STAGING, COMPLETE) else None


def mark(path: Path, state: str) -> None:
    """Mark a version as ours, in the given state (written in place: the marker is tiny and only ours reads it)."""
    (path / VERSION_MARKER).write_text(json.dumps({"state": state, "made_by": "torch-buildmatrix"}) + "\n")
    (path / VERSION_MARKER).chmod(0o644)


def versions(site: Path) -> list[Version]:
    """The site's sibling versions, oldest first: `.site.<ns>` directories (never symlinks) and the legacy one."""
    found = []
    for sibling in site.parent.glob(f".{site.name}.*"):
        if sibling.is_symlink() or not sibling.is_dir():
            continue
        numbered = _NUMBERED.fullmatch(sibling.name)
        if numbered and numbered["name"] == site.name:
            found.append(Version(sibling, int(numbered["ns"]), _state(sibling)))
        elif sibling.name in (f".{site.name}.legacy", f".{site.name}.old"):
            found.append(Version(sibling, 0, _state(sibling)))
    return sorted(found, key=lambda v: (v.ns, v.path.name))


def new_version(site: Path) -> Path:
    """A new, empty version beside the site, marked as ours and being staged."""
    path = site.with_name(f".{site.name}.{time.time_ns()}")
    path.mkdir(parents=True)
    mark(path, STAGING)
    return path


def read_ledger(version: Path, limits: LedgerLimits = DEFAULT_LIMITS) -> Ledger | None:
    """The version's ledger; None when it has none; raises RecordError when it is damaged."""
    ledger = version / RELEASED
    if not ledger.exists() and not ledger.is_symlink():
        return None
    if ledger.is_symlink() or not ledger.is_file():
        raise RecordError(str(ledger), "not a regular file")
    try:
        text = ledger.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(str(ledger), f"unreadable ({exc})") from None
    return parse_ledger(text, str(ledger), limits)


def _intact(version: Version) -> bool:
    if version.state == STAGING:
        return False
    try:
        return read_ledger(version.path) is not None
    except RecordError:
        return False


def live_version(site: Path) -> Path | None:
    """The directory `site` links to, when it is one of its own siblings and exists."""
    if not site.is_symlink():
        return None
    target = site.resolve()
    return target if target.is_dir() else None


def recover_site(site: Path) -> list[str]:
    """After a run killed at any point, or a `site` link removed or left dangling: the newest intact version is live
    again, and what a killed run left (its staging version, the link being placed) is removed. Returns what it did,
    one line each (the CLI prints them)."""
    done = []
    placing = site.with_name(f".{site.name}.link")
    if placing.is_symlink() or placing.is_file():
        placing.unlink()
    if not site.is_dir() or (site.is_symlink() and not site.exists()):
        intact = [v for v in versions(site) if _intact(v)]
        if intact:
            newest = intact[-1]
            if site.is_symlink():
                site.unlink()
            link(site, newest.path)
            done.append(
                f"{site} was missing or dangling: linked again to {newest.path.name}, the newest version "
                "holding a ledger"
            )
    live = live_version(site)
    for version in versions(site):
        if version.state == STAGING and (live is None or version.path.resolve() != live):
            shutil.rmtree(version.path)  # a version a killed run was building: never live, never complete
            done.append(f"removed {version.path.name}, left half-built by an interrupted publish")
    return done


def link(site: Path, target: Path) -> None:
    """Point `site` at `target` (a sibling) in one rename: readers see the old or the new site, never neither."""
    placing = site.with_name(f".{site.name}.link")
    placing.unlink(missing_ok=True)
    placing.symlink_to(target.name)
    placing.replace(site)
    fd = os.open(site.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap(site: Path, staged: Path, ledger: Ledger | None = None) -> None:
    """Make `staged` live; a site directory from before the link layout is kept aside as `.site.legacy`. `ledger`:
    the one written into `staged`, when the caller has it (pruning then does not parse it back)."""
    if site.is_dir() and not site.is_symlink():  # the first run with the symlink layout
        site.rename(site.with_name(f".{site.name}.legacy"))  # a kill here: recover_site links it again
    mark(staged, COMPLETE)
    os.sync()  # every file of the version on disk before the link points at it (they were written without fsync)
    link(site, staged)
    prune(site, ledger)


def prune(site: Path, live_ledger: Ledger | None = None) -> list[Path]:
    """Remove complete versions of ours beyond the newest KEEP besides the live one, when the live ledger holds
    every wheel they released (same bytes): nothing they served is lost. Returns what was removed. `live_ledger`: the
    live version's, when the caller wrote it (else read from the live version)."""
    live = live_version(site)
    if live is None:
        return []
    try:
        current = live_ledger if live_ledger is not None else read_ledger(live)
    except RecordError:
        return []
    if current is None:
        return []
    older = [v for v in versions(site) if v.path.resolve() != live and v.state == COMPLETE and v.ns]
    removed = []
    for version in older[:-KEEP] if KEEP else older:
        try:
            theirs = read_ledger(version.path)
        except RecordError:
            continue  # a damaged ledger is evidence: kept
        held = theirs is None or all(
            (mine := current.get(w.path)) is not None and mine.sha256 == w.sha256 for w in theirs
        )
        if held:
            shutil.rmtree(version.path)
            removed.append(version.path)
    return removed


@contextmanager
def publish_lock(site: Path) -> Iterator[None]:
    """One command at a time changes the site: a publish (compat-table) or a fetch-site; a second would read a live
    site the first is about to replace. A held lock is RunLocked (exit code 6)."""
    site.parent.mkdir(parents=True, exist_ok=True)
    with site.with_name(f".{site.name}-publish.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(f"another command is publishing or fetching {site}; wait for it to finish") from None
        yield  # the kernel drops the lock when the file closes, or when its holder dies
