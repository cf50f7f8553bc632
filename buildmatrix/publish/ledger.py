"""The release ledger (released.json): every wheel the site ever published, append-only.

A wheel enters the ledger when a publish first serves it, keyed by its path on the site (which names its file) and
its sha256, with what the index needs to serve it again (its PEP 658 metadata's hash, Requires-Python, the torch
releases whose own index lists it) and the cells that tested it. From then on the index serves it on every publish,
whether or not its cell was rebuilt or passed this time. It leaves the index only when withdrawn explicitly: a PEP 592
yank (still served, marked yanked, with its reason) or a removal (no longer served; the ledger keeps when and why, and
its bytes stay reserved: the filename never serves other bytes).

The ledger is read from the live site, which may have been fetched from the network: it is parsed as untrusted
input, and a damaged one is a RecordError (exit code 7) naming the file, never a traceback and never an empty ledger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.utils import InvalidWheelFilename

from buildmatrix.errors import RecordError
from buildmatrix.util.paths import relative_path_problem
from buildmatrix.util.wheelname import parse_wheel
from buildmatrix.util.when import iso_problem

RELEASED = "released.json"
LEDGER_SCHEMA_VERSION = 2
SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f]")
MINOR = re.compile(r"\d{1,4}\.\d{1,4}")
MAX_WHEELS = 100_000
MAX_LEDGER_BYTES = 64 << 20
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
        if self.removed is not None:
            data["removed"] = {"reason": self.removed, "on": self.removed_on, "restorable": self.restorable}
        return data


@dataclass
class Ledger:
    """Every wheel the site ever published, by path. Never loses an entry: only add, yank and remove change it."""

    wheels: dict[str, Released] = field(default_factory=dict)
    upgraded_from: int | None = None  # the schema it was read in, when older than this one

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

    def yank(self, name: str, reason: str) -> Released:
        entry = self.find(name)
        self.wheels[entry.path] = replace(entry, yanked=reason)
        return self.wheels[entry.path]

    def remove(self, name: str, reason: str, when: str) -> Released:
        entry = self.find(name)
        self.wheels[entry.path] = replace(entry, removed=reason, removed_on=when, restorable=False)
        return self.wheels[entry.path]

    def to_json(self) -> str:
        body = {
            "schema_version": LEDGER_SCHEMA_VERSION,
            "wheels": {w.path: w.to_dict() for w in self},
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"  # C-encoded: 10 000 entries

    def merged(self, other: Ledger) -> tuple[Ledger, list[str]]:
        """Both ledgers in one (entries of either; yanks and removals of either), and the paths they disagree on."""
        out = Ledger(dict(self.wheels))
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


def _opt_text(value: Any, key: str) -> str | None:
    return None if value is None else _text(value, key)


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


def _entry(path: str, data: Any) -> Released:
    key = f"wheels[{path!r:.80}]"
    if not isinstance(data, dict):
        raise _Bad(f"{key}: expected an object")
    allowed = {"sha256", "metadata_sha256", "requires_python", "published", "indexes", "cells", "yanked", "removed"}
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
        reason = _text(removed.get("reason"), f"{key}.removed.reason")
        on = _time(removed.get("on"), f"{key}.removed.on", optional=False)
        restorable = removed.get("restorable", False) is True
    return Released(
        path=path,
        sha256=sha,
        metadata_sha256=meta,
        requires_python=_opt_text(data.get("requires_python"), f"{key}.requires_python"),
        published=_time(data.get("published", ""), f"{key}.published", optional=True),
        indexes=_words(data.get("indexes", []), f"{key}.indexes", MINOR),
        cells=_words(data.get("cells", []), f"{key}.cells", CELL_ID),
        yanked=_opt_text(data.get("yanked"), f"{key}.yanked"),
        removed=reason,
        removed_on=on,
        restorable=restorable,
    )


def parse_ledger(text: str, source: str) -> Ledger:
    """The ledger in `text` (schema 2, or schema 1's path -> sha256, upgraded); raises RecordError naming `source`."""
    from buildmatrix.builder.recordparse import load_json

    if len(text) > MAX_LEDGER_BYTES:
        raise RecordError(source, f"larger than {MAX_LEDGER_BYTES} bytes; not a ledger")
    try:
        data = load_json(text)
        if not isinstance(data, dict) or not isinstance(data.get("wheels"), dict):
            raise _Bad("expected an object with schema_version and wheels")
        wheels = data["wheels"]
        if len(wheels) > MAX_WHEELS:
            raise _Bad(f"wheels: {len(wheels)} entries (at most {MAX_WHEELS})")
        version = data.get("schema_version")
        if version == 1:
            entries = {}
            for path, sha in wheels.items():
                _path(path, "wheels")
                if not (isinstance(sha, str) and SHA256.fullmatch(sha)):
                    raise _Bad(f"wheels[{path!r:.80}]: {sha!r:.70} is not a sha256")
                entries[path] = Released(path, sha)
            return Ledger(entries, upgraded_from=1)
        if version != LEDGER_SCHEMA_VERSION:
            raise _Bad(f"schema_version: {version!r:.20} is not {LEDGER_SCHEMA_VERSION} (or 1)")
        if unknown := sorted(set(data) - {"schema_version", "wheels"}):
            raise _Bad(f"unknown key(s) {', '.join(unknown)}")
        return Ledger({_path(p, "wheels"): _entry(p, d) for p, d in wheels.items()})
    except (_Bad, ValueError, RecursionError) as exc:
        raise RecordError(source, f"not a release ledger ({exc}); restore it from a copy of the live site") from None


def ledger_of(entries: Mapping[str, str]) -> Ledger:
    """A schema 1 ledger (path -> sha256) as a Ledger, for tests and upgrades."""
    return Ledger({p: Released(p, s) for p, s in entries.items()}, upgraded_from=1)
