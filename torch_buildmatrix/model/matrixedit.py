"""Apply `outdated` edits to matrix.yaml through a round-trip YAML library, keeping every comment and the order."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase, CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.tokens import CommentToken

from torch_buildmatrix.errors import MatrixError, Problem
from torch_buildmatrix.model.matrix import PIP_CONFIG, WheelSource
from torch_buildmatrix.model.outdated import AddRelease, Edit, SetVersion
from torch_buildmatrix.vocab import REGISTRY_VARIANT, WheelSourceKind


def _yaml() -> YAML:
    yaml = YAML()
    # matrix.yaml's own layout: two-space mappings, list dashes indented by two, no line wrapping.
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096
    yaml.preserve_quotes = True
    return yaml


def apply_edits(path: Path, text: str, edits: list[Edit]) -> str:
    """The matrix text with the edits made; comments, quoting and order of everything else are untouched."""
    yaml = _yaml()
    try:
        doc = yaml.load(text)
    except YAMLError as exc:
        raise MatrixError([Problem(str(path), None, "(syntax)", str(exc).splitlines()[0])]) from None
    torch = doc.get("torch") if isinstance(doc, CommentedMap) else None
    if not isinstance(torch, CommentedSeq):
        raise MatrixError([Problem(str(path), None, "torch", "expected a list of torch releases to edit")])
    for edit in edits:
        if isinstance(edit, SetVersion):
            _set_version(path, torch, edit)
    for edit in edits:
        if isinstance(edit, AddRelease):
            _add_release(doc, torch, edit)
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def _version(value: Any) -> Version | None:
    try:
        return Version(str(value))
    except InvalidVersion:
        return None


def _variant(item: CommentedMap) -> str:
    default = "cuda" if item.get("wheels", "registry") == "registry" else ""
    return str(item.get("variant", default))


def _set_version(path: Path, torch: CommentedSeq, edit: SetVersion) -> None:
    for item in torch:
        if (
            isinstance(item, CommentedMap)
            and _version(item.get("version")) == edit.old
            and _variant(item) == edit.variant
        ):
            item["version"] = DoubleQuotedScalarString(str(edit.new))
            return
    raise MatrixError(
        [Problem(str(path), None, "torch", f"no entry for torch {edit.old} ({edit.variant}) to move to {edit.new}")]
    )


def _flow_strings(values: list[str]) -> CommentedSeq:
    seq = CommentedSeq([DoubleQuotedScalarString(v) for v in values])
    seq.fa.set_flow_style()
    return seq


def _wheels(source: WheelSource) -> str | CommentedMap:
    """A wheel source written the way matrix.yaml spells it."""
    if source.kind == WheelSourceKind.FIND_LINKS and source.location == PIP_CONFIG:
        return "pip-find-links"
    if source.kind == WheelSourceKind.INDEX:
        fields = [("index", source.location)] + (
            [("local-find-links", source.local_find_links)] if source.local_find_links else []
        )
    else:
        fields = [("find-links", source.location)]
    mapping = CommentedMap(fields)
    mapping.fa.set_flow_style()
    return mapping


def _add_release(doc: CommentedMap, torch: CommentedSeq, edit: AddRelease) -> None:
    entry = CommentedMap()
    entry["version"] = DoubleQuotedScalarString(str(edit.version))
    if edit.wheels.kind != WheelSourceKind.REGISTRY or edit.variant != REGISTRY_VARIANT:
        entry["variant"] = str(edit.variant)
    if edit.wheels.kind != WheelSourceKind.REGISTRY:
        entry["wheels"] = _wheels(edit.wheels)
    entry["python"] = _flow_strings([str(edit.python)])
    if edit.patches:
        patches = CommentedSeq(list(edit.patches))
        patches.fa.set_flow_style()
        entry["patches"] = patches
    position = next(
        (i for i, item in enumerate(torch) if (_version(item.get("version")) or Version("0")) > edit.version),
        len(torch),
    )
    _insert(torch, position, entry)
    if edit.exclude_sdks:
        exclude = doc.get("exclude")
        if not isinstance(exclude, CommentedSeq):
            exclude = CommentedSeq()
            doc.pop("exclude", None)
            doc.insert(list(doc).index("torch") + 1, "exclude", exclude)
        for sdk in edit.exclude_sdks:
            rule = CommentedMap(
                [
                    ("torch", DoubleQuotedScalarString(f"{edit.version.major}.{edit.version.minor}")),
                    ("sdk", DoubleQuotedScalarString(sdk)),
                ]
            )
            rule.fa.set_flow_style()
            _insert(exclude, len(exclude), rule)


def _insert(seq: CommentedSeq, position: int, item: CommentedMap) -> None:
    """Insert an item; the comment lines that followed the previous item move after the new one.

    ruamel keeps the comment lines between two items (and after the last one, up to the next key) on the
    previous item. Those lines introduce what follows, so they must stay after the new item.
    """
    following = ""
    if position > 0:
        slot = _trailing_comment(seq, position - 1)
        if slot is not None:
            holder, key, index = slot
            token = holder.ca.items[key][index]
            end_of_line, newline, following = token.value.partition("\n")
            token.value = end_of_line + newline
    seq.insert(position, item)
    if following:
        token = CommentToken("\n" + following, CommentMark(0), None)
        if item.fa.flow_style():
            seq.ca.items[position] = [token, None, None, None]
        else:
            item.ca.items[list(item)[-1]] = [None, None, token, None]


def _trailing_comment(seq: CommentedSeq, position: int) -> tuple[CommentedBase, Any, int] | None:
    """Where ruamel holds the comment written after item `position`: (container, key, slot)."""
    node = seq[position]
    if isinstance(node, CommentedMap) and node.fa.flow_style():
        entry = seq.ca.items.get(position)
        return (seq, position, 0) if entry and entry[0] is not None else None
    while isinstance(node, CommentedMap) and node:
        key = list(node)[-1]
        value = node[key]
        if isinstance(value, CommentedSeq) and value and not value.fa.flow_style():
            return _trailing_comment(value, len(value) - 1)
        if isinstance(value, CommentedMap) and value and not value.fa.flow_style():
            node = value
            continue
        entry = node.ca.items.get(key)
        return (node, key, 2) if entry and len(entry) > 2 and entry[2] is not None else None
    return None
