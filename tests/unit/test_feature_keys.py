"""Smoke features are named by snake_case keys and shown by titles: matrix.yaml's smoke.features gives the titles,
the pages render them; a suite's report with any other key fails the smoke step, naming the file and the key; records
and tables written when features were named by phrases still read, the phrase becoming the key's title."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from fake_wheels import cell_of, cell_result
from packaging.version import Version

from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.runners.base import CellOutput, SmokeRun
from torch_buildmatrix.builder.smoke import read_features
from torch_buildmatrix.builder.tiers import judge_deep
from torch_buildmatrix.builder.verdicts import judge_smoke
from torch_buildmatrix.errors import MatrixError, StepFailed
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.markdown import features_table
from torch_buildmatrix.publish.overlay import build_table, overlay_table
from torch_buildmatrix.publish.page import features_html
from torch_buildmatrix.publish.tableparse import parse_table
from torch_buildmatrix.util.features import default_title, is_feature_key, legacy_key
from torch_buildmatrix.vocab import FailureClass, TierStatus, WheelSourceKind

from conftest import REPO, VALID, WriteMatrix

PUBLISHED = REPO / "tests" / "fixtures" / "published" / "compatibility.json"  # written by plugin 0.3.0: phrases


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("host_allocator", "host_allocator"),
        ("distributed", "distributed"),
        ("opinfo2_dtypes", "opinfo2_dtypes"),
        ("named tensors", "named_tensors"),
        ("any Python (py3-none wheel)", "any_python_py3_none_wheel"),
        ("CUDA dtypes", "cuda_dtypes"),
        ("backend metadata in FakeTensor", "backend_metadata_in_faketensor"),
        ("2d ops", None),  # a key starts with a letter
        ("<b>ops</b>", None),  # markup never was a name
        ("ops\nx", None),
        ("", None),
        ("_", None),
    ],
)
def test_a_phrase_of_older_records_reads_as_its_key(name: str, key: str | None) -> None:
    assert legacy_key(name) == key


@pytest.mark.parametrize("key", ["Named", "named tensors", "named__tensors", "_named", "named_", "2d", "x" * 81])
def test_what_is_not_a_key(key: str) -> None:
    assert not is_feature_key(key)


def test_default_title_is_the_keys_words() -> None:
    assert default_title("host_allocator") == "Host allocator" and default_title("ops") == "Ops"


def _report(tmp_path: Path, features: object) -> Path:
    path = tmp_path / "features.json"
    path.write_text(json.dumps(features))
    return path


def test_a_suite_report_with_snake_case_keys_reads(tmp_path: Path) -> None:
    path = _report(tmp_path, {"host_allocator": "passed", "distributed": "not available: needs torch 2.13"})
    assert read_features(path) == {"host_allocator": "passed", "distributed": "not available: needs torch 2.13"}
    assert read_features(tmp_path / "missing.json") == {}


@pytest.mark.parametrize(
    ("features", "problem"),
    [
        ({"named tensors": "passed"}, "'named tensors' is not a feature key (a snake_case key"),
        ({"Ops": "passed"}, "'Ops' is not a feature key"),
        ({"ops": "exploded"}, "'exploded' is not an outcome"),
        (["ops"], "not a JSON object of features (a list)"),
    ],
)
def test_a_suite_report_with_another_key_fails_the_smoke_step_naming_file_and_key(
    tmp_path: Path, features: object, problem: str
) -> None:
    (tmp_path / "junit.xml").write_text('<testsuite tests="3" failures="0" errors="0" skipped="0"></testsuite>')
    run = SmokeRun(tmp_path / "junit.xml", _report(tmp_path, features))
    with pytest.raises(StepFailed) as caught:
        judge_smoke(run, CellOutput())
    message = caught.value.message
    assert caught.value.step == "smoke" and message.startswith("the suite's feature report (features.json)")
    assert problem in message and str(tmp_path) not in message  # published: no temporary path in it
    # The deep tier's report is held to the same: its tier fails (every cell of the build with it).
    deep = judge_deep(run, "torch2.13-cpu-cp311", 1.0)
    assert deep.status == TierStatus.FAILED and deep.failure_class == FailureClass.DETERMINISTIC
    assert deep.error == message and deep.features == {}


def test_a_broken_report_after_a_timeout_is_the_timeouts_failure(tmp_path: Path) -> None:
    (tmp_path / "features.json").write_text('{"ops": "pas')  # killed while writing
    timeout = StepFailed("smoke", "timed out", failure_class=FailureClass.TRANSIENT)
    with pytest.raises(StepFailed) as caught:
        judge_smoke(SmokeRun(tmp_path / "junit.xml", tmp_path / "features.json", timeout), CellOutput())
    assert caught.value is timeout


RELEASE = TorchRelease(Version("2.13.0"), "cpu", WheelSource(WheelSourceKind.FIND_LINKS, "/wheels"), None, ())
CELL = cell_of(RELEASE, "3.11", "2.1")


def test_a_record_of_phrases_reads_with_keys_and_one_of_neither_kind_is_refused(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.save(cell_result(CELL, features={"events": "passed"}))
    path = tmp_path / "cells" / f"{CELL.id}.json"
    record = json.loads(path.read_text())
    record["features"] = {"named tensors": "passed", "any Python (py3-none wheel)": "passed", "events": "passed"}
    record["deep"] = {"cell": CELL.id, "status": "passed", "features": {"opinfo CUDA dtypes": "passed: 3/3"}}
    path.write_text(json.dumps(record))
    loaded = store.load(CELL.id)
    assert loaded is not None
    assert loaded.features == {"named_tensors": "passed", "any_python_py3_none_wheel": "passed", "events": "passed"}
    assert loaded.deep is not None and loaded.deep.features == {"opinfo_cuda_dtypes": "passed: 3/3"}
    store.save(loaded)  # written back with keys, it reads the same
    assert store.load(CELL.id) == loaded
    for features, problem in [
        ({"named tensors": "passed", "named_tensors": "failed"}, "names the feature 'named_tensors' a second time"),
        ({"ops!": "passed"}, "'ops!' is not a feature key"),
    ]:
        record["features"] = features
        path.write_text(json.dumps(record))
        with pytest.raises(Exception, match=re.escape(problem)) as raised:
            store.load(CELL.id)
        assert str(path) in str(raised.value)


def test_the_table_plugin_0_3_0_published_reads_with_keys_and_its_phrases_as_titles() -> None:
    text = PUBLISHED.read_text(encoding="utf-8")
    assert '"named tensors"' in text and "feature_titles" not in text
    table = parse_table(text)
    keys = {k for r in table.releases for k in r.features} | {k for c in table.cells for k, _ in c.features}
    assert keys and all(is_feature_key(k) for k in keys)
    assert "named_tensors" in keys and "any_python_py3_none_wheel" in keys
    assert table.feature_titles["any_python_py3_none_wheel"] == "any Python (py3-none wheel)"
    assert "events" not in table.feature_titles  # a key of then has no title but its words
    assert parse_table(table.to_json()) == table  # whatever is read back is written and read the same
    docs, page = features_table(table), features_html(table)
    assert "| any Python (py3-none wheel) |" in docs and "| Events |" in docs
    assert '<tr data-feature="named_tensors"><th title="named_tensors">named tensors</th>' in page


@pytest.mark.parametrize(
    ("titles", "problem"),
    [
        ({"named tensors": "Named"}, "feature_titles: 'named tensors' is not a feature key"),
        ({"ops": "a\nb"}, "feature_titles.ops: 'a\\nb' holds a newline or a control character"),
        ({"ops": "x" * 201}, "is 201 characters long (at most 200)"),
        ({"ops": 3}, "feature_titles.ops: 3 is not a text"),
    ],
)
def test_a_table_with_a_bad_title_is_refused_naming_the_key(titles: dict[str, object], problem: str) -> None:
    data = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    data["feature_titles"] = titles
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_table(json.dumps(data))


TITLED = VALID + 'smoke:\n  features:\n    cuda_dtypes: "CUDA\'s dtypes"\n    events: "Events & timing"\n'


def test_matrix_titles_are_what_the_page_and_the_docs_show(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(TITLED))
    assert dict(matrix.contract.smoke.feature_titles) == {"cuda_dtypes": "CUDA's dtypes", "events": "Events & timing"}
    available = {r: {Python.parse("3.11")} for r in matrix.torch}
    cells = {c.id: c for c in expand(matrix, available)}
    features = {"cuda_dtypes": "passed", "host_allocator": "not available: needs torch 2.9"}
    table = build_table(
        matrix, list(cells.values()), [cell_result(cells["torch2.13-cpu-cp311-drv2"], features=features)], available
    )
    assert dict(table.feature_titles) == {"cuda_dtypes": "CUDA's dtypes"}  # only the features the table shows
    docs, page = features_table(table), features_html(table)
    assert [line.split(" | ")[0] for line in docs.splitlines()[2:4]] == ["| CUDA's dtypes", "| Host allocator"]
    assert '<th title="cuda_dtypes">CUDA&#x27;s dtypes</th>' in page
    assert '<th title="host_allocator">Host allocator</th>' in page
    # A table published before: its titles stand where the project declares none, the project's win where it does.
    base = replace(table, feature_titles={"host_allocator": "Pinned memory", "cuda_dtypes": "CUDA dtypes"})
    again, _ = overlay_table(matrix, list(cells.values()), [], available, bases=[("live", base)])
    assert dict(again.feature_titles) == {"cuda_dtypes": "CUDA's dtypes", "host_allocator": "Pinned memory"}


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("Named Tensors: Named", "smoke.features.Named Tensors: feature key str 'Named Tensors' is not a snake"),
        ("named-tensors: Named", "smoke.features.named-tensors: feature key str 'named-tensors' is not a snake"),
        (f"{'x' * 81}: Long", f"smoke.features.{'x' * 81}: '{'x' * 81}' is not a feature key"),
        ('named_tensors: "a\\nb"', "smoke.features.named_tensors: the title 'a\\nb' holds a newline"),
    ],
)
def test_a_matrix_title_for_no_key_is_an_error_naming_file_line_and_key(
    write_matrix: WriteMatrix, entry: str, problem: str
) -> None:
    path = write_matrix(VALID + f"smoke:\n  features:\n    {entry}\n")
    with pytest.raises(MatrixError) as raised:
        load_matrix(path)
    [found] = [str(p) for p in raised.value.problems]
    assert found.startswith(f"{path}:25: ") and problem in found, found


def _suite_keys() -> set[str]:
    """Every key plugin/tests marks a test with (@pytest.mark.feature("key"), as a decorator or in pytestmark)."""
    keys = set()
    for path in (REPO / "plugin" / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "feature"
                and node.args
            ):
                arg = node.args[0]
                assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), f"{path}: a key that is no text"
                keys.add(arg.value)
    return keys


def test_torch_emus_suite_reports_keys_and_its_matrix_titles_name_only_those() -> None:
    keys = _suite_keys()
    assert {"distributed", "profiler", "host_allocator", "named_tensors"} <= keys  # it read the suite
    assert sorted(k for k in keys if not is_feature_key(k)) == []
    titles = load_matrix(REPO / "matrix.yaml").contract.smoke.feature_titles
    assert sorted(set(titles) - keys) == []  # a title of a feature the suite no longer reports is stale
