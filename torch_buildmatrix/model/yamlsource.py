"""Load YAML with yaml.safe_load semantics, bounded and strict, remembering the line and text of every key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from torch_buildmatrix.errors import MatrixError, Problem

# A matrix file is a few dozen lines; these bounds are far above any real one and far below what hurts.
MAX_BYTES = 1_000_000
MAX_DEPTH = 32  # PyYAML composes recursively: 5000-deep nesting would end in a RecursionError
MAX_NODES = 20_000  # every alias counted at each use, so a billion-laughs bomb stops here, not in RAM
MAX_SCALAR = 1_000  # characters; a 5000-digit integer would raise inside int()


@dataclass
class LineMap:
    """Maps a dotted key path ("torch[2].version") to the 1-based line where it is written, and to its text."""

    lines: dict[str, int] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # scalar values as written, before YAML typed them

    def line(self, path: str) -> int | None:
        # Fall back to the closest enclosing key that has a line.
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return None

    def text(self, path: str) -> str | None:
        return self.texts.get(path)


class _Walker:
    """Records lines and texts, and finds duplicate keys and oversized scalars (the node graph is already bounded)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines = LineMap()
        self.problems: list[Problem] = []

    def walk(self, node: yaml.Node, path: str) -> None:
        if isinstance(node, yaml.ScalarNode):
            self.lines.texts[path] = str(node.value)
            if len(str(node.value)) > MAX_SCALAR:
                self.problem(
                    node, path or "(top level)", f"a value of {len(node.value)} characters (at most {MAX_SCALAR})"
                )
        elif isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "(complex key)"
                child = f"{path}.{key}" if path else key
                line = key_node.start_mark.line + 1
                if key in first:
                    self.problem(
                        key_node,
                        child,
                        f"duplicate key '{key}' (first at line {first[key]}); YAML would silently keep only the "
                        "last: remove one",
                    )
                    continue
                first[key] = line
                self.lines.lines[child] = line
                self.walk(value_node, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                child = f"{path}[{index}]"
                self.lines.lines[child] = item.start_mark.line + 1
                self.walk(item, child)

    def problem(self, node: yaml.Node, key: str, message: str) -> None:
        self.problems.append(Problem(self.file, node.start_mark.line + 1, key, message))


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes the document has once every alias is expanded (memoised per node, so linear in the file)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = MAX_NODES + 1  # a recursive alias counts as too big
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(item, memo) for item in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    memo[id(node)] = min(size, MAX_NODES + 1)
    return memo[id(node)]


def _too_big(node: yaml.Node, memo: dict[int, int], file: str) -> Problem:
    """Name the top-level key at which the expanded document passes MAX_NODES."""
    where, key, total = node, "(top level)", 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            total += 1 + memo[id(value_node)]
            where, key = key_node, str(key_node.value)
            if total > MAX_NODES:
                break
    return Problem(
        file,
        where.start_mark.line + 1,
        key,
        f"expands to more than {MAX_NODES} values with its YAML aliases counted at each use (an alias bomb?)",
    )


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the event stream, which PyYAML parses without recursion."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else None
                raise MatrixError(
                    [Problem(file, line, "(nesting)", f"lists and mappings nested more than {MAX_DEPTH} deep")]
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _decode(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise MatrixError(
            [
                Problem(
                    file,
                    line,
                    "(encoding)",
                    f"byte 0x{raw[exc.start]:02x} at column {column} is not UTF-8 (allowed: a UTF-8 text file)",
                )
            ]
        ) from None


def load_yaml_with_lines(path: Path) -> tuple[Any, LineMap]:
    """Parse a YAML file; every way it can be unreadable becomes a MatrixError naming file and line."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MatrixError([Problem(file, None, "(file)", f"cannot read the matrix file: {exc.strerror}")]) from None
    if len(raw) > MAX_BYTES:
        raise MatrixError([Problem(file, None, "(file)", f"{len(raw)} bytes (a matrix file has at most {MAX_BYTES})")])
    text = _decode(raw, file)
    loader: yaml.SafeLoader | None = None
    try:
        _check_depth(text, file)
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None, LineMap()
        memo: dict[int, int] = {}
        if _expanded_size(node, memo) > MAX_NODES:
            raise MatrixError([_too_big(node, memo, file)])
        walker = _Walker(file)
        walker.walk(node, "")
        if walker.problems:
            raise MatrixError(walker.problems)
        data = loader.construct_document(node)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, e.g. NUL
        at = text[: exc.position].count("\n") + 1
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        problem = f"character U+{code:04X} is not allowed in YAML (allowed: printable text)"
        raise MatrixError([Problem(file, at, "(encoding)", problem)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise MatrixError([Problem(file, line, "(syntax)", str(exc).splitlines()[0])]) from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. a timestamp like 2024-13-45
        raise MatrixError([Problem(file, None, "(value)", f"a value YAML cannot read: {exc}")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, walker.lines
