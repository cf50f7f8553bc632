"""Parses one result record (JSON) into a CellResult, checking every type, and every path it names against wheels/."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from buildmatrix.errors import RecordError
from buildmatrix.model.cells import CellKey
from buildmatrix.model.vocab import Cause, FailureClass, RunnerName, Status
from buildmatrix.util.paths import name_problem, relative_path_problem

if TYPE_CHECKING:
    from buildmatrix.builder.results import CellResult

SHA256 = re.compile(r"[0-9a-f]{64}")


class _Bad(Exception):
    """One problem of a record, at a key."""


def _str(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{key}: expected a string, got {type(value).__name__} {value!r:.60}")
    return value


def _opt_str(value: Any, key: str) -> str | None:
    return None if value is None else _str(value, key)


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(f"{key}: expected a number, got {value!r:.60}")
    return float(value)


def _opt_number(value: Any, key: str) -> float | None:
    return None if value is None else _number(value, key)


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(f"{key}: expected a count (an integer >= 0), got {value!r:.60}")
    return value


def _object(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"{key}: expected an object, got {type(value).__name__}")
    return value


def _str_map(value: Any, key: str) -> dict[str, str]:
    return {_str(k, key): _str(v, f"{key}.{k}") for k, v in _object(value, key).items()}


def _str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list):
        raise _Bad(f"{key}: expected a list, got {type(value).__name__}")
    return [_str(v, f"{key}[{i}]") for i, v in enumerate(value)]


def _exact_keys(data: Mapping[str, Any], allowed: set[str], required: set[str], key: str) -> None:
    unknown = sorted(set(data) - allowed)
    missing = sorted(required - set(data))
    if unknown:
        raise _Bad(f"{key}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise _Bad(f"{key}: missing key(s) {', '.join(missing)}")


def _cell(value: Any, key: str) -> CellKey:
    cell = _str_map(value, key)
    if "id" not in cell:
        raise _Bad(f"{key}: has no id")
    problem = name_problem(cell["id"])
    if problem:
        raise _Bad(f"{key}.id: {cell['id']!r:.80} {problem}")
    try:
        return CellKey.from_dict(cell)
    except ValueError as exc:
        raise _Bad(f"{key}.{exc}") from None


def _patches(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The shim series a record's cell names (a comma-separated field of its record form)."""
    names = record["cell"].get("patches", "")
    return tuple(name for name in names.split(",") if name)


def _relative(value: Any, key: str) -> str:
    text = _str(value, key)
    problem = relative_path_problem(text)
    if problem:
        raise _Bad(f"{key}: {text!r:.80} {problem}; a record names files inside wheels/ only")
    return text


def _wheel(value: Any, key: str) -> Any:
    from buildmatrix.builder.results import WheelRecord

    if value is None:
        return None
    data = _object(value, key)
    _exact_keys(data, {"filename", "sha256", "path"}, {"filename", "sha256", "path"}, key)
    filename, path = _str(data["filename"], f"{key}.filename"), _relative(data["path"], f"{key}.path")
    sha = _str(data["sha256"], f"{key}.sha256")
    if not SHA256.fullmatch(sha):
        raise _Bad(f"{key}.sha256: {sha!r:.80} is not a sha256 (64 lowercase hex digits)")
    try:
        parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise _Bad(f"{key}.filename: {exc}") from None
    if path.rsplit("/", 1)[-1] != filename:
        raise _Bad(f"{key}.path: {path!r} does not name the file {filename}")
    return WheelRecord(filename, sha, path)


def _smoke(value: Any, key: str) -> Any:
    from buildmatrix.builder.results import SmokeCounts

    if value is None:
        return None
    data = _object(value, key)
    names = {"passed", "failed", "skipped", "errors"}
    _exact_keys(data, names, set(), key)
    return SmokeCounts(**{k: _count(v, f"{key}.{k}") for k, v in data.items()})


def _steps(value: Any, key: str) -> list[Any]:
    from buildmatrix.builder.results import StepResult

    if not isinstance(value, list):
        raise _Bad(f"{key}: expected a list, got {type(value).__name__}")
    steps = []
    for i, item in enumerate(value):
        data = _object(item, f"{key}[{i}]")
        _exact_keys(data, {"name", "status", "seconds"}, {"name", "status", "seconds"}, f"{key}[{i}]")
        steps.append(
            StepResult(
                _str(data["name"], f"{key}[{i}].name"),
                _status(data["status"], f"{key}[{i}].status"),
                _number(data["seconds"], f"{key}[{i}].seconds"),
            )
        )
    return steps


def _status(value: Any, key: str) -> Status:
    text = _str(value, key)
    allowed = [s.value for s in Status]
    if text not in allowed:
        raise _Bad(f"{key}: {text!r:.60} is not one of {', '.join(allowed)}")
    return Status(text)


def _runner(value: Any, key: str) -> RunnerName:
    text = _str(value, key)
    allowed = [r.value for r in RunnerName if r != RunnerName.AUTO]
    if text not in allowed:
        raise _Bad(f"{key}: {text!r:.60} is not one of {', '.join(allowed)}")
    return RunnerName(text)


def _enum_of(kind: type[StrEnum]) -> Callable[[Any, str], StrEnum | None]:
    def parse(value: Any, key: str) -> StrEnum | None:
        if value is None:
            return None
        text = _str(value, key)
        allowed = [member.value for member in kind]
        if text not in allowed:
            raise _Bad(f"{key}: {text!r:.60} is not one of {', '.join(allowed)}")
        return kind(text)

    return parse


def _attempts(value: Any, key: str) -> int:
    count = _count(value, key)
    if count < 1:
        raise _Bad(f"{key}: expected at least 1 attempt, got {count}")
    return count


# One parser per field of CellResult; a field without one (added later) is only required to be JSON.
PARSERS: dict[str, Callable[[Any, str], Any]] = {
    "cell": _cell,
    "inputs_hash": _str,
    "inputs": _object,
    "runner": _runner,
    "status": _status,
    "failed_step": _opt_str,
    "error": _opt_str,
    "error_tail": _opt_str,
    "failure_class": _enum_of(FailureClass),
    "cause": _enum_of(Cause),
    "attempts": _attempts,
    "steps": _steps,
    "smoke": _smoke,
    "features": _str_map,
    "torch_build": _object,
    "wheel": _wheel,
    "driver_wheel": _wheel,
    "variants_claimed": _str_list,
    "log": lambda v, k: None if v is None else _relative(v, k),
    "started": _number,
    "finished": _opt_number,
}


def _own_cell(result: CellResult) -> None:
    """A record names its own cell's log and wheels only: never another cell's."""
    cell_id = result.id
    if result.log is not None and result.log != f"logs/{cell_id}.log":
        raise _Bad(f"log: {result.log!r:.80} is not this cell's log (logs/{cell_id}.log)")
    minor, driver = result.cell.torch_minor, result.cell.driver
    if result.wheel is not None:
        version = parse_wheel_filename(result.wheel.filename)[1]
        label = result.cell.local_version_label
        if version.local != label:
            raise _Bad(
                f"wheel.filename: {result.wheel.filename} is not a wheel of cell {cell_id} "
                f"(its local label is not +{label})"
            )
        if result.wheel.path != f"torch{minor}/{result.wheel.filename}":
            raise _Bad(f"wheel.path: {result.wheel.path!r} is not torch{minor}/{result.wheel.filename}")
    if result.driver_wheel is not None:
        version = parse_wheel_filename(result.driver_wheel.filename)[1]
        if version.major != driver.major:
            raise _Bad(f"driver_wheel.filename: {result.driver_wheel.filename} is not a driver {driver} wheel")
        if result.driver_wheel.path != f"driver/{result.driver_wheel.filename}":
            raise _Bad(f"driver_wheel.path: {result.driver_wheel.path!r} is not driver/{result.driver_wheel.filename}")


def parse_record(text: str, source: str, expected_id: str | None = None) -> CellResult:
    """The CellResult in `text` (the contents of `source`); raises RecordError naming the file and the bad key."""
    from buildmatrix.builder.results import RESULT_SCHEMA_VERSION, CellResult

    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RecordError(source, f"not valid JSON ({exc}); truncated or damaged") from None
    try:
        record = _object(data, "record")
        if record.get("schema_version") != RESULT_SCHEMA_VERSION:
            raise _Bad(f"schema_version: {record.get('schema_version')!r:.20} is not {RESULT_SCHEMA_VERSION}")
        known = {f.name for f in fields(CellResult)} - {"patches"}  # patches are part of the cell's record form
        required = {f.name for f in fields(CellResult) if f.name in ("cell", "inputs_hash", "inputs", "runner")}
        _exact_keys(record, known, required, "record")
        values = {k: PARSERS[k](v, k) if k in PARSERS else v for k, v in record.items()}
        result = CellResult(**values, patches=_patches(record))
        if expected_id is not None and result.id != expected_id:
            raise _Bad(f"cell.id: {result.id!r} is not {expected_id!r}, the cell this file is named after")
        _own_cell(result)
    except _Bad as exc:
        raise RecordError(source, str(exc)) from None
    return result
