"""Reads a CompatTable from JSON that is not trusted: the live site's compatibility.json (fetched from the network on
CI) and the committed docs/compatibility.json are the base of every publish, so they are checked like records.

Every problem is a ValueError naming the key; callers make it a RecordError (the live site's, exit code 7) or a
DocsError (the committed one) naming the file. Never a traceback, never a partly read table.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.utils import InvalidWheelFilename

from torch_buildmatrix.builder.records.fields import SHA256, UntrustedJSON, load_json
from torch_buildmatrix.builder.records.model import SmokeCounts, WheelRecord
from torch_buildmatrix.publish.table import CompatCell, CompatTable
from torch_buildmatrix.util.features import KEY_RULE, is_feature_key, title_problem
from torch_buildmatrix.util.paths import name_problem, relative_path_problem
from torch_buildmatrix.util.wheelname import parse_wheel
from torch_buildmatrix.util.when import iso_problem
from torch_buildmatrix.vocab import Cause, Status, Step

MAX_TABLE_BYTES = 64 << 20  # a table of 10 000 cells is a few MB
FAILURES = {"deterministic", "interrupted", "transient", *(f"transient: {c}" for c in Cause)}
OUTCOME = re.compile(r"(passed|failed|not available)(: .{1,2000})?|not available.{0,2000}", re.DOTALL)


def parse_table(text: str) -> CompatTable:
    """The table in `text`; raises ValueError saying what is wrong and where."""
    if len(text) > MAX_TABLE_BYTES:
        raise ValueError(f"larger than {MAX_TABLE_BYTES} bytes; not a compatibility table")
    try:
        data = load_json(text)
    except UntrustedJSON as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    try:
        table = CompatTable.from_dict(data)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    problems = table_problems(table)
    if problems:
        raise ValueError("; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
    return table


def read_back_problem(text: str, table: CompatTable) -> str:
    """Why `text`, the JSON written for `table`, would not read back as it through parse_table ("" when it does):
    every writer of a table (the site's, the committed docs') checks this before anything is written."""
    try:
        back = parse_table(text)
    except ValueError as exc:
        return f"does not read back ({exc})"
    return "" if back == table else "reads back different"


def _text(value: Any, key: str, limit: int = 1024) -> str:
    if not isinstance(value, str) or len(value) > limit:
        return f"{key}: expected a string of at most {limit} characters, got {type(value).__name__}"
    return ""


def _wheel(wheel: WheelRecord | None, key: str) -> list[str]:
    if wheel is None:
        return []
    if not isinstance(wheel, WheelRecord):
        return [f"{key}: not a wheel record"]
    problems = [p for p in (_text(wheel.filename, f"{key}.filename", 255), _text(wheel.path, f"{key}.path")) if p]
    if problems:
        return problems
    if problem := relative_path_problem(wheel.path):
        problems.append(f"{key}.path: {wheel.path!r:.80} {problem}")
    elif wheel.path.rsplit("/", 1)[-1] != wheel.filename:
        problems.append(f"{key}.path: {wheel.path!r:.80} does not name {wheel.filename!r:.80}")
    if not (isinstance(wheel.sha256, str) and SHA256.fullmatch(wheel.sha256)):
        problems.append(f"{key}.sha256: not a sha256")
    try:
        parse_wheel(wheel.filename)
    except InvalidWheelFilename as exc:
        problems.append(f"{key}.filename: {exc}")
    return problems


def _features(features: tuple[tuple[str, str], ...], key: str) -> list[str]:
    problems = []
    for name, outcome in features:
        if not is_feature_key(name):
            problems.append(f"{key}: {name!r:.80} is not a feature key ({KEY_RULE} characters)")
        elif not OUTCOME.fullmatch(outcome) or any(ord(ch) < 0x20 for ch in outcome):
            problems.append(f"{key}.{name}: {outcome!r:.60} is not an outcome")
    return problems


def _cell(cell: CompatCell, index: int) -> list[str]:
    key = f"cells[{index}]"
    problems = []
    if cell.status not in (Status.PASSED, Status.FAILED, Status.NOT_BUILT):
        problems.append(f"{key}.status: {cell.status!r} is not passed, failed or not built")
    for name, limit in (("requirement", 1024), ("error", 16 * 1024), ("log", 1024)):
        value = getattr(cell, name)
        if value is not None and (problem := _text(value, f"{key}.{name}", limit)):
            problems.append(problem)
    if isinstance(cell.log, str) and (problem := relative_path_problem(cell.log)):
        problems.append(f"{key}.log: {cell.log!r:.80} {problem}")
    steps = {s.value for s in Step}
    for where, step, failure, recorded in [
        (key, cell.failed_step, cell.failure, cell.recorded),
        *(
            [(f"{key}.latest", cell.latest.failed_step, cell.latest.failure, cell.latest.recorded)]
            if cell.latest
            else []
        ),
    ]:
        if step is not None and step not in steps:
            problems.append(f"{where}.failed_step: {step!r:.60} is not a step ({', '.join(sorted(steps))})")
        if failure is not None and failure not in FAILURES:
            problems.append(f"{where}.failure: {failure!r:.60} is not a failure class")
        if recorded is not None and (not isinstance(recorded, str) or iso_problem(recorded)):
            problems.append(f"{where}.recorded: {recorded!r:.40} is not a UTC time")
    if cell.latest is not None and cell.latest.status not in (Status.FAILED, Status.INTERRUPTED):
        problems.append(f"{key}.latest.status: {cell.latest.status!r} is not failed or interrupted")
    problems += _wheel(cell.wheel, f"{key}.wheel") + _wheel(cell.sdk_wheel, f"{key}.sdk_wheel")
    problems += _features(cell.features, f"{key}.features")
    problems += _counts(cell.smoke, f"{key}.smoke")
    if cell.deep is not None:
        deep_cell = _text(cell.deep.cell, f"{key}.deep.cell", 255) or _name(cell.deep.cell, f"{key}.deep.cell")
        if deep_cell is not None:
            problems.append(deep_cell)
        problems += _counts(cell.deep.smoke, f"{key}.deep.smoke")
    return problems


def _name(text: str, key: str) -> str | None:
    problem = name_problem(text)
    return f"{key}: {text!r:.80} {problem}" if problem else None


def _counts(smoke: SmokeCounts | None, key: str) -> list[str]:
    if smoke is not None and any(
        not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 10**9
        for n in (smoke.passed, smoke.failed, smoke.skipped, smoke.errors)
    ):
        return [f"{key}: counts must be integers from 0 to 10**9"]
    return []


def table_problems(table: CompatTable) -> list[str]:
    """What is wrong with a table read from a file (after CompatTable.from_dict accepted its shape)."""
    problems = [
        p
        for p in (
            _text(table.plugin, "plugin", 200),
            _text(table.plugin_version, "plugin_version", 200),
            *(
                (_text(table.sdk.name, "sdk.name", 200), _text(table.sdk.title, "sdk.title", 200))
                if table.sdk is not None
                else ()
            ),
            _text(table.sdk.distribution if table.sdk is not None else "", "sdk.distribution", 200),
            _text(table.site_url, "site_url"),
            *(_text(name, f"own_names[{i}]", 200) for i, name in enumerate(table.own_names[:3])),
            "own_names: at most the plugin's and the SDK's names" if len(table.own_names) > 2 else "",
        )
        if p
    ]
    for i, release in enumerate(table.releases):
        for name in ("key", "minor", "version", "torch_requirement", "wheel_source"):
            if problem := _text(getattr(release, name), f"releases[{i}].{name}", 400):
                problems.append(problem)
        for feature, support in release.features.items():
            if not is_feature_key(feature):
                problems.append(f"releases[{i}].features: {feature!r:.80} is not a feature key ({KEY_RULE} characters)")
            elif problem := _text(support.note, f"releases[{i}].features.{feature}.note", 4096):
                problems.append(problem)
    for feature, title in table.feature_titles.items():
        if not is_feature_key(feature):
            problems.append(f"feature_titles: {feature!r:.80} is not a feature key ({KEY_RULE} characters)")
        elif problem := title_problem(title):
            problems.append(f"feature_titles.{feature}: {title!r:.80} {problem}")
    for i, cell in enumerate(table.cells):
        problems += _cell(cell, i)
    return problems
