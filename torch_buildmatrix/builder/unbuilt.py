"""Records of the cells a run leaves unbuilt (no runner can start for them here): each says why and what to run."""

from __future__ import annotations

import time
from collections.abc import Iterable

from torch_buildmatrix.builder.records.model import CellResult
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.errors import RecordError
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.vocab import RunnerName, Status


def not_built_result(cell: Cell, reason: str, runner: RunnerName) -> CellResult:
    """A cell's record when it was not built: status 'not built', the reason (with the command that fixes it) as its
    error. No inputs hash: the next run builds it whatever its inputs."""
    now = time.time()
    return CellResult(
        cell=cell.key,
        inputs_hash="",
        inputs={},
        runner=runner,
        status=Status.NOT_BUILT,
        error=reason,
        started=now,
        finished=now,
    )


def record_not_built(store: ResultStore, unbuilt: Iterable[tuple[Cell, str]]) -> list[CellResult]:
    """Write a not-built record for each (cell, reason); a cell's passed record stays (its wheels are still good and
    published); a damaged one is replaced. Returns the cells' records."""
    out = []
    for cell, reason in unbuilt:
        try:
            stored = store.load(cell.id)
        except RecordError:
            stored = None
        if stored is not None and stored.status == Status.PASSED:
            out.append(stored)
            continue
        result = not_built_result(cell, reason, RunnerName.DOCKER)
        store.save(result)
        out.append(result)
    return out
