"""Reading untrusted JSON values: bounded numbers, strings, lists and objects, words from their vocabularies (steps,
statuses, runners, feature names and outcomes), and JSON text whose numbers and depth are bounded before Python
converts them. Each problem is a _Bad naming the key; the record parser (parse.py) and the table's use them."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Set
from enum import StrEnum
from typing import Any

from torch_buildmatrix.util.features import KEY_RULE, is_feature_key, legacy_key
from torch_buildmatrix.vocab import RunnerName, Status, Step

SHA256 = re.compile(r"[0-9a-f]{64}")


MAX_RECORD_BYTES = 1 << 20  # a record is a few KB; its error tail at most 64 KB


MAX_TEXT = 1024  # any string without a limit of its own


LIMITS = {"error": 16 * 1024, "error_tail": 64 * 1024, "features": 2048}


MAX_INT_DIGITS = 18  # JSON integers beyond this are refused before Python converts them


MAX_ITEMS = 1000  # entries of a list or object, nodes of a free-form object (inputs, torch_build)


MAX_DEPTH = 8


MAX_SECONDS = 1e7  # a step's duration: 115 days


MAX_TIME = 1e11  # a Unix time: year 5138


FEATURE_STATES = ("passed", "failed", "not available")


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


def feature_problem(name: object, outcome: object, key: str = "features") -> str:
    """Why a smoke feature and its outcome cannot be recorded ("" when they can): snake_case keys (util/features.py),
    outcomes "passed", "passed: <detail>", "failed" or "not available[: <reason>]". The one rule for the record's
    reader and for the smoke suite's features file (builder/smoke.py), so no record is written that would not read."""
    if not is_feature_key(name):
        return f"{key}: {name!r:.80} is not a feature key ({KEY_RULE} characters)"
    try:
        text = _str(outcome, f"{key}.{name}", LIMITS["features"])
    except _Bad as exc:
        return str(exc)
    state = text.split(":", 1)[0].strip()
    if not (text in ("passed", "failed") or text.startswith("passed: ") or text.startswith("not available")):
        return f"{key}.{name}: {text!r:.60} is not an outcome ({', '.join(FEATURE_STATES)}, with a detail)"
    if any(ord(ch) < 0x20 for ch in text) or not state:
        return f"{key}.{name}: holds a control character or no state"
    return ""


def _features(value: Any, key: str) -> dict[str, str]:
    """Smoke feature key -> outcome, each by feature_problem's rule. A name written before keys were snake_case
    ("named tensors", in records of then) reads as its key ("named_tensors")."""
    data = _object(value, key)
    if len(data) > MAX_ITEMS:
        raise _Bad(f"{key}: {len(data)} features (at most {MAX_ITEMS})")
    out: dict[str, str] = {}
    for name, outcome in data.items():
        feature = (legacy_key(name) if isinstance(name, str) else None) or name
        if problem := feature_problem(feature, outcome, key):
            raise _Bad(problem)
        if feature in out:
            raise _Bad(f"{key}: {name!r:.80} names the feature {feature!r} a second time")
        out[feature] = outcome
    return out


def feature_report(text: str, source: str) -> dict[str, str]:
    """A smoke suite's report of its features (the `{features}` file): snake_case keys only (no older phrase: the
    suite is ours to fix), outcomes by feature_problem's rule. Raises ValueError naming `source` and every key
    that breaks it."""
    try:
        data = load_json(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{source}: not a JSON object of features ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: not a JSON object of features (a {type(data).__name__})")
    if len(data) > MAX_ITEMS:
        raise ValueError(f"{source}: {len(data)} features (at most {MAX_ITEMS})")
    problems = [p for name, outcome in data.items() if (p := feature_problem(name, outcome, source))]
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ValueError("; ".join(problems[:5]) + more)
    return dict(data)


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
