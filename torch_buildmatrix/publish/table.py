"""The compatibility table (CompatTable): the matrix's cells joined with their results, as pure data.

Everything published about compatibility (docs/compatibility.md, README's table, the static site and its
JSON, the wheel index) is rendered from one CompatTable. The table is also committed as
docs/compatibility.json, so the docs re-render identically in a clean clone that has no wheels/ folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any

from packaging.version import Version

from torch_buildmatrix import schema1
from torch_buildmatrix.builder.records.model import SmokeCounts, WheelRecord
from torch_buildmatrix.model.cellkey import CellKey, KeyParser
from torch_buildmatrix.model.contract import TorchPin
from torch_buildmatrix.model.matrix import Matrix, TorchRelease, shortest_prefix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util.features import default_title, legacy_key
from torch_buildmatrix.vocab import FeatureState, SdkKind, Status, TierStatus

# 2: the SDK is general (`sdk`, `sdks`, a cell's `sdk` id part and `sdk_wheel`); tables of 1 (a driver) are read as 2.
COMPAT_SCHEMA_VERSION = 2
SITE_PLACEHOLDER = "{site}"


def release_key(minor: str, variant: str) -> str:
    """The table's key of a torch release, e.g. torch2.13-cpu."""
    return f"torch{minor}-{variant}"


def _wheel_dict(wheel: WheelRecord | None) -> dict[str, str] | None:
    return None if wheel is None else {"filename": wheel.filename, "sha256": wheel.sha256, "path": wheel.path}


def keyed_features(features: Mapping[Any, Any], titles: dict[str, str]) -> dict[Any, Any]:
    """Features by key, as a table read from JSON names them: a name of a table written before keys were snake_case
    ("named tensors") reads as its key ("named_tensors"), the name becoming the key's title in `titles` unless one is
    there already; a name of neither kind is kept as it is, for table_problems to refuse."""
    out: dict[Any, Any] = {}
    for name, value in features.items():
        key = legacy_key(name) if isinstance(name, str) else None
        if key is None:
            key = name
        elif key != name:
            titles.setdefault(key, name)
        if key in out:
            raise ValueError(f"features: {name!r:.80} names the feature {key!r} a second time")
        out[key] = value
    return out


def _smoke_dict(smoke: SmokeCounts) -> dict[str, int]:
    return {"passed": smoke.passed, "failed": smoke.failed, "skipped": smoke.skipped, "errors": smoke.errors}


@dataclass(frozen=True)
class Attempt:
    """A cell's latest attempt, when it failed after the pass the table shows (that pass's wheel stays published)."""

    status: Status  # failed | interrupted
    recorded: str | None  # when (UTC ISO 8601)
    failed_step: str | None = None
    failure: str | None = None  # deterministic, transient: <cause>, interrupted

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class DeepShown:
    """A cell's build's deep tier (smoke.tiers), as the table shows it with each of the build's cells: the cell that
    ran it and what it found."""

    cell: str
    status: TierStatus
    smoke: SmokeCounts | None = None

    def to_dict(self) -> dict[str, Any]:
        smoke = {"smoke": _smoke_dict(self.smoke)} if self.smoke is not None else {}
        return {"cell": self.cell, "status": str(self.status), **smoke}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeepShown:
        smoke = data.get("smoke")
        return cls(str(data["cell"]), TierStatus(data["status"]), SmokeCounts(**smoke) if smoke else None)


@dataclass(frozen=True)
class CompatCell:
    """One cell of the table: its identity, and the result it shows (not built: none).

    The result shown is its latest attempt, or, when that failed after an earlier pass, the last pass (whose wheels
    stay published) with the failed attempt as `latest`.
    """

    key: CellKey
    status: Status  # passed | failed | not built
    requirement: str  # my-ops==0.1.0+torch.2.13
    wheel: WheelRecord | None = None
    sdk_wheel: WheelRecord | None = None  # a wheel SDK's wheel, installed with the plugin wheel
    smoke: SmokeCounts | None = None
    failed_step: str | None = None
    error: str | None = None
    log: str | None = None  # relative to the wheels directory
    # Of a failed cell: "deterministic", "transient: <cause>" or "interrupted"; None for records that predate classes
    # (and then absent from the JSON, so docs of such records stay byte-identical).
    failure: str | None = None
    recorded: str | None = None  # when the result shown was recorded (UTC ISO 8601); None in tables that predate it
    latest: Attempt | None = None  # the latest attempt, when it failed after the pass shown
    features: tuple[tuple[str, str], ...] = ()  # the smoke features' outcomes of the result shown
    off_site: bool = False  # passed, but the site showing it does not hold its wheels (it has no copy of them)
    deep: DeepShown | None = None  # its build's deep tier (smoke.tiers); None without tiers, or not yet known

    @property
    def id(self) -> str:
        return self.key.id

    # Computed once per cell (tables of 10 000 cells ask for them in every loop).
    @cached_property
    def release(self) -> str:
        """Key of its Release, e.g. torch2.13-cpu."""
        return release_key(self.key.torch_minor, self.key.variant)

    @cached_property
    def python(self) -> str:
        return self.key.python_minor

    @cached_property
    def sdk(self) -> str:
        """Its SDK column (the SDK's id part, e.g. drv2); "" without an SDK."""
        return self.key.sdk_tag

    @property
    def installable(self) -> bool:
        """Passed, with its wheels (compat_cell passes a wheel SDK's cell only with its SDK wheel)."""
        return self.status == Status.PASSED and self.wheel is not None

    def to_dict(self) -> dict[str, Any]:
        """The table names a cell by its release key, Python and SDK column; from_dict joins them back. Keys that
        are unset are left out (docs of tables that predate them stay byte-identical)."""
        data: dict[str, Any] = {"id": self.id, "release": self.release, "python": self.python}
        if self.key.sdk is not None:
            data["sdk"] = self.sdk
        if self.key.build != self.key.own_build:  # the wheel of a build shared with other cells (absent: its own)
            data["build"] = self.key.build.to_dict()
        data |= {
            "label": self.key.label,
            "status": self.status,
            "requirement": self.requirement,
            "wheel": _wheel_dict(self.wheel),
        }
        if self.sdk_wheel is not None:
            data["sdk_wheel"] = _wheel_dict(self.sdk_wheel)
        data |= {
            "smoke": None if self.smoke is None else _smoke_dict(self.smoke),
            "failed_step": self.failed_step,
            "error": self.error,
            "log": self.log,
        }
        if self.failure is not None:
            data["failure"] = self.failure
        if self.recorded is not None:
            data["recorded"] = self.recorded
        if self.latest is not None:
            data["latest"] = self.latest.to_dict()
        if self.features:
            data["features"] = dict(self.features)
        if self.off_site:
            data["off_site"] = True
        if self.deep is not None:
            data["deep"] = self.deep.to_dict()
        if self.sdk_wheel is not None:
            # Schema 1's name of the SDK wheel, kept as an alias: readers of schema 1 (the doctor of wheels already
            # installed reads the site's compatibility.json) count a passed cell as installable by it.
            data[schema1.SDK_WHEEL] = data["sdk_wheel"]
        return data

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        releases: Mapping[str, Release],
        sdks: Mapping[str, SdkColumn],
        keys: KeyParser | None = None,
        titles: dict[str, str] | None = None,
    ) -> CompatCell:
        """`keys`: the table's KeyParser (each version and Python text parsed once per table); `titles`: where the
        titles of features named the older way go (keyed_features)."""
        release = releases[data["release"]]
        sdk = {"sdk": sdks[data["sdk"]].version} if "sdk" in data else {}
        key = (keys or KeyParser()).cell(
            {
                "id": data["id"],
                "torch": release.version,
                "variant": release.variant,
                "python": data["python"],
                "label": data["label"],
                **sdk,
                **({"build": data["build"]} if "build" in data else {}),
            }
        )
        if data["id"] != key.id:
            raise ValueError(f"id: {data['id']!r:.80} is not {key.id!r}, the id its release, Python and SDK make")
        latest = data.get("latest")
        return cls(
            key,
            Status(data["status"]),
            data["requirement"],
            wheel=WheelRecord.from_dict(data.get("wheel")),
            sdk_wheel=WheelRecord.from_dict(data.get("sdk_wheel")),
            smoke=SmokeCounts(**data["smoke"]) if data.get("smoke") else None,
            failed_step=data.get("failed_step"),
            error=data.get("error"),
            log=data.get("log"),
            failure=data.get("failure"),
            recorded=data.get("recorded"),
            latest=Attempt(
                Status(latest["status"]),
                latest.get("recorded"),
                latest.get("failed_step"),
                latest.get("failure"),
            )
            if latest
            else None,
            features=tuple(
                sorted((str(k), str(v)) for k, v in keyed_features(data.get("features", {}), titles or {}).items())
            ),
            off_site=data.get("off_site", False) is True,
            deep=DeepShown.from_dict(data["deep"]) if data.get("deep") else None,
        )


@dataclass(frozen=True)
class FeatureSupport:
    state: FeatureState
    note: str = ""  # which SDK versions have it (partial), or why not


@dataclass(frozen=True)
class Release:
    key: str
    minor: str
    version: str
    variant: str
    torch_requirement: str  # what pip installs: 2.13.0+cpu
    wheel_source: str  # registry | find-links ...
    pythons: tuple[str, ...]  # Pythons its published torch wheels support (the registry's answer)
    features: dict[str, FeatureSupport] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.version} ({self.variant})"


@dataclass(frozen=True)
class SdkColumn:
    """One SDK version of the table: its id part (the column's key, e.g. drv2) and its version."""

    tag: str
    version: str


@dataclass(frozen=True)
class SdkInfo:
    """The project's SDK as the published table names it."""

    kind: SdkKind
    name: str  # tables and notes ("driver")
    title: str  # the install page's selector ("driver API")
    distribution: str = ""  # a wheel SDK's distribution, installed with the plugin wheel

    @property
    def publishes_wheels(self) -> bool:
        return self.kind == SdkKind.WHEEL


NO_SDK = SdkColumn("", "")  # the one column of a project without an SDK


@dataclass(frozen=True)
class CompatTable:
    plugin: str
    plugin_version: str
    sdk: SdkInfo | None  # None: the project has no SDK
    pythons: tuple[str, ...]
    sdks: tuple[SdkColumn, ...]  # empty without an SDK
    releases: tuple[Release, ...]
    cells: tuple[CompatCell, ...]
    site_url: str = ""  # where the site is served; empty: unknown (docs show <site>, the page uses its own URL)
    # How the wheels name torch (matrix.yaml's check.torch-pin): with none, nothing ties a wheel to its torch release,
    # so only a release's own index (or an exact pin) gives a user the wheel built for their torch.
    torch_pin: TorchPin = TorchPin.RELEASE_LINE
    # Of plugin and SDK distribution, those the project owns on the public index (publish.own-names): no look-alike.
    own_names: tuple[str, ...] = ()
    schema_version: int = COMPAT_SCHEMA_VERSION
    # Feature key -> the title the pages show (matrix.yaml's smoke.features); a key without one shows its words.
    feature_titles: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def _by_place(self) -> dict[tuple[str, str, str], CompatCell]:
        return {(c.release, c.python, c.sdk): c for c in self.cells}

    @cached_property
    def _releases(self) -> dict[str, Release]:
        return {r.key: r for r in self.releases}

    def cell(self, release: str, python: str, sdk: str = "") -> CompatCell | None:
        return self._by_place.get((release, python, sdk))

    @cached_property
    def _by_id(self) -> dict[str, CompatCell]:
        return {c.id: c for c in self.cells}

    def deep_where(self, cell: CompatCell) -> str:
        """Where the cell's build ran its deep tier, as a table names it: "" on the cell itself, its Python on a
        cell of the same release and SDK version, else the cell's id."""
        if cell.deep is None or cell.deep.cell == cell.id:
            return ""
        ran = self._by_id.get(cell.deep.cell)
        if ran is not None and (ran.release, ran.sdk) == (cell.release, cell.sdk):
            return f"Python {ran.python}"
        return cell.deep.cell

    @property
    def columns(self) -> tuple[SdkColumn, ...]:
        """The SDK axis of the grid: its versions, or the one NO_SDK column."""
        return self.sdks or (NO_SDK,)

    def sdk_version(self, tag: str) -> str:
        """The version of an SDK column (its id part), as the grid and the selector show it."""
        return next((c.version for c in self.sdks if c.tag == tag), tag)

    def sdk_short(self, tag: str) -> str:
        """An SDK column as notes name it: the shortest prefix of its version no other column has ("2" for 2.2)."""
        return self._sdk_shorts.get(tag, tag) if tag else ""

    @cached_property
    def _sdk_shorts(self) -> dict[str, str]:
        versions = [Version(c.version) for c in self.sdks]
        return {c.tag: shortest_prefix(Version(c.version), versions) for c in self.sdks}

    def grid_rows(self) -> Iterator[tuple[Release, SdkColumn, list[CompatCell | None]]]:
        """Rows release x SDK version of the table, one entry per Python (None: not in the matrix); an SDK version
        that a release has no cell for gives no row."""
        for release in self.releases:
            for column in self.columns:
                cells = [self.cell(release.key, python, column.tag) for python in self.pythons]
                if any(cells):
                    yield release, column, cells

    def release(self, key: str) -> Release:
        return self._releases[key]

    def feature_title(self, key: str) -> str:
        return self.feature_titles.get(key) or default_title(key)

    def features_shown(self) -> list[tuple[str, str]]:
        """The (key, title) of every feature a release has, in the order of their titles."""
        keys = {name for release in self.releases for name in release.features}
        return sorted(((k, self.feature_title(k)) for k in keys), key=lambda kt: (kt[1].casefold(), kt[0]))

    def to_dict(self) -> dict[str, Any]:
        skip = ("sdk", "sdks", "releases", "cells")
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        data["pythons"] = list(self.pythons)
        data["sdk"] = None if self.sdk is None else asdict(self.sdk)
        data["sdks"] = [asdict(d) for d in self.sdks]
        data["releases"] = [asdict(r) for r in self.releases]
        data["cells"] = [c.to_dict() for c in self.cells]
        if self.torch_pin == TorchPin.RELEASE_LINE:  # the default: tables written before the field read the same
            del data["torch_pin"]
        else:
            data["torch_pin"] = str(self.torch_pin)
        if self.own_names:  # likewise: absent when empty
            data["own_names"] = list(self.own_names)
        else:
            del data["own_names"]
        if self.feature_titles:
            data["feature_titles"] = dict(sorted(self.feature_titles.items()))
        else:  # tables written before titles read the same
            del data["feature_titles"]
        return data

    def to_json(self) -> str:
        return self._json

    @cached_property
    def _json(self) -> str:
        """The committed docs' form: indented, one line per cell, so a change reads as a diff of the cells it
        touches. json's indenting encoder is pure Python (seconds for 10 000 cells): each cell is encoded by the C
        encoder on its own line instead."""
        data = self.to_dict()
        cells = data.pop("cells")
        rest = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)
        lines = ",\n".join(
            "    " + json.dumps(c, sort_keys=True, ensure_ascii=False, separators=(", ", ": ")) for c in cells
        )
        listed = f'"cells": [\n{lines}\n  ]' if cells else '"cells": []'
        return "{\n  " + listed + ("," + rest[1:] if len(rest) > 2 else "\n}") + "\n"

    def compact_json(self) -> str:
        """The same table without indentation, for the site: json's C encoder only runs without an indent (the
        indented form of 10 000 cells took seconds)."""
        return self._compact

    @cached_property
    def _compact(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompatTable:
        if data.get("schema_version") == 1:
            data = schema1.migrate_table(data)
        if data.get("schema_version") != COMPAT_SCHEMA_VERSION:
            raise ValueError(f"compatibility schema {data.get('schema_version')} is not {COMPAT_SCHEMA_VERSION}")
        if not isinstance(data.get("feature_titles", {}), dict):
            raise ValueError("feature_titles: not an object")
        titles = dict(data.get("feature_titles", {}))
        releases = tuple(
            Release(
                **{
                    **r,
                    "pythons": tuple(r["pythons"]),
                    "features": {
                        k: FeatureSupport(FeatureState(v["state"]), v.get("note", ""))
                        for k, v in keyed_features(r["features"], titles).items()
                    },
                }
            )
            for r in data["releases"]
        )
        sdks = tuple(SdkColumn(**d) for d in data["sdks"])
        sdk = data.get("sdk")
        by_key = {r.key: r for r in releases}
        by_tag = {d.tag: d for d in sdks}
        keys = KeyParser()
        cells = tuple(CompatCell.from_dict(c, by_key, by_tag, keys, titles) for c in data["cells"])
        return cls(
            plugin=data["plugin"],
            plugin_version=data["plugin_version"],
            sdk=SdkInfo(**{**sdk, "kind": SdkKind(sdk["kind"])}) if sdk else None,
            pythons=tuple(data["pythons"]),
            sdks=sdks,
            releases=releases,
            cells=cells,
            site_url=data.get("site_url", ""),
            torch_pin=TorchPin(data.get("torch_pin", TorchPin.RELEASE_LINE)),
            own_names=tuple(data.get("own_names", ())),
            feature_titles=titles,
        )

    @classmethod
    def from_json(cls, text: str) -> CompatTable:
        return cls.from_dict(json.loads(text))


def sdk_info(matrix: Matrix) -> SdkInfo | None:
    sdk = matrix.sdk
    if sdk is None:
        return None
    return SdkInfo(sdk.kind, sdk.name, sdk.title, sdk.distribution if sdk.builds_wheel else "")


def available_from_table(table: CompatTable, matrix: Matrix) -> dict[TorchRelease, set[Python]]:
    """The registry's answers as recorded in the table, to re-expand the matrix offline."""
    recorded = {r.key: r for r in table.releases}
    return {
        rel: {Python.parse(p) for p in recorded[release_key(rel.minor, rel.variant)].pythons}
        for rel in matrix.torch
        if release_key(rel.minor, rel.variant) in recorded
    }
