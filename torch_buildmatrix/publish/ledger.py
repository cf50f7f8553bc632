"""The release ledger (released.json): every wheel the site ever published, append-only.

A wheel enters the ledger when a publish first serves it, keyed by its path on the site (which names its file) and
its sha256, with what the index needs to serve it again (its PEP 658 metadata's hash, Requires-Python, the torch
releases whose own index lists it) and the cells that tested it. From then on the index serves it on every publish,
whether or not its cell was rebuilt or passed this time. It leaves the index only when withdrawn explicitly: a PEP 592
yank (still served, marked yanked, with its reason) or a removal (no longer served; the ledger keeps when and why, and
its bytes stay reserved: the filename never serves other bytes).

The ledger is read from the live site, which may have been fetched from the network: it is parsed as untrusted
input, and a damaged one is a RecordError (exit code 7) naming the file, never a traceback and never an empty ledger.

One validator (`_entry`, with the limits of `LedgerLimits`) checks the ledger when it is read and when it is written
(`Ledger.to_json` reads its own output back): whatever the tool writes, it reads. Withdrawal reasons and
Requires-Python are free text (the previous release wrote multi-line, tabbed and long ones; they read), bounded only by
the ledger's size; the command line bounds a new reason (`reason_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from packaging.utils import InvalidWheelFilename

from torch_buildmatrix.errors import LedgerFull, RecordError, UserError
from torch_buildmatrix.util.paths import relative_path_problem
from torch_buildmatrix.util.wheelname import parse_wheel
from torch_buildmatrix.util.when import iso_problem

RELEASED = "released.json"
LEDGER_SCHEMA_VERSION = 3  # 3: a withdrawal history per wheel; 2 and 1 still read
SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f]")
MINOR = re.compile(r"\d{1,4}\.\d{1,4}")
MAX_WHEELS = 1_000_000  # released wheels a ledger may hold, on write and on read
MAX_LEDGER_BYTES = MAX_WHEELS * 1024  # an entry with a few cells is ~400 bytes
MAX_REASON_BYTES = 16 << 10  # a new withdrawal reason (UTF-8), at the command line
MAX_HISTORY = 1000  # withdrawals recorded per wheel after its first


@dataclass(frozen=True)
class LedgerLimits:
    """How large a ledger may grow: the writer refuses to pass what the reader refuses to read (tests lower them)."""

    wheels: int = MAX_WHEELS
    bytes: int = MAX_LEDGER_BYTES


DEFAULT_LIMITS = LedgerLimits()


class WithdrawalKind(StrEnum):
    YANK = "yank"
    REMOVE = "remove"


@dataclass(frozen=True)
class LaterWithdrawal:
    """A withdrawal of a wheel after its first: the first's reason and date stay; this one is history."""

    kind: WithdrawalKind
    reason: str
    on: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": str(self.kind), "reason": self.reason, "on": self.on}


def reason_problem(reason: str) -> str:
    """Why `reason` cannot be a new withdrawal reason ('' when it can): any text, multi-line and tabs included, of at
    most MAX_REASON_BYTES in UTF-8, not blank, no NUL, no lone surrogate (bytes the shell's locale did not decode)."""
    if not reason.strip():
        return "is empty; say why the wheel is withdrawn"
    if "\x00" in reason:
        return "holds a NUL character"
    try:
        size = len(reason.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8 text"
    if size > MAX_REASON_BYTES:
        return f"is {size} bytes long (at most {MAX_REASON_BYTES}, 16 KiB)"
    return ""


LOST_IN_SCHEMA_1 = "not on the site when its ledger was upgraded from schema 1 (which let failed cells' wheels go)"


@dataclass(frozen=True)
class Released:
    """One wheel the site published."""

    path: str  # on the site (it mirrors wheels/): torch2.13/<file>, <sdk name>/<file>
    sha256: str
    metadata_sha256: str = ""  # its .dist-info/METADATA (PEP 658); "" only in entries upgraded from schema 1
    requires_python: str | None = None
    published: str = ""  # when it was first served (UTC ISO 8601); "" when unknown (schema 1)
    indexes: tuple[str, ...] = ()  # torch minors whose own index (torch<minor>/) lists it
    cells: tuple[str, ...] = ()  # the cells that tested it
    yanked: str | None = None  # PEP 592: served, marked yanked with this reason
    removed: str | None = None  # why it is no longer served (it was withdrawn, or lost before schema 2)
    removed_on: str | None = None
    restorable: bool = False  # removed because it was lost, not withdrawn: the same bytes may be served again
    yanked_on: str | None = None  # when it was yanked (schema 3; None in older ledgers)
    history: tuple[LaterWithdrawal, ...] = ()  # withdrawals after the first, oldest first

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def served(self) -> bool:
        return self.removed is None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "sha256": self.sha256,
            "metadata_sha256": self.metadata_sha256,
            "requires_python": self.requires_python,
            "published": self.published,
            "indexes": list(self.indexes),
            "cells": list(self.cells),
        }
        if self.yanked is not None:
            data["yanked"] = self.yanked
        if self.yanked_on is not None:
            data["yanked_on"] = self.yanked_on
        if self.removed is not None:
            data["removed"] = {"reason": self.removed, "on": self.removed_on, "restorable": self.restorable}
        if self.history:
            data["history"] = [h.to_dict() for h in self.history]
        return data


@dataclass
class Ledger:
    """Every wheel the site ever published, by path. Never loses an entry: only add, yank and remove change it."""

    wheels: dict[str, Released] = field(default_factory=dict)
    upgraded_from: int | None = None  # the schema it was read in, when older than this one
    limits: LedgerLimits = DEFAULT_LIMITS

    def __iter__(self) -> Iterator[Released]:
        return iter(sorted(self.wheels.values(), key=lambda w: w.path))

    def __len__(self) -> int:
        return len(self.wheels)

    def get(self, path: str) -> Released | None:
        return self.wheels.get(path)

    def served(self) -> list[Released]:
        """What the index serves: every entry not removed (yanked ones too, marked)."""
        return [w for w in self if w.served]

    def refusal(self, path: str, sha256: str) -> str:
        """Why the wheel `path` with these bytes may not be published ('' when it may): released bytes never change,
        and a withdrawn wheel never comes back."""
        old = self.wheels.get(path)
        if old is None:
            return ""
        if old.sha256 != sha256:
            return (
                f"{path}: a different build (sha256 {sha256}) of a released wheel (sha256 {old.sha256}); released "
                "bytes never change, so the site keeps serving the released one. Rebuild it from the same inputs "
                "(builds are reproducible), or publish the change under a new version (raise plugin.version in "
                "matrix.yaml)"
            )
        if old.removed is not None and not old.restorable:
            return (
                f"{path}: withdrawn on {old.removed_on} ({old.removed}); a withdrawn wheel is never served again: "
                "publish under a new plugin.version"
            )
        return ""

    def add(
        self,
        path: str,
        sha256: str,
        *,
        metadata_sha256: str,
        requires_python: str | None,
        when: str,
        indexes: Iterable[str] = (),
        cells: Iterable[str] = (),
    ) -> Released:
        """Record that the wheel is served (its refusal must be ''): a new entry, or the old one with its indexes and
        cells extended (never narrowed) and a lost wheel restored."""
        old = self.wheels.get(path)
        if old is None:
            try:
                _path(path, "path")  # the reader's rule for a wheel's path, before it enters
            except _Bad as exc:
                raise RecordError(RELEASED, f"cannot record {path!r:.80}: {exc}") from None
            if len(self.wheels) >= self.limits.wheels:
                raise LedgerFull(
                    f"{RELEASED}: publishing {path} would make the ledger hold more than {self.limits.wheels} wheels, "
                    "more than its reader reads; nothing was published"
                )
            entry = Released(
                path,
                sha256,
                metadata_sha256,
                requires_python,
                when,
                tuple(sorted(set(indexes))),
                tuple(sorted(set(cells))),
            )
        else:
            assert old.sha256 == sha256, path
            restored = old.removed is not None and old.restorable
            entry = replace(
                old,
                metadata_sha256=old.metadata_sha256 or metadata_sha256,
                requires_python=old.requires_python if old.metadata_sha256 else requires_python,
                published=old.published or when,
                indexes=tuple(sorted({*old.indexes, *indexes})),
                cells=tuple(sorted({*old.cells, *cells})),
                removed=None if restored else old.removed,
                removed_on=None if restored else old.removed_on,
                restorable=False if restored else old.restorable,
            )
        self.wheels[path] = entry
        return entry

    def find(self, name: str) -> Released:
        """The entry named by its path or its filename; raises KeyError saying what the ledger holds."""
        if name in self.wheels:
            return self.wheels[name]
        matches = [w for w in self.wheels.values() if w.filename == name]
        if len(matches) == 1:
            return matches[0]
        raise KeyError(f"{name!r} is not a wheel this site released ({len(self.wheels)} in {RELEASED})")

    def yank(self, name: str, reason: str, when: str) -> Released:
        """Mark the wheel yanked; a wheel already withdrawn keeps its first reason and date, and this one is added to
        its history."""
        entry = self.find(name)
        if entry.yanked is None and (entry.removed is None or entry.restorable):
            entry = replace(entry, yanked=reason, yanked_on=when)
        else:
            entry = self._later(entry, WithdrawalKind.YANK, reason, when)
        self.wheels[entry.path] = entry
        return entry

    def remove(self, name: str, reason: str, when: str) -> Released:
        """Stop serving the wheel; one removed before keeps its first reason and date, and this one is added to its
        history (a wheel lost in an upgrade is withdrawn for real: its loss note is kept in the history)."""
        entry = self.find(name)
        if entry.removed is None:
            entry = replace(entry, removed=reason, removed_on=when, restorable=False)
        elif entry.restorable:
            lost = LaterWithdrawal(WithdrawalKind.REMOVE, entry.removed, entry.removed_on or when)
            entry = replace(entry, removed=reason, removed_on=when, restorable=False, history=(*entry.history, lost))
        else:
            entry = self._later(entry, WithdrawalKind.REMOVE, reason, when)
        self.wheels[entry.path] = entry
        return entry

    @staticmethod
    def _later(entry: Released, kind: WithdrawalKind, reason: str, when: str) -> Released:
        if len(entry.history) >= MAX_HISTORY:
            raise UserError(f"{entry.path}: withdrawn {MAX_HISTORY} times already; the ledger records no more")
        return replace(entry, history=(*entry.history, LaterWithdrawal(kind, reason, when)))

    def to_json(self) -> str:
        """The ledger as released.json, read back with the reader first: the writer never writes what the reader
        refuses (a RecordError naming what; a LedgerFull past the limits)."""
        if len(self.wheels) > self.limits.wheels:
            raise LedgerFull(f"{RELEASED}: {len(self.wheels)} wheels, more than the {self.limits.wheels} it may hold")
        body = {
            "schema_version": LEDGER_SCHEMA_VERSION,
            "wheels": {w.path: w.to_dict() for w in self},
        }
        text = json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"  # C-encoded: 10 000 entries
        if len(text) > self.limits.bytes:
            raise LedgerFull(
                f"{RELEASED}: {len(text)} bytes, more than the {self.limits.bytes} its reader reads; nothing was "
                "published"
            )
        back = parse_ledger(text, f"{RELEASED} (as written)", self.limits)
        if back.wheels != self.wheels:
            wrong = next(p for p in self.wheels if back.wheels.get(p) != self.wheels[p])
            raise RecordError(f"{RELEASED} (as written)", f"{wrong} does not read back as written")
        return text

    def merged(self, other: Ledger) -> tuple[Ledger, list[str]]:
        """Both ledgers in one (entries of either; yanks and removals of either), and the paths they disagree on."""
        out = Ledger(dict(self.wheels), limits=self.limits)
        conflicts = []
        for entry in other:
            mine = out.wheels.get(entry.path)
            if mine is None:
                out.wheels[entry.path] = entry
            elif mine.sha256 != entry.sha256:
                conflicts.append(f"{entry.path}: sha256 {mine.sha256} here, {entry.sha256} there")
            else:
                # A withdrawal on either side stands; a loss only where neither withdrew it.
                gone = [e for e in (mine, entry) if e.removed is not None]
                final = next((e for e in gone if not e.restorable), gone[0] if gone else None)
                out.wheels[entry.path] = replace(
                    mine,
                    metadata_sha256=mine.metadata_sha256 or entry.metadata_sha256,
                    published=min(filter(None, (mine.published, entry.published)), default=""),
                    indexes=tuple(sorted({*mine.indexes, *entry.indexes})),
                    cells=tuple(sorted({*mine.cells, *entry.cells})),
                    yanked=mine.yanked if mine.yanked is not None else entry.yanked,
                    yanked_on=mine.yanked_on if mine.yanked is not None else entry.yanked_on,
                    history=mine.history + tuple(h for h in entry.history if h not in mine.history),
                    removed=final.removed if final else None,
                    removed_on=final.removed_on if final else None,
                    restorable=final.restorable if final else False,
                )
        return out, conflicts


class _Bad(Exception):
    pass


def _text(value: Any, key: str, limit: int = 1024) -> str:
    if not isinstance(value, str) or len(value) > limit or _CONTROL.search(value):
        raise _Bad(f"{key}: expected a one-line string of at most {limit} characters, got {value!r:.60}")
    return value


def _free(value: Any, key: str) -> str:
    """Free text (a reason, Requires-Python): any string, bounded by the ledger's size."""
    if not isinstance(value, str):
        raise _Bad(f"{key}: expected a string, got {type(value).__name__}")
    return value


def _opt_free(value: Any, key: str) -> str | None:
    return None if value is None else _free(value, key)


def _history(value: Any, key: str) -> tuple[LaterWithdrawal, ...]:
    if not isinstance(value, list) or len(value) > MAX_HISTORY:
        raise _Bad(f"{key}: expected a list of at most {MAX_HISTORY} withdrawals")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) != {"kind", "reason", "on"}:
            raise _Bad(f"{key}[{i}]: expected {{kind, reason, on}}")
        if item["kind"] not in set(WithdrawalKind):
            raise _Bad(f"{key}[{i}].kind: {item['kind']!r:.20} is not one of {', '.join(WithdrawalKind)}")
        reason = _free(item["reason"], f"{key}[{i}].reason")
        out.append(LaterWithdrawal(WithdrawalKind(item["kind"]), reason, _time(item["on"], f"{key}[{i}].on", False)))
    return tuple(out)


def _time(value: Any, key: str, optional: bool) -> str:
    text = _text(value, key)
    if text == "" and optional:
        return text
    if problem := iso_problem(text):
        raise _Bad(f"{key}: {text!r:.40} {problem}")
    return text


def _words(value: Any, key: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > 10_000:
        raise _Bad(f"{key}: expected a list")
    out = []
    for i, item in enumerate(value):
        text = _text(item, f"{key}[{i}]", 200)
        if not pattern.fullmatch(text):
            raise _Bad(f"{key}[{i}]: {text!r:.60} is not one")
        out.append(text)
    return tuple(out)


CELL_ID = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9._+-]{0,199}")


def _path(path: Any, key: str) -> str:
    text = _text(path, key, 400)
    if problem := relative_path_problem(text):
        raise _Bad(f"{key}: {text!r:.80} {problem}")
    try:
        parse_wheel(text.rsplit("/", 1)[-1])
    except InvalidWheelFilename as exc:
        raise _Bad(f"{key}: {exc}") from None
    return text


def _entry(path: str, data: Any, version: int) -> Released:
    key = f"wheels[{path!r:.80}]"
    if not isinstance(data, dict):
        raise _Bad(f"{key}: expected an object")
    allowed = {"sha256", "metadata_sha256", "requires_python", "published", "indexes", "cells", "yanked", "removed"}
    if version >= 3:
        allowed |= {"yanked_on", "history"}
    if unknown := sorted(set(data) - allowed):
        raise _Bad(f"{key}: unknown key(s) {', '.join(unknown)}")
    sha = _text(data.get("sha256"), f"{key}.sha256", 64)
    if not SHA256.fullmatch(sha):
        raise _Bad(f"{key}.sha256: {sha!r} is not a sha256")
    meta = _text(data.get("metadata_sha256", ""), f"{key}.metadata_sha256", 64)
    if meta and not SHA256.fullmatch(meta):
        raise _Bad(f"{key}.metadata_sha256: {meta!r} is not a sha256")
    removed = data.get("removed")
    reason = on = None
    restorable = False
    if removed is not None:
        if not isinstance(removed, dict) or set(removed) - {"reason", "on", "restorable"}:
            raise _Bad(f"{key}.removed: expected {{reason, on, restorable}}")
        reason = _free(removed.get("reason"), f"{key}.removed.reason")
        on = _time(removed.get("on"), f"{key}.removed.on", optional=False)
        restorable = removed.get("restorable", False) is True
    return Released(
        path=path,
        sha256=sha,
        metadata_sha256=meta,
        requires_python=_opt_free(data.get("requires_python"), f"{key}.requires_python"),
        published=_time(data.get("published", ""), f"{key}.published", optional=True),
        indexes=_words(data.get("indexes", []), f"{key}.indexes", MINOR),
        cells=_words(data.get("cells", []), f"{key}.cells", CELL_ID),
        yanked=_opt_free(data.get("yanked"), f"{key}.yanked"),
        removed=reason,
        removed_on=on,
        restorable=restorable,
        yanked_on=None if data.get("yanked_on") is None else _time(data["yanked_on"], f"{key}.yanked_on", False),
        history=_history(data.get("history", []), f"{key}.history"),
    )


def parse_ledger(text: str, source: str, limits: LedgerLimits = DEFAULT_LIMITS) -> Ledger:
    """The ledger in `text` (schema 3; 2 and schema 1's path -> sha256 upgraded); raises RecordError naming `source`.
    Reads every ledger the previous release could write (multi-line, tabbed and long reasons included)."""
    from torch_buildmatrix.builder.records.fields import load_json

    if len(text) > limits.bytes:
        raise RecordError(source, f"larger than {limits.bytes} bytes; not a ledger")
    try:
        data = load_json(text)
        if not isinstance(data, dict) or not isinstance(data.get("wheels"), dict):
            raise _Bad("expected an object with schema_version and wheels")
        wheels = data["wheels"]
        if len(wheels) > limits.wheels:
            raise _Bad(f"wheels: {len(wheels)} entries (at most {limits.wheels})")
        version = data.get("schema_version")
        if version == 1:
            entries = {}
            for path, sha in wheels.items():
                _path(path, "wheels")
                if not (isinstance(sha, str) and SHA256.fullmatch(sha)):
                    raise _Bad(f"wheels[{path!r:.80}]: {sha!r:.70} is not a sha256")
                entries[path] = Released(path, sha)
            return Ledger(entries, upgraded_from=1, limits=limits)
        if version not in (2, LEDGER_SCHEMA_VERSION) or isinstance(version, bool):
            raise _Bad(f"schema_version: {version!r:.20} is not {LEDGER_SCHEMA_VERSION} (or 2, or 1)")
        if unknown := sorted(set(data) - {"schema_version", "wheels"}):
            raise _Bad(f"unknown key(s) {', '.join(unknown)}")
        return Ledger(
            {_path(p, "wheels"): _entry(p, d, version) for p, d in wheels.items()},
            upgraded_from=None if version == LEDGER_SCHEMA_VERSION else version,
            limits=limits,
        )
    except (_Bad, ValueError, RecursionError) as exc:
        raise RecordError(source, f"not a release ledger ({exc}); restore it from a copy of the live site") from None


def ledger_of(entries: Mapping[str, str]) -> Ledger:
    """A schema 1 ledger (path -> sha256) as a Ledger, for tests and upgrades."""
    return Ledger({p: Released(p, s) for p, s in entries.items()}, upgraded_from=1)
