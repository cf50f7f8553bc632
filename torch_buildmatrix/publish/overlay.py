"""The table made from a run: each cell of the matrix joined with its newest record of the current plugin version
(build_table), and a run's cells laid over the live or committed table (overlay_table), keeping what the run did not
rebuild."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from packaging.utils import InvalidWheelFilename
from packaging.version import InvalidVersion, Version

from torch_buildmatrix.builder.records.model import CellResult
from torch_buildmatrix.builder.tiers import combined_features
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.table import (
    Attempt,
    CompatCell,
    CompatTable,
    DeepShown,
    FeatureSupport,
    Release,
    SdkColumn,
    release_key,
    sdk_info,
)
from torch_buildmatrix.util.wheelname import parse_wheel
from torch_buildmatrix.util.when import utc_iso
from torch_buildmatrix.vocab import FailureClass, FeatureState, Status


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
    keys_shown = {name for r in releases for name in r.features} | {name for c in compat for name, _ in c.features}
    titles = {k: t for _name, base, _ in same_version for k, t in base.feature_titles.items()}
    titles |= matrix.contract.smoke.feature_titles  # the project's own word on its features wins
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
        own_names=matrix.contract.publish_own_names,
        feature_titles={k: titles[k] for k in sorted(keys_shown) if k in titles},
    )
    return table, origins
