"""Cell and build records, through the real writer (ResultStore.save) and back through the real reader: whatever
free text a failure carries (any characters, any length), the record reads back, the text within the reader's
limits and kept exactly when it fits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_wheels import cell_of, cell_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from torch_buildmatrix.builder.records.fields import LIMITS
from torch_buildmatrix.builder.records.model import BuildResult
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.errors import RecordError
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.vocab import RunnerName, WheelSourceKind

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


# Values a record's fields may be handed from outside the tool: a smoke suite's features file, torch's build facts,
# a failure's text. Any text, markup, newlines, very long, nested deep.
hostile_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["<script>", "a\nb", "passed\x00", "not available", "passed: ok", "failed", " ", "x" * 3000]),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=30,
)


def _on_disk(store: ResultStore) -> dict[str, bytes]:
    return {p.relative_to(store.directory).as_posix(): p.read_bytes() for p in store.directory.rglob("*.json")}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    features=st.dictionaries(hostile_text, hostile_text, max_size=4),
    torch_build=st.dictionaries(hostile_text, json_values, max_size=3),
    python=hostile_text,
)
def test_a_record_its_reader_would_refuse_is_never_written(
    tmp_path_factory: pytest.TempPathFactory, features: dict[str, str], torch_build: dict[str, Any], python: str
) -> None:
    """Cell and build records are read back whole by the reader before they are written: either the record reads back
    as written, or the writer refuses (RecordError, exit 7) and the record already on disk is kept byte for byte."""
    wheels = tmp_path_factory.mktemp("wheels")
    store = ResultStore(wheels / "results")
    cell = cell_result(CELL, "failed", wheels_dir=wheels)
    build = BuildResult(CELL.build, "h", {}, RunnerName.LOCAL, python="3.11")
    store.save(cell)
    store.save_build(build)
    kept = _on_disk(store)
    cell.features, cell.torch_build = features, torch_build
    build.torch_build, build.python = torch_build, python
    saves: list[tuple[Callable[[], None], Callable[[], object]]] = [
        (lambda: store.save(cell), lambda: store.load(CELL.id)),
        (lambda: store.save_build(build), lambda: store.load_build(build.id)),
    ]
    for save, load in saves:
        try:
            save()
        except RecordError as exc:
            assert "not written: the record would not read back" in str(exc)
            assert _on_disk(store) == kept
        else:
            assert load() is not None
            kept = _on_disk(store)


def test_hostile_features_of_a_smoke_suite_never_reach_a_record(tmp_path: Path) -> None:
    """A suite's features file named a feature `<b>x</b>` and one with a newline: the record was written, then refused
    on every later command (exit 7). Now the report is refused whole, naming each key that breaks the rule (the smoke
    step fails with that: tests/unit/test_feature_keys.py); a valid report is recorded and reads back."""
    import json

    from torch_buildmatrix.builder.smoke import read_features

    features = tmp_path / "features.json"
    features.write_text(
        json.dumps({"<b>x</b>": "passed", "two\nlines": "passed", "autograd": "passed", "amp": "maybe", "fft": 3})
    )
    with pytest.raises(ValueError) as raised:
        read_features(features)
    for problem in (
        "'<b>x</b>' is not a feature key",
        "'two\\nlines' is not a feature key",
        "'maybe' is not an outcome",
    ):
        assert problem in str(raised.value), str(raised.value)
    assert "fft: expected a string" in str(raised.value)
    features.write_text(json.dumps({"autograd": "passed"}))
    store = ResultStore(tmp_path / "results")
    result = cell_result(CELL, "passed", features=read_features(features))
    store.save(result)
    back = store.load(CELL.id)
    assert back is not None and back.features == {"autograd": "passed"}
