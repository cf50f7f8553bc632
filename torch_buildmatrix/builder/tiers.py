"""Test tiers (smoke.tiers): judges a build's deep tier, and settles its cells by it.

The deep tier runs once per build, on its deep cell (model/builds.py deep_cell), after that cell's quick suite. What
it found is the build's: every cell of the build carries it in its record, and a deep tier that failed fails every
cell of the build (failed_step `deep`), whichever job or machine tested them. `settle` is the one place that says how;
the engine calls it at the end of a run, `merge-results` after merging the trees of the fan-out's jobs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from torch_buildmatrix.builder.records.model import BuildResult, CellResult, TierResult
from torch_buildmatrix.builder.runners.base import SmokeRun
from torch_buildmatrix.builder.smoke import read_features, read_junit
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.vocab import FailureClass, Status, Step, TierStatus


def judge_deep(run: SmokeRun, cell_id: str, seconds: float) -> TierResult:
    """What the deep tier's pytest run found: passed, failed, or not run (every selected test skipped, or none
    selected: nothing was checked, so never "passed"). A transient failure (a timeout, a signal) is raised as it is,
    as the deep step's: the counts so far say nothing about the wheel."""
    counts = read_junit(run.junit)
    if run.failure is not None and run.failure.failure_class == FailureClass.TRANSIENT:
        failure = run.failure
        raise StepFailed(Step.DEEP, failure.message, failure.log_tail, failure.failure_class, failure.cause)
    try:
        features = read_features(run.features)
    except ValueError as exc:
        return TierResult(cell_id, TierStatus.FAILED, counts, {}, str(exc), FailureClass.DETERMINISTIC, seconds)
    ran = counts.passed + counts.failed + counts.errors
    # Nothing ran: "not run" when pytest passed (every test skipped) or found none to run (exit code 5); pytest that
    # could not start (a usage or configuration error, exit code 4) failed.
    if ran == 0 and (run.failure is None or _pytest_exit_code(run) == NO_TESTS_COLLECTED):
        return TierResult(cell_id, TierStatus.NOT_RUN, counts, features, None, None, seconds)
    if run.failure is None and counts.failed == 0 and counts.errors == 0:
        return TierResult(cell_id, TierStatus.PASSED, counts, features, None, None, seconds)
    detail = f" ({run.detail})" if run.detail else ""
    error = f"{counts.failed} failed, {counts.errors} errors, {counts.passed} passed{detail}"
    return TierResult(cell_id, TierStatus.FAILED, counts, features, error, FailureClass.DETERMINISTIC, seconds)


NO_TESTS_COLLECTED = 5  # pytest's exit code when the selection holds no test
_EXIT_CODE = re.compile(r"(?:pytest )?exit code (\d+)")


def _pytest_exit_code(run: SmokeRun) -> int | None:
    """pytest's exit code, as the runner's failure says it ("exit code 5: ...", "pytest exit code 5")."""
    for text in (run.detail, run.failure.message if run.failure is not None else ""):
        found = _EXIT_CODE.match(text)
        if found:
            return int(found.group(1))
    return None


def deep_failure_message(build_id: str, deep: TierResult) -> str:
    return f"the deep tier of build {build_id} failed on cell {deep.cell}: {deep.error or 'no error recorded'}"


def settle(build_id: str, deep: TierResult | None, cells: Iterable[CellResult]) -> list[CellResult]:
    """The build's cells as its deep tier leaves them (each carrying it; a deep tier that failed fails the others,
    one that did not gives back a pass it had taken); returns the records that change, as new objects.

    `cells`: records of the build's current wheel only (a stale record is another wheel's). The deep cell's own
    record is judged by its own run: it only gets `deep` set."""
    out = []
    for cell in cells:
        settled = _settled(build_id, deep, cell)
        if settled != cell:
            out.append(settled)
    return out


def _settled(build_id: str, deep: TierResult | None, cell: CellResult) -> CellResult:
    if deep is not None and cell.id == deep.cell:
        return replace(cell, deep=deep)
    failed_by_deep = cell.status == Status.FAILED and cell.failed_step == Step.DEEP
    if deep is not None and deep.status == TierStatus.FAILED:
        if cell.status == Status.PASSED or failed_by_deep:
            return replace(
                cell,
                deep=deep,
                status=Status.FAILED,
                failed_step=str(Step.DEEP),
                error=deep_failure_message(build_id, deep),
                error_tail=None,
                failure_class=deep.failure_class or FailureClass.DETERMINISTIC,
                cause=None,
            )
        return replace(cell, deep=deep)
    if failed_by_deep:  # failed by an earlier deep tier of the same wheel, which no longer fails
        return replace(
            cell,
            deep=deep,
            status=Status.PASSED,
            failed_step=None,
            error=None,
            error_tail=None,
            failure_class=None,
            cause=None,
        )
    return replace(cell, deep=deep)


def settle_records(
    cells: Iterable[CellResult], builds: Iterable[BuildResult]
) -> tuple[list[CellResult], list[BuildResult]]:
    """Settle every build of a merged tree by the deep tier its deep cell's record carries (found by the record: the
    deep cell's `deep` names the cell itself, so no matrix is needed): the cell and build records that change.

    Only the records of the build's current wheel (the deep cell's) are settled; a build whose deep cell's record is
    not in the tree is left as it is (its cells keep what they carry)."""
    by_build: dict[str, list[CellResult]] = {}
    for cell in cells:
        by_build.setdefault(cell.cell.build.id, []).append(cell)
    made = {b.id: b for b in builds}
    changed_cells: list[CellResult] = []
    changed_builds: list[BuildResult] = []
    for build_id, members in sorted(by_build.items()):
        ran = [c for c in members if c.deep is not None and c.deep.cell == c.id and c.wheel is not None]
        if len(ran) != 1:
            continue
        deep_record = ran[0]
        current = [c for c in members if c.wheel == deep_record.wheel]
        changed_cells += settle(build_id, deep_record.deep, current)
        build = made.get(build_id)
        if build is not None and build.wheel == deep_record.wheel and build.deep != deep_record.deep:
            changed_builds.append(replace(build, deep=deep_record.deep))
    return changed_cells, changed_builds


def unsettled(result: CellResult | BuildResult) -> CellResult | BuildResult:
    """A record as its own job wrote it, before `settle` gave it its build's deep tier: what `merge-results` compares
    when two trees hold a record of one id (the merged tree's settled one and a job's own agree)."""
    if isinstance(result, BuildResult):
        return replace(result, deep=None)
    if result.deep is None or result.deep.cell == result.id:
        return result
    if result.status == Status.FAILED and result.failed_step == Step.DEEP:
        result = replace(
            result, status=Status.PASSED, failed_step=None, error=None, error_tail=None, failure_class=None, cause=None
        )
    return replace(result, deep=None)


def combined_features(own: dict[str, str], deep: TierResult | None) -> dict[str, str]:
    """A cell's features with its build's deep tier's: a feature failed in either is failed; passed in either (and
    failed in neither) is passed, with the deep tier's detail where it passed there; else the cell's own word."""
    if deep is None:
        return dict(own)
    out = dict(own)
    for name, outcome in deep.features.items():
        mine = out.get(name)
        if mine is None or mine == "failed":
            out[name] = outcome if mine is None else mine
        elif outcome == "failed" or outcome.startswith("passed"):
            out[name] = outcome
    return dict(sorted(out.items()))
