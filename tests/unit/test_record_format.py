"""Cell and build records, through the real writer (ResultStore.save) and back through the real reader: whatever
free text a failure carries (any characters, any length), the record reads back, the text within the reader's
limits and kept exactly when it fits."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_wheels import cell_of, cell_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from buildmatrix.builder.records.fields import LIMITS
from buildmatrix.builder.records.store import ResultStore
from buildmatrix.model.matrix import TorchRelease, WheelSource
from buildmatrix.vocab import WheelSourceKind

RELEASE = TorchRelease(Version("2.13.0"), "cpu", WheelSource(WheelSourceKind.FIND_LINKS, "/wheels"), None, ())
CELL = cell_of(RELEASE, "3.11", "2.1")
texts = st.one_of(
    st.none(),
    st.text(max_size=200),
    st.integers(0, 100_000).map(lambda n: ("é\n\t\x00\u2028" * (n // 5 + 1))[:n]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(error=texts, tail=texts)
def test_a_failed_cells_text_always_reads_back(
    tmp_path_factory: pytest.TempPathFactory, error: str | None, tail: str | None
) -> None:
    """An error over 16 KiB (a check listing thousands of undefined symbols) was written, then refused (exit 7)."""
    wheels = tmp_path_factory.mktemp("wheels")
    result = cell_result(CELL, "failed", wheels_dir=wheels)
    result.error, result.error_tail = error, tail
    store = ResultStore(wheels / "results")
    store.save(result)
    back = store.load(CELL.id)
    assert back is not None
    for written, read, key in ((error, back.error, "error"), (tail, back.error_tail, "error_tail")):
        if written is None or len(written) <= LIMITS[key]:
            assert read == written
        else:
            assert read is not None and len(read) <= LIMITS[key] and "characters in all" in read
            assert read.startswith(written[:100]) and read.endswith(written[-100:])


def test_a_record_is_kept_exactly_when_it_fits(tmp_path: Path) -> None:
    result = cell_result(CELL, "failed", wheels_dir=tmp_path)
    result.error = "line one\nline two\twith a tab"
    store = ResultStore(tmp_path / "results")
    store.save(result)
    assert store.load(CELL.id) == result
