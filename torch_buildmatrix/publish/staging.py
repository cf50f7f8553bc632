"""The next version of the site, staged beside the live one: the wheels this run made and every wheel the live site
ever served (the ledger's), their PEP 658 metadata and logs, hard-linked from the live site when unchanged, and the
withdrawals (yanks, removals) recorded in the ledger for good."""

from __future__ import annotations

import dataclasses
import os
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from torch_buildmatrix.errors import UserError
from torch_buildmatrix.publish.index import (
    IndexedWheel,
    cell_wheels,
    requires_python,
    sha256_hex,
    wheel_metadata,
)
from torch_buildmatrix.publish.ledger import (
    LOST_IN_SCHEMA_1,
    Ledger,
    Released,
    reason_problem,
)
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.verify import metadata_problems
from torch_buildmatrix.util.atomic import write_new
from torch_buildmatrix.util.paths import read_regular, relative_path_problem


@dataclass(frozen=True)
class Withdrawal:
    """`compat-table --yank NAME --reason R` or `--remove NAME --reason R`: recorded in the ledger for good."""

    wheel: str  # its path on the site or its filename
    reason: str
    remove: bool = False  # False: a PEP 592 yank (still served, marked)


@dataclass(frozen=True)
class LiveSite:
    """What the live site holds: the base of the next publish."""

    path: Path  # the live version's directory
    ledger: Ledger
    table: CompatTable | None  # its compatibility.json (None: it has none)


@dataclass
class Staged:
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


def stage_wheels(
    table: CompatTable, wheels_dir: Path, live: LiveSite | None, staged: Staged, *, fresh: set[str] | None, when: str
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
        if known is not None and known.removed is not None and not known.restorable:
            # Withdrawn for good: a record naming it (right after a build, on CI, a reproducible rebuild) neither
            # serves it again nor stops the publish of the other cells; its cells are shown without it.
            staged.unserved.add(path)
            staged.notes.append(
                f"{path}: withdrawn on {known.removed_on}, not served; {len(cells)} cell(s) naming it shown without it"
            )
            continue
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


def _stage_released(entry: Released, live_dir: Path | None, staged: Staged, when: str) -> None:
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
            "`torch-buildmatrix fetch-site`), or withdraw it knowingly: `torch-buildmatrix compat-table --remove "
            f"{entry.filename} --reason ...`"
        )


def _upgraded_indexes(entry: Released) -> tuple[str, ...]:
    """The torch release indexes of a schema 1 entry, which did not record them: a plugin wheel's from its path."""
    if entry.indexes or not entry.path.startswith("torch"):
        return entry.indexes
    return (entry.path.split("/", 1)[0].removeprefix("torch"),)


def stage_logs(table: CompatTable, wheels_dir: Path, live: LiveSite | None, staged: Staged) -> None:
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


def _same_bytes(base: Path, relative: str, data: bytes) -> bool:
    """base/relative is a regular file (reached through no symlink) holding exactly `data`."""
    try:
        return os.path.lexists(base / relative) and read_regular(base, relative) == data
    except ValueError:
        return False


def withdraw(ledger: Ledger, withdrawals: Iterable[Withdrawal], when: str) -> list[str]:
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
