"""A cell recorded as not built (no Docker engine for its image): never up to date, shown as not built, and never
over a passed record (the main command without an engine: tests/integration/test_no_engine.py)."""

from __future__ import annotations

from pathlib import Path

from torch_buildmatrix.builder.planning import up_to_date
from torch_buildmatrix.builder.records.parse import RecordRules
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.unbuilt import not_built_result, record_not_built
from torch_buildmatrix.model.cells import make_cell
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.overlay import compat_cell
from torch_buildmatrix.vocab import RunnerName, Status

from conftest import WriteMatrix


def test_a_not_built_record_is_never_up_to_date_and_the_table_shows_not_built(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    matrix = load_matrix(write_matrix())
    assert matrix.sdk is not None
    cell = make_cell(matrix, matrix.torch[1], Python.parse("3.11"), matrix.sdk.versions[-1])
    store = ResultStore(tmp_path / "results", RecordRules.of(matrix))
    [record] = record_not_built(store, [(cell, "not built: no engine; Start one with `x`")])
    read = store.load(cell.id)
    assert (
        read == record and read.status == Status.NOT_BUILT and read.error == "not built: no engine; Start one with `x`"
    )
    assert not up_to_date(read, read.inputs_hash, tmp_path, needs_sdk_wheel=True)  # the next run builds it
    shown = compat_cell(matrix, cell, read)
    assert shown.status == Status.NOT_BUILT and shown.wheel is None and shown.failed_step is None
    # A passed record is kept: an engine that is down says nothing about the wheel it made.
    passed = not_built_result(cell, "", RunnerName.LOCAL)
    passed.status = Status.PASSED
    store.save(passed)
    assert record_not_built(store, [(cell, "not built: again")]) == [store.load(cell.id)]
    assert store.load(cell.id).status == Status.PASSED  # type: ignore[union-attr]
