"""Load YAML with yaml.safe_load semantics while remembering the line of every key, for error messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from buildmatrix.errors import MatrixError, Problem


@dataclass
class LineMap:
    """Maps a dotted key path ("torch[2].version") to the 1-based line where it is written."""

    lines: dict[str, int] = field(default_factory=dict)

    def line(self, path: str) -> int | None:
        # Fall back to the closest enclosing key that has a line.
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return None


def _walk(node: yaml.Node, path: str, out: LineMap) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            out.lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = f"{path}[{index}]"
            out.lines[child] = item.start_mark.line + 1
            _walk(item, child, out)


def load_yaml_with_lines(path: Path) -> tuple[Any, LineMap]:
    """Parse a YAML file; syntax errors become MatrixError naming file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MatrixError(
            [Problem(str(path), None, "(file)", f"cannot read the matrix file: {exc.strerror}")]
        ) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise MatrixError([Problem(str(path), line, "(syntax)", str(exc).splitlines()[0])]) from None
    lines = LineMap()
    if node is not None:
        _walk(node, "", lines)
    return data, lines
