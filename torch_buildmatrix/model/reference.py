"""The reference page of matrix.yaml's options (plain Markdown), generated from the declared options table.

The committed page (docs/reference/matrix-options.md) is this module's output, written by
`torch-buildmatrix schema --reference FILE`; a test fails when it drifts from the table.
"""

from __future__ import annotations

import json
from typing import Any

from torch_buildmatrix.model.options import OPTIONS, SHAPES, Kind, Option

CONTAINERS = (Kind.MAPPING, Kind.LIST, Kind.NAMED)


def _anchor(path: str) -> str:
    """A stable anchor for an option (GitHub and MkDocs both keep explicit HTML anchors)."""
    spelled = path.replace("[]", ".item").replace("<name>", "name")
    return "opt-" + "".join(c if c.isalnum() else "-" for c in spelled).strip("-")


def _value(value: Any) -> str:
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, tuple | list | dict) and not value:
        return "none"
    return f"`{json.dumps(value, default=list)}`"


def _kind(option: Option) -> str:
    if option.kind == Kind.MAPPING and option.shorthand is not None:
        return f"mapping, or one of {', '.join(f'`{a}`' for a in option.shorthand_allowed)}"
    if option.kind == Kind.MAPPING and option.shape:
        return f"mapping ({option.shape})"
    return str(option.kind)


def _default(option: Option) -> str:
    if option.required:
        return "required"
    if option.default_doc:
        return option.default_doc
    if option.has_default and option.kind not in CONTAINERS:
        return _value(option.default)
    if option.has_default and option.shorthand is not None:
        return _value(option.default)
    return "none" if option.kind in CONTAINERS else "unset"


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence: not inside parentheses or backquotes, not "e.g."."""
    depth, quoted = 0, False
    for index, char in enumerate(text):
        if char == "`":
            quoted = not quoted
        elif char in "({[" and not quoted:
            depth += 1
        elif char in ")}]" and not quoted:
            depth -= 1
        elif char == "." and not depth and not quoted and text[index + 1 : index + 2] in ("", " "):  # noqa: SIM102
            if not text[: index + 1].endswith(("e.g.", "i.e.")):  # an abbreviation ends no sentence
                return text[: index + 1]
    return text


def _summary(option: Option) -> str:
    return first_sentence(option.doc).replace("|", "\\|")


def _entry(option: Option) -> list[str]:
    level = "##" if not option.parent else "###"  # a top-level key opens its section
    lines = [f'{level} `{option.path}` <a id="{_anchor(option.path)}"></a>', ""]
    facts = [f"Type: {_kind(option)}", f"Default: {_default(option)}"]
    if option.allowed and option.kind in (Kind.CHOICE, Kind.INTEGER):
        facts.append("Allowed: " + ", ".join(f"`{a}`" for a in option.allowed))
    lines += ["- " + fact for fact in facts]
    lines += ["", option.doc, ""]
    if option.example:
        lines += ["```yaml", option.example, "```", ""]
    return lines


def reference_markdown() -> str:
    """The whole page: a summary table, then one entry per option grouped by top-level key."""
    out = [
        "# matrix.yaml options",
        "",
        "<!-- Generated from torch_buildmatrix/model/options.py by `torch-buildmatrix schema --reference`; do not "
        "edit. -->",
        "",
        "Every key `matrix.yaml` accepts, with its type, default and allowed values. The loader reports any other "
        'key as an error naming its file and line (with a "did you mean" hint), and `matrix.schema.json`, '
        "generated from the same table, lets editors check the file as you type.",
        "",
        "Paths: `plugin.version` is a key of a mapping; `torch[]` is each item of a list, so `torch[].version` is "
        "the key `version` of each item; `images.<name>` is each entry of a mapping of named entries.",
        "",
        "| Option | Type | Default | Description |",
        "| --- | --- | --- | --- |",
    ]
    for option in OPTIONS.values():
        out.append(
            f"| [`{option.path}`](#{_anchor(option.path)}) | {_kind(option)} | {_default(option)} | "
            f"{_summary(option)} |"
        )
    out.append("")
    for option in OPTIONS.values():
        out += _entry(option)
    shared = [o for o in OPTIONS.values() if o.shape]
    if shared:
        out += ["## Shapes", ""]
        for shape, members in SHAPES.items():
            users = ", ".join(f"`{o.path}`" for o in shared if o.shape == shape)
            keys = ", ".join(f"`{m.path}`" for m in members)
            out.append(f"- **{shape}** ({users}): keys {keys}.")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
