"""Walks matrix.yaml through the declared options table: `child`, `items` and `entries` accept only declared options
and remember which ones were read (a test compares that with the table); every problem is kept, tagged with its key
and line. The typed values are read by OptionReader (optreader.py), which extends the walker.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_buildmatrix import schema1
from torch_buildmatrix.errors import Problem
from torch_buildmatrix.model.options import (
    OPTIONS,
    PLAIN_NAME,
    Kind,
    Option,
    children,
    item,
)
from torch_buildmatrix.model.yamlsource import LineMap
from torch_buildmatrix.vocab import SdkKind

ABSENT: Any = object()  # a key not written at all, as opposed to written as null
TOP = Option("", Kind.MAPPING, "matrix.yaml")


@dataclass(frozen=True)
class Node:
    """A place in the document: its declared option, its concrete key ("torch[3].version") and its value."""

    option: Option
    key: str
    value: Any  # ABSENT when the key is not written

    @property
    def present(self) -> bool:
        return self.value is not ABSENT

    @property
    def where(self) -> str:
        """The key as problems name it."""
        return self.key or "(top level)"


def describe(value: Any) -> str:
    """A value as problems quote it."""
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"


def _join(parent: str, child: str) -> str:
    return f"{parent}.{child}" if parent else child


def _sdk_only(option: Option, kind: SdkKind | None) -> bool:
    return bool(option.sdk_kinds) and kind not in option.sdk_kinds


def close_hint(value: str, allowed: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(value, list(allowed), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


class OptionWalker:
    """Walks one matrix file by its declared options; collects every problem before the loader raises. OptionReader
    (optreader.py) adds the typed values."""

    def __init__(self, path: Path, lines: LineMap) -> None:
        self.path = path
        self.root = path.parent
        self.lines = lines
        self.problems: list[Problem] = []
        self.read: set[str] = set()  # paths of the declared options the loader looked at
        self.sdk_kind: SdkKind | None = None  # the matrix's SDK kind, once read: settings of other kinds are errors

    # ---- problems -----------------------------------------------------------------------------------------------
    def problem(self, key: str, message: str) -> None:
        self.problems.append(Problem(str(self.path), self.lines.line(key), key or "(top level)", message))

    def line(self, key: str) -> int | None:
        return self.lines.line(key)

    # ---- walking ------------------------------------------------------------------------------------------------
    def top(self, data: Any) -> Node:
        return Node(TOP, "", data)

    def child(self, node: Node, name: str) -> Node:
        """The node of a declared key of a mapping node (ABSENT value when not written or not a mapping)."""
        option = OPTIONS[_join(node.option.path, name)]  # KeyError: the loader reads an undeclared option
        self.read.add(option.path)
        value = node.value.get(name, ABSENT) if isinstance(node.value, dict) else ABSENT
        return Node(option, _join(node.key, name), value)

    def mapping(self, node: Node) -> bool:
        """Check a mapping node's keys against the table: unknown keys (with a hint), missing required ones.

        Returns whether the node is a mapping at all (reported when it is not)."""
        declared = children(node.option.path)
        allowed = tuple(o.key for o in declared)
        if not isinstance(node.value, dict):
            self.problem(node.key, f"expected a mapping with keys {', '.join(allowed)}, got {describe(node.value)}")
            return False
        for name in node.value:
            if name not in allowed:
                moved = schema1.MOVED_KEYS.get(_join(node.option.path, str(name)))
                hint = f"; schema 2 calls it {moved}" if moved else close_hint(str(name), allowed)
                self.problem(_join(node.key, str(name)), f"unknown key '{name}' (allowed: {', '.join(allowed)}){hint}")
        for option in declared:
            if option.required and option.key not in node.value:
                self.problem(node.key, f"missing required key '{option.key}'")
            elif option.key in node.value and option.sdk_kinds and self.sdk_kind not in option.sdk_kinds:
                self.problem(_join(node.key, option.key), self._not_for_this_sdk(option, allowed))
        return True

    def _not_for_this_sdk(self, option: Option, allowed: tuple[str, ...]) -> str:
        """Why a key written for one kind of SDK is an error here, and what is allowed instead."""
        usable = [k for k in allowed if not _sdk_only(OPTIONS[_join(option.parent, k)], self.sdk_kind)]
        instead = f" (allowed here: {', '.join(usable)})" if usable else ""
        kinds = " or ".join(option.sdk_kinds)
        if self.sdk_kind is None:
            return f"a setting for projects with an SDK ({kinds}), but matrix.yaml declares no sdk{instead}"
        return f"a setting of {kinds} SDKs only; this sdk is kind {self.sdk_kind}{instead}"

    def items(self, node: Node) -> list[Node]:
        """The items of a list node; an absent or null optional list is empty, anything else not a list a problem."""
        values = self.sequence(node)
        option = item(node.option.path)
        self.read.add(option.path)
        return [Node(option, f"{node.key}[{index}]", value) for index, value in enumerate(values)]

    def entries(
        self, node: Node, what: str = "name", pattern: re.Pattern[str] = PLAIN_NAME, allowed: str = ""
    ) -> list[tuple[str, Node]]:
        """The named entries of a mapping of named entries (images.<name>); each name must be a plain name (or match
        `pattern`, which `allowed` describes)."""
        option = item(node.option.path)
        self.read.add(option.path)
        if not node.present or node.value is None:
            return []
        if not isinstance(node.value, dict):
            self.problem(node.key, f"expected a mapping of {what} to entry, got {describe(node.value)}")
            return []
        out = []
        for name, value in node.value.items():
            key = _join(node.key, str(name))
            if not isinstance(name, str) or not pattern.fullmatch(name):
                rule = allowed or "a plain name (allowed: letters, digits, . _ -)"
                self.problem(key, f"{what} {describe(name)} is not {rule}")
                continue
            out.append((name, Node(option, key, value)))
        return out

    def sequence(self, node: Node) -> list[Any]:
        if not node.present or (node.value is None and not node.option.required):
            return []  # a missing required key is reported once, by mapping()
        if not isinstance(node.value, list):
            self.problem(node.key, f"expected a list, got {describe(node.value)}")
            return []
        return node.value
