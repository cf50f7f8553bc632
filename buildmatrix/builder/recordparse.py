"""Parses one result record (JSON) into a CellResult, checking every type, and every path it names against wheels/.

Records come from other machines (CI artifacts, merged trees): nothing in one is trusted. Numbers and strings are
bounded, words come from their vocabularies (steps, statuses, feature names and outcomes), and with RecordRules the
wheel names are checked against the cell (the plugin's and a wheel SDK's distribution and directory, tags that
install on the cell's Python). Any problem is a RecordError naming the file and the key, never a traceback.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name
from packaging.version import InvalidVersion, Version

from buildmatrix.builder.results import (
    RESULT_SCHEMA_VERSION,
    BuildResult,
    CellResult,
    SmokeCounts,
    StepResult,
    TierResult,
    WheelRecord,
)
from buildmatrix.errors import RecordError
from buildmatrix.model.cellkey import BuildKey, CellKey, KeyParser
from buildmatrix.model.pythons import installs_on
from buildmatrix.util.paths import name_problem, relative_path_problem
from buildmatrix.util.wheelname import parse_wheel
from buildmatrix.vocab import Cause, FailureClass, RunnerName, Status, Step, TierStatus

if TYPE_CHECKING:
    from buildmatrix.model.matrix import Matrix
    from buildmatrix.model.pythons import Python

SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_RECORD_BYTES = 1 << 20  # a record is a few KB; its error tail at most 64 KB
MAX_TEXT = 1024  # any string without a limit of its own
LIMITS = {"error": 16 * 1024, "error_tail": 64 * 1024, "features": 2048}
MAX_INT_DIGITS = 18  # JSON integers beyond this are refused before Python converts them
MAX_ITEMS = 1000  # entries of a list or object, nodes of a free-form object (inputs, torch_build)
MAX_DEPTH = 8
MAX_SECONDS = 1e7  # a step's duration: 115 days
MAX_TIME = 1e11  # a Unix time: year 5138
# A smoke feature's name: words, digits, spaces and ( ) . / + _ -; never Markdown or HTML markup, never a newline.
FEATURE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.()+/-]{0,79}")
FEATURE_STATES = ("passed", "failed", "not available")


@dataclass(frozen=True)
class RecordRules:
    """What the matrix says every record's wheels must be: the plugin's distribution name and, with a wheel SDK, its
    wheels' distribution name and directory (wheels/<sdk name>/); with no wheel SDK a record names no SDK wheel."""

    plugin_distribution: str
    sdk_distribution: str | None = None
    sdk_directory: str | None = None

    @classmethod
    def of(cls, matrix: Matrix) -> RecordRules:
        sdk = matrix.sdk
        if sdk is None or not sdk.builds_wheel:
            return cls(matrix.plugin.distribution)
        return cls(matrix.plugin.distribution, sdk.distribution, sdk.name)


@dataclass
class ParseMemo:
    """What reading many records asks again and again, answered once: versions and Pythons by their text (`keys`),
    and whether a wheel's tags install on a Python (every record of one Python asks the same). One per store of
    records or merged tree (ResultStore makes its own), never module-global; every record is still parsed and checked
    in full."""

    keys: KeyParser = field(default_factory=KeyParser)
    _installs: dict[tuple[frozenset[Tag], Python], bool] = field(default_factory=dict)

    def installs(self, tags: frozenset[Tag], python: Python) -> bool:
        """pythons.installs_on, asked once per tag set and Python."""
        known = self._installs.get((tags, python))
        if known is None:
            known = self._installs[(tags, python)] = installs_on(tags, python)
        return known


class _Bad(Exception):
    """One problem of a record, at a key."""


def _str(value: Any, key: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{key}: expected a string, got {type(value).__name__} {value!r:.60}")
    if len(value) > limit:
        raise _Bad(f"{key}: a string of {len(value)} characters (at most {limit})")
    return value


def _opt_str(value: Any, key: str) -> str | None:
    return None if value is None else _str(value, key, LIMITS.get(key, MAX_TEXT))


def _number(value: Any, key: str, high: float = MAX_TIME) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(f"{key}: expected a number, got {value!r:.60}")
    if not 0 <= value <= high:
        raise _Bad(f"{key}: {value!r:.30} is out of range (0 to {high:g})")
    return float(value)


def _opt_number(value: Any, key: str) -> float | None:
    return None if value is None else _number(value, key)


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**9:
        raise _Bad(f"{key}: expected a count (an integer from 0 to 10**9), got {value!r:.60}")
    return value


def _bounded_json(value: Any, key: str) -> dict[str, Any]:
    """A free-form object (inputs, torch_build): JSON values only, at most MAX_DEPTH deep and MAX_ITEMS nodes."""
    nodes = 0

    def walk(item: Any, where: str, depth: int) -> None:
        nonlocal nodes
        nodes += 1
        if nodes > MAX_ITEMS or depth > MAX_DEPTH:
            raise _Bad(f"{key}: more than {MAX_ITEMS} values or {MAX_DEPTH} levels")
        if isinstance(item, dict):
            for k, v in item.items():
                walk(v, f"{where}.{_str(k, where)}", depth + 1)
        elif isinstance(item, list):
            for i, v in enumerate(item):
                walk(v, f"{where}[{i}]", depth + 1)
        elif isinstance(item, str):
            _str(item, where, 4096)
        elif isinstance(item, float) and not math.isfinite(item):
            raise _Bad(f"{where}: {item!r} is not a number")

    walk(_object(value, key), key, 0)
    return value  # type: ignore[no-any-return]


def _object(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"{key}: expected an object, got {type(value).__name__}")
    return value


def _str_map(value: Any, key: str) -> dict[str, str]:
    return {_str(k, key): _str(v, f"{key}.{k}") for k, v in _object(value, key).items()}


def _str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list):
        raise _Bad(f"{key}: expected a list, got {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise _Bad(f"{key}: {len(value)} entries (at most {MAX_ITEMS})")
    return [_str(v, f"{key}[{i}]") for i, v in enumerate(value)]


def _features(value: Any, key: str) -> dict[str, str]:
    """Smoke feature -> outcome: names from the feature vocabulary, outcomes "passed", "passed: <detail>", "failed"
    or "not available[: <reason>]"."""
    data = _object(value, key)
    if len(data) > MAX_ITEMS:
        raise _Bad(f"{key}: {len(data)} features (at most {MAX_ITEMS})")
    out = {}
    for name, outcome in data.items():
        if not (isinstance(name, str) and FEATURE_NAME.fullmatch(name)):
            raise _Bad(
                f"{key}: {name!r:.80} is not a feature name (letters, digits, spaces and ( ) . / + _ -, "
                "at most 80 characters)"
            )
        text = _str(outcome, f"{key}.{name}", LIMITS["features"])
        state = text.split(":", 1)[0].strip()
        if not (text in ("passed", "failed") or text.startswith("passed: ") or text.startswith("not available")):
            raise _Bad(f"{key}.{name}: {text!r:.60} is not an outcome ({', '.join(FEATURE_STATES)}, with a detail)")
        if any(ord(ch) < 0x20 for ch in text) or not state:
            raise _Bad(f"{key}.{name}: holds a control character or no state")
        out[name] = text
    return out


STEPS = tuple(s.value for s in Step)
STATUSES = tuple(s.value for s in Status)
RUNNERS = tuple(r.value for r in RunnerName if r != RunnerName.AUTO)


def _step(value: Any, key: str) -> str:
    text = _str(value, key)
    if text not in STEPS:
        raise _Bad(f"{key}: {text!r:.60} is not a step ({', '.join(STEPS)})")
    return text


def _opt_step(value: Any, key: str) -> str | None:
    return None if value is None else _step(value, key)


def _exact_keys(data: Mapping[str, Any], allowed: Set[str], required: Set[str], key: str) -> None:
    unknown = sorted(set(data) - allowed)
    missing = sorted(required - set(data))
    if unknown:
        raise _Bad(f"{key}: unknown key(s) {', '.join(unknown)}")
    if missing:
        raise _Bad(f"{key}: missing key(s) {', '.join(missing)}")


def _cell(value: Any, key: str, keys: KeyParser) -> CellKey:
    data = dict(_object(value, key))
    build = data.pop("build", None)
    cell: dict[str, Any] = _str_map(data, key)
    if build is not None:
        cell["build"] = _build_form(build, f"{key}.build")
    if "id" not in cell:
        raise _Bad(f"{key}: has no id")
    problem = name_problem(cell["id"])
    if problem:
        raise _Bad(f"{key}.id: {cell['id']!r:.80} {problem}")
    try:
        return keys.cell(cell)
    except ValueError as exc:
        raise _Bad(f"{key}.{exc}") from None


def _build_form(value: Any, key: str) -> dict[str, str]:
    build = _str_map(value, key)
    problem = name_problem(build.get("id", ""))
    if problem:
        raise _Bad(f"{key}.id: {build.get('id')!r:.80} {problem}")
    return build


def _build_key(value: Any, key: str, keys: KeyParser) -> BuildKey:
    try:
        return keys.build(_build_form(value, key))
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


def _wheel(value: Any, key: str) -> WheelRecord | None:
    if value is None:
        return None
    data = _object(value, key)
    _exact_keys(data, {"filename", "sha256", "path"}, {"filename", "sha256", "path"}, key)
    filename, path = _str(data["filename"], f"{key}.filename", 255), _relative(data["path"], f"{key}.path")
    sha = _str(data["sha256"], f"{key}.sha256")
    if not SHA256.fullmatch(sha):
        raise _Bad(f"{key}.sha256: {sha!r:.80} is not a sha256 (64 lowercase hex digits)")
    try:
        parse_wheel(filename)
    except InvalidWheelFilename as exc:
        raise _Bad(f"{key}.filename: {exc}") from None
    if path.rsplit("/", 1)[-1] != filename:
        raise _Bad(f"{key}.path: {path!r} does not name the file {filename}")
    return WheelRecord(filename, sha, path)


def _smoke(value: Any, key: str) -> SmokeCounts | None:
    if value is None:
        return None
    data = _object(value, key)
    names = {"passed", "failed", "skipped", "errors"}
    _exact_keys(data, names, set(), key)
    return SmokeCounts(**{k: _count(v, f"{key}.{k}") for k, v in data.items()})


def _steps(value: Any, key: str) -> list[StepResult]:
    if not isinstance(value, list):
        raise _Bad(f"{key}: expected a list, got {type(value).__name__}")
    if len(value) > 100:
        raise _Bad(f"{key}: {len(value)} steps (at most 100)")
    steps = []
    for i, item in enumerate(value):
        data = _object(item, f"{key}[{i}]")
        _exact_keys(data, {"name", "status", "seconds"}, {"name", "status", "seconds"}, f"{key}[{i}]")
        steps.append(
            StepResult(
                _step(data["name"], f"{key}[{i}].name"),
                _status(data["status"], f"{key}[{i}].status"),
                _number(data["seconds"], f"{key}[{i}].seconds", MAX_SECONDS),
            )
        )
    return steps


def _status(value: Any, key: str) -> Status:
    text = _str(value, key)
    if text not in STATUSES:
        raise _Bad(f"{key}: {text!r:.60} is not one of {', '.join(STATUSES)}")
    return Status(text)


def _runner(value: Any, key: str) -> RunnerName:
    text = _str(value, key)
    if text not in RUNNERS:
        raise _Bad(f"{key}: {text!r:.60} is not one of {', '.join(RUNNERS)}")
    return RunnerName(text)


def _enum_of(kind: type[StrEnum]) -> Callable[[Any, str], StrEnum | None]:
    allowed = tuple(member.value for member in kind)

    def parse(value: Any, key: str) -> StrEnum | None:
        if value is None:
            return None
        text = _str(value, key)
        if text not in allowed:
            raise _Bad(f"{key}: {text!r:.60} is not one of {', '.join(allowed)}")
        return kind(text)

    return parse


def _attempts(value: Any, key: str) -> int:
    count = _count(value, key)
    if not 1 <= count <= 1000:
        raise _Bad(f"{key}: expected 1 to 1000 attempts, got {count}")
    return count


def _tier(value: Any, key: str) -> TierResult | None:
    """A build's deep tier (smoke.tiers), in a cell's or a build's record (absent in records before tiers)."""
    if value is None:
        return None
    data = _object(value, key)
    names = {"cell", "status", "smoke", "features", "error", "failure_class", "seconds"}
    _exact_keys(data, names, {"cell", "status"}, key)
    cell = _str(data["cell"], f"{key}.cell")
    problem = name_problem(cell)
    if problem:
        raise _Bad(f"{key}.cell: {cell!r:.80} {problem}")
    status = _enum_of(TierStatus)(data["status"], f"{key}.status")
    if not isinstance(status, TierStatus):
        raise _Bad(f"{key}.status: missing")
    failure_class = _enum_of(FailureClass)(data.get("failure_class"), f"{key}.failure_class")
    return TierResult(
        cell,
        status,
        _smoke(data.get("smoke"), f"{key}.smoke"),
        _features(data.get("features", {}), f"{key}.features"),
        None if data.get("error") is None else _str(data["error"], f"{key}.error", LIMITS["error"]),
        failure_class if isinstance(failure_class, FailureClass) else None,
        _number(data.get("seconds", 0.0), f"{key}.seconds", MAX_SECONDS),
    )


# One parser per field of CellResult but `cell` (parsed with the batch's KeyParser, _field); a field without one
# (added later) is only required to be JSON.
PARSERS: dict[str, Callable[[Any, str], Any]] = {
    "inputs_hash": _str,
    "inputs": _bounded_json,
    "runner": _runner,
    "status": _status,
    "failed_step": _opt_step,
    "error": _opt_str,
    "error_tail": _opt_str,
    "failure_class": _enum_of(FailureClass),
    "cause": _enum_of(Cause),
    "attempts": _attempts,
    "steps": _steps,
    "smoke": _smoke,
    "features": _features,
    "torch_build": _bounded_json,
    "wheel": _wheel,
    "sdk_wheel": _wheel,
    "variants_claimed": _str_list,
    "log": lambda v, k: None if v is None else _relative(v, k),
    "started": _number,
    "finished": _opt_number,
    "deep": _tier,
}


def _own_cell(result: CellResult, rules: RecordRules | None, memo: ParseMemo) -> None:
    """A record names its own cell's log and wheels only: never another cell's, never another project's."""
    cell_id = result.id
    if result.log is not None and result.log != f"logs/{cell_id}.log":
        raise _Bad(f"log: {result.log!r:.80} is not this cell's log (logs/{cell_id}.log)")
    sdk = result.cell.sdk
    if result.wheel is not None:
        version = parse_wheel(result.wheel.filename)[1]
        label = result.cell.local_version_label
        if version.local != label:
            raise _Bad(
                f"wheel.filename: {result.wheel.filename} is not a wheel of cell {cell_id} "
                f"(its local label is not +{label})"
            )
        built = result.cell.build.torch_minor  # a stable-ABI build's wheel lives with the release it was built against
        if result.wheel.path != f"torch{built}/{result.wheel.filename}":
            raise _Bad(f"wheel.path: {result.wheel.path!r} is not torch{built}/{result.wheel.filename}")
        if rules is not None:
            _check_plugin_wheel(result, rules, memo)
    if result.sdk_wheel is not None:
        _check_sdk_wheel(result, sdk, rules)


def _check_sdk_wheel(result: CellResult | BuildResult, sdk: Version | None, rules: RecordRules | None) -> None:
    """A wheel SDK's wheel: of the cell's SDK major, in the SDK's directory (wheels/<sdk name>/), of its
    distribution."""
    assert result.sdk_wheel is not None
    filename = result.sdk_wheel.filename
    name, version = parse_wheel(filename)[:2]
    if sdk is None or version.major != sdk.major:
        raise _Bad(f"sdk_wheel.filename: {filename} is not a wheel of SDK {sdk}")
    directory, _, file = result.sdk_wheel.path.rpartition("/")
    if rules is not None and rules.sdk_directory is None:
        raise _Bad(f"sdk_wheel: {filename}, but the matrix has no wheel SDK")
    wanted = rules.sdk_directory if rules is not None else None
    if (
        file != filename
        or name_problem(directory)
        or directory.startswith("torch")
        or directory != (wanted or directory)
    ):
        raise _Bad(f"sdk_wheel.path: {result.sdk_wheel.path!r} is not {wanted or '<sdk name>'}/{filename}")
    if rules is not None and rules.sdk_distribution and name != canonicalize_name(rules.sdk_distribution):
        raise _Bad(f"sdk_wheel.filename: {filename} is not a wheel of {rules.sdk_distribution}")


# Records of schema 1 were written when every project had a driver: cells named `driver` (its API version) with ids
# ending -drv<major>, wheels labelled torch.<minor>.drv.<major>, driver wheels under driver/.
V1_LABEL = "torch.{minor}.drv.{major}"


def migrate_v1(record: dict[str, Any]) -> dict[str, Any]:
    """A schema 1 record in schema 2's form (raises _Bad where it is not a record of schema 1's shape)."""
    cell = dict(_object(record.get("cell"), "cell"))
    driver = cell.pop("driver", None)
    if not isinstance(driver, str):
        raise _Bad(f"cell.driver: expected a string, got {driver!r:.60}")
    try:
        major, torch = Version(driver).major, Version(str(cell.get("torch")))
    except InvalidVersion:
        raise _Bad(f"cell: driver {driver!r:.60} or torch {cell.get('torch')!r:.60} is not a version") from None
    label = V1_LABEL.format(minor=f"{torch.major}.{torch.minor}", major=major)
    migrated = {**record, "schema_version": 2, "cell": {**cell, "sdk": driver, "label": label}}
    if "driver_wheel" in migrated:
        migrated["sdk_wheel"] = migrated.pop("driver_wheel")
    if migrated.get("failed_step") == "driver":
        migrated["failed_step"] = "sdk"
    if isinstance(migrated.get("steps"), list):
        migrated["steps"] = [
            {**step, "name": "sdk"} if isinstance(step, dict) and step.get("name") == "driver" else step
            for step in migrated["steps"]
        ]
    return migrated


def _check_plugin_wheel(result: CellResult, rules: RecordRules, memo: ParseMemo) -> None:
    assert result.wheel is not None
    name, _version, _build, tags = parse_wheel(result.wheel.filename)
    if name != canonicalize_name(rules.plugin_distribution):
        raise _Bad(f"wheel.filename: {result.wheel.filename} is not a wheel of {rules.plugin_distribution}")
    if not memo.installs(tags, result.cell.python):
        raise _Bad(
            f"wheel.filename: {result.wheel.filename}: its tags do not install on the cell's Python "
            f"{result.cell.python_minor}"
        )


class UntrustedJSON(ValueError):
    """JSON that is valid but refused: an integer too long to convert safely, NaN or Infinity."""


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise UntrustedJSON(f"an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _no_constant(text: str) -> float:
    raise UntrustedJSON(f"{text} is not a JSON number")


def load_json(text: str) -> Any:
    """JSON from a file we do not trust: no integer beyond MAX_INT_DIGITS digits (Python would spend seconds on one,
    or refuse it with a ValueError), no NaN or Infinity; raises UntrustedJSON or another ValueError."""
    return json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)


# The fields of a cell record: `patches` is part of the cell's record form.
CELL_FIELDS = frozenset(f.name for f in fields(CellResult)) - {"patches"}
CELL_REQUIRED = frozenset({"cell", "inputs_hash", "inputs", "runner"})


def _field(name: str, value: Any, memo: ParseMemo) -> Any:
    if name == "cell":
        return _cell(value, name, memo.keys)
    return PARSERS[name](value, name) if name in PARSERS else value


def parse_record(
    text: str,
    source: str,
    expected_id: str | None = None,
    rules: RecordRules | None = None,
    memo: ParseMemo | None = None,
) -> CellResult:
    """The CellResult in `text` (the contents of `source`); raises RecordError naming the file and the bad key.
    `memo`: the batch's (ResultStore's), when there is one."""
    memo = memo if memo is not None else ParseMemo()
    if len(text) > MAX_RECORD_BYTES:
        raise RecordError(source, f"{len(text)} characters; a record is at most {MAX_RECORD_BYTES}")
    try:
        data = load_json(text)
    except UntrustedJSON as exc:
        raise RecordError(source, f"not a record ({exc})") from None
    except (ValueError, RecursionError) as exc:
        raise RecordError(source, f"not valid JSON ({exc}); truncated or damaged") from None
    try:
        record = _object(data, "record")
        if record.get("schema_version") == 1:
            record = migrate_v1(record)
        if record.get("schema_version") == 2:  # each cell built its own wheel: a cell form without `build` says so
            if isinstance(record.get("cell"), dict) and "build" in record["cell"]:
                raise _Bad("cell.build: a record of schema 2 names no build")
            record = {**record, "schema_version": RESULT_SCHEMA_VERSION}
        if record.get("schema_version") != RESULT_SCHEMA_VERSION:
            raise _Bad(
                f"schema_version: {record.get('schema_version')!r:.20} is not {RESULT_SCHEMA_VERSION} (or 2 or 1, "
                "read as it)"
            )
        _exact_keys(record, CELL_FIELDS, CELL_REQUIRED, "record")
        values = {k: _field(k, v, memo) for k, v in record.items()}
        result = CellResult(**values, patches=_patches(record))
        if expected_id is not None and result.id != expected_id:
            raise _Bad(f"cell.id: {result.id!r} is not {expected_id!r}, the cell this file is named after")
        _own_cell(result, rules, memo)
    except _Bad as exc:
        raise RecordError(source, str(exc)) from None
    return result


# One parser per field of BuildResult but `build` (parsed with the batch's KeyParser, _build_field).
BUILD_PARSERS: dict[str, Callable[[Any, str], Any]] = {
    **{k: v for k, v in PARSERS.items() if k not in ("smoke", "features", "variants_claimed")},
    "python": lambda v, k: _str(v, k, 16),
    "patches": lambda v, k: tuple(_str_list(v, k)),
}


def _build_field(name: str, value: Any, memo: ParseMemo) -> Any:
    if name == "build":
        return _build_key(value, name, memo.keys)
    return BUILD_PARSERS[name](value, name) if name in BUILD_PARSERS else value


def _own_build(result: BuildResult, rules: RecordRules | None, memo: ParseMemo) -> None:
    """A build record names its own log and wheels: the wheel labelled as its key says, where its release's are."""
    if result.log is not None and result.log != f"logs/builds/{result.id}.log":
        raise _Bad(f"log: {result.log!r:.80} is not this build's log (logs/builds/{result.id}.log)")
    if result.wheel is not None:
        name, version, _build, tags = parse_wheel(result.wheel.filename)
        if version.local != result.build.label:
            raise _Bad(f"wheel.filename: {result.wheel.filename} is not labelled +{result.build.label}")
        minor = result.build.torch_minor
        if result.wheel.path != f"torch{minor}/{result.wheel.filename}":
            raise _Bad(f"wheel.path: {result.wheel.path!r} is not torch{minor}/{result.wheel.filename}")
        if rules is not None and name != canonicalize_name(rules.plugin_distribution):
            raise _Bad(f"wheel.filename: {result.wheel.filename} is not a wheel of {rules.plugin_distribution}")
        if result.build.python is not None and not memo.installs(tags, result.build.python):
            raise _Bad(f"wheel.filename: {result.wheel.filename}: its tags do not install on {result.build.python}")
    if result.sdk_wheel is not None:
        _check_sdk_wheel(result, result.build.sdk, rules)


def parse_build_record(
    text: str,
    source: str,
    expected_id: str | None = None,
    rules: RecordRules | None = None,
    memo: ParseMemo | None = None,
) -> BuildResult:
    """The BuildResult in `text`; raises RecordError naming the file and the bad key."""
    memo = memo if memo is not None else ParseMemo()
    if len(text) > MAX_RECORD_BYTES:
        raise RecordError(source, f"{len(text)} characters; a record is at most {MAX_RECORD_BYTES}")
    try:
        data = load_json(text)
    except _Bad as exc:
        raise RecordError(source, f"not a record ({exc})") from None
    except (ValueError, RecursionError) as exc:
        raise RecordError(source, f"not valid JSON ({exc}); truncated or damaged") from None
    try:
        record = _object(data, "record")
        if record.get("schema_version") != RESULT_SCHEMA_VERSION:
            raise _Bad(f"schema_version: {record.get('schema_version')!r:.20} is not {RESULT_SCHEMA_VERSION}")
        known = {f.name for f in fields(BuildResult)}
        _exact_keys(record, known, {"build", "inputs_hash", "inputs", "runner"}, "record")
        values = {k: _build_field(k, v, memo) for k, v in record.items()}
        result = BuildResult(**values)
        if expected_id is not None and result.id != expected_id:
            raise _Bad(f"build.id: {result.id!r} is not {expected_id!r}, the build this file is named after")
        _own_build(result, rules, memo)
    except _Bad as exc:
        raise RecordError(source, str(exc)) from None
    return result
