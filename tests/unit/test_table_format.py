"""The compatibility table's one format: a table the tool builds from records, with arbitrary free text where records
carry it (a failed cell's error, a requirement), goes through the real writers (`to_json`, the committed docs;
`compact_json`, the site's) and back through the real reader (`parse_table`): the same table, or, past the reader's
limits, a problem `table_problems` names (a publish then refuses to go live with it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_site_publish import CELL, table_of

from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.tableparse import parse_table, table_problems
from torch_buildmatrix.vocab import Status

from conftest import WriteMatrix

texts = st.one_of(st.text(max_size=300), st.integers(0, 20_000).map(lambda n: ('é\n\t"\\\x00' * (n // 6 + 1))[:n]))


@pytest.fixture
def table(write_matrix: WriteMatrix, tmp_path: Path) -> CompatTable:
    return table_of(load_matrix(write_matrix()), tmp_path / "wheels")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    error=texts,
    requirement=texts,
    site_url=st.sampled_from(["", "https://owner.github.io/repo"]),
    own_names=st.lists(st.text(max_size=20), max_size=2).map(tuple),
)
def test_a_table_reads_back_as_written_or_its_problem_is_named(
    table: CompatTable, error: str, requirement: str, site_url: str, own_names: tuple[str, ...]
) -> None:
    failed = next(c for c in table.cells if c.id != CELL)
    cells = tuple(
        dataclasses.replace(c, status=Status.FAILED, failed_step="build", error=error, requirement=requirement)
        if c is failed
        else c
        for c in table.cells
    )
    written = dataclasses.replace(table, cells=cells, site_url=site_url, own_names=own_names)
    problems = table_problems(written)
    for text in (written.to_json(), written.compact_json()):
        if problems:
            with pytest.raises(ValueError):
                parse_table(text)
        else:
            assert parse_table(text) == written
    assert bool(problems) == (len(error) > 16 * 1024 or len(requirement) > 1024)
