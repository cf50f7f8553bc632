"""The compatibility table (CompatTable): the matrix's cells joined with their results, as pure data.

Everything published about compatibility (docs/compatibility.md, README's table, the static site and its
JSON, the wheel index) is rendered from one CompatTable. The table is also committed as
docs/compatibility.json, so the docs re-render identically in a clean clone that has no wheels/ folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property, lru_cache
from typing import Any

from packaging.utils import InvalidWheelFilename
from packaging.version import InvalidVersion, Version

from buildmatrix.builder.records.model import CellResult, SmokeCounts, WheelRecord
from buildmatrix.builder.tiers import combined_features
from buildmatrix.errors import MatrixError
from buildmatrix.model.cellkey import CellKey, KeyParser
from buildmatrix.model.cells import Cell, expand
from buildmatrix.model.contract import TorchPin
from buildmatrix.model.matrix import Matrix, TorchRelease, shortest_prefix
from buildmatrix.model.pythons import Python, installs_on
from buildmatrix.util.wheelname import parse_wheel
from buildmatrix.util.when import utc_iso
from buildmatrix.vocab import FailureClass, FeatureState, SdkKind, Status, TierStatus

# 2: the SDK is general (`sdk`, `sdks`, a cell's `sdk` id part and `sdk_wheel`); tables of 1 (a driver) are read as 2.
COMPAT_SCHEMA_VERSION = 2
SITE_PLACEHOLDER = "{site}"


def release_key(minor: str, variant: str) -> str:
    """The table's key of a torch release, e.g. torch2.13-cpu."""
    return f"torch{minor}-{variant}"


def _wheel_dict(wheel: WheelRecord | None) -> dict[str, str] | None:
    return None if wheel is None else {"filename": wheel.filename, "sha256": wheel.sha256, "path": wheel.path}


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
            data[V1_SDK_WHEEL] = data["sdk_wheel"]
        return data

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        releases: Mapping[str, Release],
        sdks: Mapping[str, SdkColumn],
        keys: KeyParser | None = None,
    ) -> CompatCell:
        """`keys`: the table's KeyParser (each version and Python text parsed once per table)."""
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
            features=tuple(sorted((str(k), str(v)) for k, v in data.get("features", {}).items())),
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
    schema_version: int = COMPAT_SCHEMA_VERSION

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
            data = migrate_v1(data)
        if data.get("schema_version") != COMPAT_SCHEMA_VERSION:
            raise ValueError(f"compatibility schema {data.get('schema_version')} is not {COMPAT_SCHEMA_VERSION}")
        releases = tuple(
            Release(
                **{
                    **r,
                    "pythons": tuple(r["pythons"]),
                    "features": {
                        k: FeatureSupport(FeatureState(v["state"]), v.get("note", "")) for k, v in r["features"].items()
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
        cells = tuple(CompatCell.from_dict(c, by_key, by_tag, keys) for c in data["cells"])
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
        )

    @classmethod
    def from_json(cls, text: str) -> CompatTable:
        return cls.from_dict(json.loads(text))


# Tables of schema 1 were written when every project had a driver: cells named by the driver's API major, ids ending
# -drv<major>, requirements carrying the label, driver wheels under driver/.
V1_SDK = {"kind": "wheel", "name": "driver", "title": "driver API"}
V1_SDK_WHEEL = "driver_wheel"


def migrate_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A schema 1 table in schema 2's form."""
    columns = {d["major"]: {"tag": f"drv{d['major']}", "version": d["api"]} for d in data["drivers"]}
    cells = []
    for old in data["cells"]:
        cell = dict(old)
        cell["sdk"] = columns[cell.pop("driver")]["tag"]
        cell["label"] = str(cell["requirement"]).partition("+")[2]
        if cell.get(V1_SDK_WHEEL) is not None:
            cell["sdk_wheel"] = cell[V1_SDK_WHEEL]
        cells.append(cell)
    out = {k: v for k, v in data.items() if k not in ("drivers", "driver_distribution")}
    sdk = {**V1_SDK, "distribution": data["driver_distribution"]}
    return {**out, "schema_version": 2, "sdk": sdk, "sdks": list(columns.values()), "cells": cells}


def _built_for(plugin_version: Version, result: CellResult) -> bool:
    """Whether the record is of this plugin version: its wheel's, else its inputs' (older records without either
    are taken as current, as before)."""
    try:
        if result.wheel is not None:
            return Version(parse_wheel(result.wheel.filename)[1].public) == plugin_version
        recorded = result.inputs.get("plugin_version")
        return recorded is None or Version(str(recorded)) == plugin_version
    except (InvalidWheelFilename, InvalidVersion):
        return False


def compat_cell(matrix: Matrix, cell: Cell, result: CellResult | None) -> CompatCell:
    """The cell as the table shows it; `result` is the record for its key (a record of an older matrix has another
    key: another torch patch release or SDK version says nothing about this cell, nor does a record of
    another plugin version: its install command would name a wheel the matrix no longer makes)."""
    key = cell.key
    requirement = cell_requirement(matrix, cell)
    if (
        result is None
        or result.cell != key
        or result.status == Status.NOT_BUILT  # a run left it unbuilt (no runner could start)
        or not _built_for(matrix.plugin.version, result)
    ):
        return CompatCell(key, Status.NOT_BUILT, requirement)
    wheel, sdk_wheel = result.wheel, result.sdk_wheel
    needs_sdk_wheel = matrix.sdk is not None and matrix.sdk.builds_wheel
    passed = result.status == Status.PASSED and wheel is not None and (sdk_wheel is not None or not needs_sdk_wheel)
    return CompatCell(
        key,
        Status.PASSED if passed else Status.FAILED,
        requirement,
        wheel=wheel if passed else None,
        sdk_wheel=sdk_wheel if passed and needs_sdk_wheel else None,
        smoke=result.smoke,
        failed_step=None if passed else (result.failed_step or "publish"),
        error=None if passed else result.error,
        log=result.log,
        failure=None if passed else failure_label(result),
        recorded=utc_iso(result.finished or result.started),
        features=tuple(sorted(combined_features(result.features, result.deep).items())),
        deep=DeepShown(result.deep.cell, result.deep.status, result.deep.smoke) if result.deep is not None else None,
    )


def cell_requirement(matrix: Matrix, cell: Cell) -> str:
    return f"{matrix.plugin.distribution}=={matrix.plugin.version}+{cell.key.local_version_label}"


def _attempts(cell: CompatCell) -> list[CompatCell]:
    """A shown cell as the attempts it stands for: the result shown and, after a pass, the failed latest attempt."""
    if cell.status == Status.NOT_BUILT:
        return []
    out = [cell if cell.latest is None and not cell.off_site else replace(cell, latest=None, off_site=False)]
    if cell.latest is not None:
        failed = cell.latest
        out.append(
            CompatCell(
                cell.key,
                Status.FAILED,
                cell.requirement,
                smoke=None,
                failed_step=failed.failed_step,
                failure=failed.failure,
                recorded=failed.recorded,
            )
        )
    return out


def newest_result(candidates: Sequence[CompatCell]) -> CompatCell:
    """Which result a cell shows, from its attempts in any number of sources (first ones win ties): the latest
    attempt when it passed or nothing passed before it; else the last pass, with the failed latest attempt noted.

    So a rebuild that fails (a network blip is enough) never takes a published pass off the table; the next pass
    replaces it.
    """
    latest = candidates[0]
    for candidate in candidates[1:]:
        if (candidate.recorded or "") > (latest.recorded or ""):
            latest = candidate
    if latest.status == Status.PASSED:
        return latest
    passes = [c for c in candidates if c.status == Status.PASSED]
    if not passes:
        return latest
    shown = passes[0]
    for candidate in passes[1:]:
        if (candidate.recorded or "") > (shown.recorded or "") or (
            candidate.recorded == shown.recorded and shown.wheel is None and candidate.wheel is not None
        ):
            shown = candidate
    if (shown.recorded or "") >= (latest.recorded or ""):
        return latest  # no time tells them apart (tables that predate recorded times): the first source's
    status = Status.INTERRUPTED if latest.failure == "interrupted" else Status.FAILED
    return replace(shown, latest=Attempt(status, latest.recorded, latest.failed_step, latest.failure))


def failure_label(result: CellResult) -> str | None:
    """How a failed cell failed, for the docs and the page: None when its record predates failure classes."""
    if result.status == Status.INTERRUPTED:
        return "interrupted"
    if result.failure_class == FailureClass.TRANSIENT:
        return f"transient: {result.cause}" if result.cause else "transient"
    return result.failure_class


def outcome_state(outcome: str) -> str:
    """The state word of a smoke outcome: "passed: 612/640 ops" is passed, with its detail after the colon."""
    return outcome.split(":", 1)[0].strip()


def feature_support(outcomes: Mapping[str, str], sdk_name: str = "") -> FeatureSupport:
    """Aggregate one feature's outcome over the cells of a release, keyed by SDK version ("" without an SDK)."""
    passed = sorted({d for d, o in outcomes.items() if outcome_state(o) == Status.PASSED})
    failed = sorted({d for d, o in outcomes.items() if o == Status.FAILED})
    unavailable = f"{FeatureState.NOT_AVAILABLE}:"
    missing = sorted({o.split(":", 1)[1].strip() for o in outcomes.values() if o.startswith(unavailable)})
    if failed:
        return FeatureSupport(FeatureState.FAILED, f"{sdk_name} {', '.join(failed)}".strip())
    # A passed outcome may carry a detail (the OpInfo pass counts): the table shows the details as the note.
    details = sorted(
        {o.split(":", 1)[1].strip() for o in outcomes.values() if outcome_state(o) == Status.PASSED and ":" in o}
    )
    if passed and len(passed) == len(set(outcomes)):
        return FeatureSupport(FeatureState.AVAILABLE, "; ".join(details))
    if passed:
        return FeatureSupport(FeatureState.PARTIAL, f"{sdk_name} {', '.join(passed)} only")
    return FeatureSupport(FeatureState.NOT_AVAILABLE, "; ".join(missing))


def release_features(
    cells: Iterable[CompatCell], sdk_name: str = "", shorts: Mapping[str, str] | None = None
) -> dict[str, FeatureSupport]:
    """Per feature, its outcome per SDK version (named by `shorts`, by id part: "2" for drv2); a feature that passed
    for any Python counts as passed there."""
    shorts = shorts or {}
    by_feature: dict[str, dict[str, str]] = {}
    for cell in cells:
        version = shorts.get(cell.sdk, "")
        for name, outcome in cell.features:
            known = by_feature.setdefault(name, {})
            if outcome_state(known.get(version, "")) != Status.PASSED:
                known[version] = outcome
    return {name: feature_support(by_feature[name], sdk_name) for name in sorted(by_feature)}


def build_table(
    matrix: Matrix,
    cells: list[Cell],
    results: Iterable[CellResult],
    available_pythons: Mapping[TorchRelease, set[Python]],
    site_url: str = "",
) -> CompatTable:
    """Join the expanded cells with their records; a cell without a (current) record is 'not built'."""
    return overlay_table(matrix, cells, results, available_pythons, site_url=site_url)[0]


def overlay_table(
    matrix: Matrix,
    cells: list[Cell],
    results: Iterable[CellResult],
    available_pythons: Mapping[TorchRelease, set[Python]],
    *,
    site_url: str = "",
    bases: Sequence[tuple[str, CompatTable]] = (),
) -> tuple[CompatTable, dict[str, str]]:
    """This run's records laid over earlier tables (`bases`: the last published one, the committed one, each with a
    name), cell by cell: each cell shows its newest result (newest_result), so results accumulate and a pass stays
    until a newer pass replaces it. Returns the table and, per cell id, the name of the source of the result it shows
    ("records" for this run's, a base's name, or "" for a cell not built).

    A base's cell counts only for the same cell (its key: torch release, variant, Python, SDK version, label) and
    the same plugin version: results of another matrix or version say nothing about this one.
    """
    by_key = {r.cell: r for r in results}
    same_version = [
        (name, base, {c.id: c for c in base.cells})
        for name, base in bases
        if base.plugin == matrix.plugin.distribution and base.plugin_version == str(matrix.plugin.version)
    ]
    compat: list[CompatCell] = []
    origins: dict[str, str] = {}
    for cell in cells:
        requirement = cell_requirement(matrix, cell)
        sourced: list[tuple[str, CompatCell]] = []
        own = compat_cell(matrix, cell, by_key.get(cell.key))
        sourced += [("records", a) for a in _attempts(own)]
        for name, _base, by_id in same_version:
            earlier = by_id.get(cell.id)
            if earlier is not None and earlier.key == cell.key and earlier.requirement == requirement:
                sourced += [(name, a) for a in _attempts(earlier)]
        if not sourced:
            compat.append(own)
            origins[cell.id] = ""
            continue
        shown = newest_result([c for _name, c in sourced])
        compat.append(shown)
        bare = shown if shown.latest is None else replace(shown, latest=None)
        origins[cell.id] = next(name for name, c in sourced if c is bare or c == bare)
    by_release: dict[str, list[CompatCell]] = {}
    for shown in compat:
        if shown.status != Status.NOT_BUILT:
            by_release.setdefault(shown.release, []).append(shown)
    shorts = {v.tag: matrix.sdk.short(v) for v in matrix.sdk.versions} if matrix.sdk is not None else {}
    releases = []
    for release in matrix.torch:
        key = release_key(release.minor, release.variant)
        measured = by_release.get(key, [])
        features = release_features(measured, matrix.sdk.name if matrix.sdk is not None else "", shorts)
        if any(not c.features for c in measured):
            # Cells shown from a table that predates per-cell outcomes: that table's verdicts, updated by the rest.
            for _name, earlier_table, _ in same_version:
                old = next((r for r in earlier_table.releases if r.key == key), None)
                if old is not None:
                    features = {**old.features, **features}
                    break
        releases.append(
            Release(
                key,
                release.minor,
                str(release.version),
                release.variant,
                release.requirement_version,
                release.wheels.describe(),
                tuple(str(p) for p in sorted(available_pythons.get(release, set()))),
                dict(sorted(features.items())),
            )
        )
    table = CompatTable(
        plugin=matrix.plugin.distribution,
        plugin_version=str(matrix.plugin.version),
        sdk=sdk_info(matrix),
        pythons=tuple(str(p) for p in matrix.python),
        sdks=tuple(SdkColumn(v.tag, str(v.version)) for v in matrix.sdk.versions) if matrix.sdk is not None else (),
        releases=tuple(releases),
        cells=tuple(compat),
        site_url=site_url,
        torch_pin=matrix.contract.check.torch_pin,
    )
    return table, origins


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


def stale_problems(table: CompatTable, matrix: Matrix) -> list[str]:
    """Ways the recorded table no longer describes matrix.yaml (so docs/compatibility.json must be regenerated)."""
    problems = []
    if (table.plugin, table.plugin_version) != (matrix.plugin.distribution, str(matrix.plugin.version)):
        problems.append(
            f"plugin {table.plugin} {table.plugin_version} is now {matrix.plugin.distribution} {matrix.plugin.version}"
        )
    declared = [(release_key(r.minor, r.variant), str(r.version)) for r in matrix.torch]
    recorded = [(r.key, r.version) for r in table.releases]
    if declared != recorded:
        problems.append(f"torch releases {recorded} are now {declared}")
        return problems
    try:
        cells = expand(matrix, available_from_table(table, matrix))
    except MatrixError as exc:
        return [*problems, f"matrix.yaml no longer expands with the recorded Pythons: {exc}"]
    expected = [c.id for c in cells]
    if expected != [c.id for c in table.cells]:
        recorded_ids = {c.id for c in table.cells}
        gone = sorted(recorded_ids - set(expected))
        new = sorted(set(expected) - recorded_ids)
        problems.append(
            f"cells changed: {len(gone)} gone ({', '.join(gone[:10])}), {len(new)} new "
            f"({', '.join(new[:10])}), or their order"
        )
    pythons = tuple(str(p) for p in matrix.python)
    sdks = tuple(SdkColumn(v.tag, str(v.version)) for v in matrix.sdk.versions) if matrix.sdk is not None else ()
    if (pythons, sdk_info(matrix), sdks) != (table.pythons, table.sdk, table.sdks):
        problems.append("the matrix's Pythons or SDK (its versions, names or kind) changed")
    return problems


@dataclass(frozen=True)
class InstallChoice:
    """What the page offers for one selector choice: the exact cell, or the nearest one that was built."""

    release: str
    python: str
    sdk: str  # the SDK column chosen (its id part); "" without an SDK
    cell: str | None  # id of the cell whose wheel is installed; None: nothing is installable
    exact: bool
    note: str
    index_command: str = ""  # exact pins from the release's own index (squat-proof with pip and uv)
    find_links_command: str = ""  # the same pins from the release's find-links page
    release_index_command: str = ""  # no pin: the release's own index picks the wheel for the user's Python


@dataclass(frozen=True)
class InstallCommands:
    """The ways to install one cell's wheels (pip syntax; `uv pip install` takes the same arguments)."""

    release_index: str  # plain `pip install <plugin>` from the release's own index: keeps the installed torch
    pinned: str  # exact pins; the versions carry local labels, which the public index cannot host
    find_links: str  # the same pins from the release's find-links page


@lru_cache(maxsize=256)
def _python(text: str) -> Python:
    return Python.parse(text)


def _python_distance(a: str, b: str) -> tuple[int, bool]:
    """How far apart two Pythons of the table are: their minors, then whether one is free-threaded and the other not."""
    pa, pb = _python(a), _python(b)
    return abs(pa.minor - pb.minor) + 100 * abs(pa.major - pb.major), pa.free_threaded != pb.free_threaded


def release_index_url(minor: str, site: str = SITE_PLACEHOLDER) -> str:
    return f"{site}/torch{minor}/simple/"


# Every install command we give is binary-only, for every distribution it installs: never the plugin's sdist from the
# public index (a Python our index has no wheel for), never a dependency built on the user's machine.
ONLY_BINARY = "--only-binary=:all:"


def release_index_command(table: CompatTable, minor: str, site: str = SITE_PLACEHOLDER) -> str:
    """Installs the plugin wheel for the installed torch release and the running Python, and never touches torch."""
    return f"pip install {table.plugin} {ONLY_BINARY} --extra-index-url {release_index_url(minor, site)}"


def any_torch_command(table: CompatTable, site: str = SITE_PLACEHOLDER) -> str | None:
    """One line for whatever torch is installed, from the all-releases index: restating the installed torch as a
    requirement makes pip and uv backtrack to the plugin wheel built for it instead of upgrading torch.

    None when the wheels carry no torch pin (check.torch-pin: none): then every release's wheel admits any torch, the
    installer takes the highest label, and a user of an older torch would get a wheel built for a newer one.

    The version is the installed distribution's, which is what resolvers compare: torch.__version__ can differ
    (2.4.1+cu121 for the registry's 2.4.1), and `pip freeze` prints a URL for a torch installed from a file.
    """
    if table.torch_pin == TorchPin.NONE:
        return None
    installed = "$(python -c \"from importlib.metadata import version; print(version('torch'))\")"
    return f'pip install {table.plugin} "torch=={installed}" {ONLY_BINARY} --extra-index-url {site}/simple/'


def install_commands(table: CompatTable, cell: CompatCell, site: str = SITE_PLACEHOLDER) -> InstallCommands:
    """Commands that install this cell's wheels, never an sdist; the pinned ones can only ever install its wheels."""
    pins = cell.requirement
    if table.sdk is not None and table.sdk.publishes_wheels:
        assert cell.sdk_wheel is not None
        sdk_version = parse_wheel(cell.sdk_wheel.filename)[1]
        pins += f" {table.sdk.distribution}=={sdk_version}"
    minor = table.release(cell.release).minor
    return InstallCommands(
        release_index=release_index_command(table, minor, site),
        pinned=f"pip install {pins} {ONLY_BINARY} --extra-index-url {release_index_url(minor, site)}",
        find_links=f"pip install {pins} {ONLY_BINARY} --find-links {site}/torch{minor}/",
    )


class Installable:
    """The table's installable cells, indexed by SDK column and release position, so that finding the nearest one for
    every selector choice stays linear in the cells (all_choices asks once per release x Python x SDK version)."""

    def __init__(self, table: CompatTable) -> None:
        self.order = {r.key: i for i, r in enumerate(table.releases)}
        self.by_sdk: dict[str, dict[int, list[CompatCell]]] = {}
        self.by_release: dict[int, list[CompatCell]] = {}
        self.wheels: dict[tuple[str, str], set[WheelRecord]] = {}  # (release, SDK column) -> its published wheels
        self.installs: dict[tuple[str, str], bool] = {}  # (wheel filename, Python) -> whether its tags admit it
        for cell in table.cells:
            if cell.installable:
                assert cell.wheel is not None
                self.wheels.setdefault((cell.release, cell.sdk), set()).add(cell.wheel)
                position = self.order[cell.release]
                self.by_sdk.setdefault(cell.sdk, {}).setdefault(position, []).append(cell)
                self.by_release.setdefault(position, []).append(cell)

    def nearest(self, release: str, python: str, sdk: str = "") -> CompatCell | None:
        """Same SDK version first (the machine's SDK is hardest to change), then the closest torch release, then the
        closest Python (the newer one on a tie), then the cell id."""
        pool = self.by_sdk.get(sdk) or self.by_release
        if not pool:
            return None
        wanted = self.order[release]
        for distance in range(len(self.order) + 1):
            found = pool.get(wanted - distance, []) + (pool.get(wanted + distance, []) if distance else [])
            if found:
                return min(
                    found,
                    key=lambda c: (_python_distance(c.python, python), -_python(c.python).minor, c.id),
                )
        return None

    def refusing_wheel(self, release: str, python: str, sdk: str = "") -> WheelRecord | None:
        """The release's published plugin wheel when every one it has in this SDK column refuses `python` by its tags
        (a cp313-cp313 or cp39-abi3 wheel on a free-threaded 3.13t: abi3 does not cover free-threaded builds); None
        when one installs there, or the release has none yet."""
        wheels = self.wheels.get((release, sdk))
        if not wheels or any(self.wheel_installs(w.filename, python) for w in wheels):
            return None
        return min(wheels, key=lambda w: w.filename)

    def wheel_installs(self, filename: str, python: str) -> bool:
        """Whether a wheel's tags admit `python`, asked once per wheel and Python (all_choices asks per choice)."""
        key = (filename, python)
        if key not in self.installs:
            self.installs[key] = installs_on(parse_wheel(filename)[3], _python(python))
        return self.installs[key]


def nearest_cell(table: CompatTable, release: str, python: str, sdk: str = "") -> CompatCell | None:
    """The installable cell closest to the choice (Installable.nearest)."""
    return Installable(table).nearest(release, python, sdk)


def _choice_words(table: CompatTable, release: Release, python: str, sdk: str) -> str:
    """How a note names a choice: torch 2.4.1, Python 3.11[, driver 2.2]."""
    with_sdk = f", {table.sdk.name} {table.sdk_short(sdk)}" if table.sdk is not None else ""
    return f"torch {release.version}, Python {python}{with_sdk}"


def install_choice(
    table: CompatTable,
    release: str,
    python: str,
    sdk: str = "",
    site: str = SITE_PLACEHOLDER,
    *,
    installable: Installable | None = None,
) -> InstallChoice:
    exact = table.cell(release, python, sdk)
    rel = table.release(release)
    if exact is not None and exact.installable:
        commands = install_commands(table, exact, site)
        return InstallChoice(
            release,
            python,
            sdk,
            exact.id,
            True,
            f"tested: {smoke_summary(exact.smoke)}",
            commands.pinned,
            commands.find_links,
            commands.release_index,
        )
    if exact is None:
        why = (
            f"torch {rel.version} publishes no wheel for Python {python}"
            if python not in rel.pythons
            else "excluded by matrix.yaml"
        )
        reason = f"not in the matrix ({why})"
    else:
        reason = str(Status.NOT_BUILT) if exact.status == Status.NOT_BUILT else f"failed in step {exact.failed_step}"
    installable = installable or Installable(table)
    near = installable.nearest(release, python, sdk)
    refused = installable.refusing_wheel(release, python, sdk)
    if refused is not None:
        # Any command would fail on this Python (or install a wheel built for another): none is offered, only why.
        tags = ", ".join(sorted(map(str, parse_wheel(refused.filename)[3])))
        chosen = _python(python)
        kind = f"a free-threaded Python {python}" if chosen.free_threaded else f"Python {python}"
        note = (
            f"{_choice_words(table, rel, python, sdk)}: {reason}. Refused: torch {rel.version}'s wheel "
            f"{refused.filename} ({tags}) does not install on {kind} ({chosen.tag}); pip and uv refuse it there"
        )
        if near is not None:
            nearest = _choice_words(table, table.release(near.release), near.python, near.sdk)
            note += f". Nearest supported choice: {nearest}"
        return InstallChoice(release, python, sdk, None, False, note)
    if near is None:
        note = f"{_choice_words(table, rel, python, sdk)}: {reason}; no wheel is published yet"
        return InstallChoice(release, python, sdk, None, False, note)
    nrel = table.release(near.release)
    commands = install_commands(table, near, site)
    note = (
        f"{_choice_words(table, rel, python, sdk)}: {reason}. "
        f"Nearest supported choice: {_choice_words(table, nrel, near.python, near.sdk)}"
    )
    return InstallChoice(
        release,
        python,
        sdk,
        near.id,
        False,
        note,
        commands.pinned,
        commands.find_links,
        commands.release_index,
    )


def all_choices(table: CompatTable, site: str = SITE_PLACEHOLDER) -> list[InstallChoice]:
    installable = Installable(table)
    return [
        install_choice(table, r.key, p, column.tag, site, installable=installable)
        for r in table.releases
        for p in table.pythons
        for column in table.columns
    ]


def free_threaded_note(table: CompatTable) -> str:
    """What a free-threaded column means ('' when the table has none): the page and the docs say it once."""
    columns = [p for p in table.pythons if _python(p).free_threaded]
    if not columns:
        return ""
    named = ", ".join(f"Python {p}" for p in columns)
    return (
        f"{named}: CPython's free-threaded build (no GIL), a column of its own: a cell there tests the wheel on that "
        "interpreter, and a release's wheel that does not install there is refused, never offered."
    )


def partial_words(table: CompatTable) -> str:
    """What the partial feature mark means: only with the SDK versions named (a project without an SDK has none)."""
    return f"only with the {table.sdk.name}s named" if table.sdk else "only on some of its cells"


def deep_summary(table: CompatTable, cell: CompatCell) -> str:
    """The build's deep tier, for one of its cells: "deep ✓ 120/130 on Python 3.11", "deep not run", "deep ✗"."""
    deep = cell.deep
    if deep is None:
        return ""
    if deep.status == TierStatus.PASSED:
        text = f"deep ✓ {deep.smoke.passed}/{deep.smoke.total}" if deep.smoke else "deep ✓"
    elif deep.status == TierStatus.FAILED:
        text = "deep ✗"
    else:
        text = "deep not run"
    where = table.deep_where(cell)
    return f"{text} on {where}" if where else text


def smoke_summary(smoke: SmokeCounts | None) -> str:
    if smoke is None:
        return "no smoke counts"
    parts = [f"{smoke.passed} passed"] + [
        f"{n} {what}"
        for n, what in ((smoke.failed, "failed"), (smoke.errors, "errors"), (smoke.skipped, "skipped"))
        if n
    ]
    return ", ".join(parts)
