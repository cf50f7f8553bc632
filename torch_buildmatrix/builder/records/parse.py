"""Parses one result record (JSON) into a CellResult, checking every type, and every path it names against wheels/.

Records come from other machines (CI artifacts, merged trees): nothing in one is trusted. Numbers and strings are
bounded, words come from their vocabularies (steps, statuses, feature names and outcomes), and with RecordRules the
wheel names are checked against the cell (the plugin's and a wheel SDK's distribution and directory, tags that
install on the cell's Python). Any problem is a RecordError naming the file and the key, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name
from packaging.version import Version

from torch_buildmatrix import schema1
from torch_buildmatrix.builder.records.fields import (
    LIMITS,
    MAX_RECORD_BYTES,
    MAX_SECONDS,
    SHA256,
    UntrustedJSON,
    _Bad,
    _bounded_json,
    _count,
    _enum_of,
    _exact_keys,
    _features,
    _number,
    _object,
    _opt_number,
    _opt_step,
    _opt_str,
    _runner,
    _status,
    _step,
    _str,
    _str_list,
    _str_map,
    load_json,
)
from torch_buildmatrix.builder.records.model import (
    RESULT_SCHEMA_VERSION,
    BuildResult,
    CellResult,
    SmokeCounts,
    StepResult,
    TierResult,
    WheelRecord,
)
from torch_buildmatrix.errors import RecordError
from torch_buildmatrix.model.cellkey import BuildKey, CellKey, KeyParser
from torch_buildmatrix.model.pythons import installs_on
from torch_buildmatrix.util.paths import name_problem, relative_path_problem
from torch_buildmatrix.util.wheelname import parse_wheel
from torch_buildmatrix.vocab import Cause, FailureClass, TierStatus

if TYPE_CHECKING:
    from torch_buildmatrix.model.matrix import Matrix
    from torch_buildmatrix.model.pythons import Python


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
    "build_code": lambda v, k: None if v is None else _str(v, k, 64),
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
            try:
                record = schema1.migrate_record(record)
            except schema1.Schema1Error as exc:
                raise _Bad(str(exc)) from None
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
    except UntrustedJSON as exc:
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
