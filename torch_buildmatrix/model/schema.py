"""matrix.schema.json, generated from the declared options table (editors validate matrix.yaml with it as people type).

The committed file is this module's output (`torch-buildmatrix schema --schema matrix.schema.json`); a test fails when
it drifts from the table.
"""

from __future__ import annotations

import json
from typing import Any

from torch_buildmatrix.model.options import (
    DEBOOTSTRAP_BASE,
    DISTRIBUTION_NAME,
    ENV_NAME,
    FILE_GLOB,
    IMAGE_REFERENCE,
    MAX_SECONDS,
    OPTIONS,
    PIP_CONFIG,
    PLAIN_NAME,
    SHAPE_SCHEMA,
    SHAPES,
    VARIANT_NAME,
    Kind,
    Option,
    children,
    item,
)

VERSION_PATTERN = r"^[0-9]+(\.[0-9]+)*$"
PYTHON_MINOR_PATTERN = r"^[0-9]+\.[0-9]+t?$"  # "3.13t": the free-threaded build
# Relative, not the project itself, never through `..`: what the loader's directory check allows, as a pattern.
DIRECTORY_PATTERN = r"^(?!/)(?!\.?/?$)(?!.*(^|/)\.\.(/|$))"
RELATIVE_PATH_PATTERN = r"^(?!/)(?!.*(^|/)\.{0,2}(/|$))"  # a path inside a tree, never through `..`
ROOT_OR_DIRECTORY_PATTERN = r"^(?!/)(?!.*(^|/)\.\.(/|$))"  # the same, "." (the project itself) allowed

# One fragment per kind of value (containers are built from their children).
KIND_SCHEMA: dict[Kind, dict[str, Any]] = {
    Kind.TEXT: {"type": "string", "minLength": 1},
    Kind.BOOLEAN: {"type": "boolean"},
    Kind.TEXTS: {"type": "array", "items": {"type": "string", "minLength": 1}},
    Kind.RELATIVE_PATH: {"type": "string", "minLength": 1, "pattern": RELATIVE_PATH_PATTERN},
    Kind.PATH_OR_OFF: {
        "anyOf": [{"const": False}, {"type": "string", "minLength": 1, "pattern": RELATIVE_PATH_PATTERN}]
    },
    Kind.PROJECT_FILE: {"type": "string", "minLength": 1, "pattern": DIRECTORY_PATTERN},
    Kind.ENV_NAME: {"type": "string", "pattern": f"^{ENV_NAME.pattern}$"},
    Kind.INTEGER: {"type": "integer"},
    Kind.COUNT: {"type": "integer", "minimum": 1},
    Kind.CHOICE: {"type": "string"},
    Kind.VERSION: {"type": "string", "pattern": VERSION_PATTERN},
    Kind.VERSIONS: {
        "type": "array",
        "items": {"type": "string", "pattern": VERSION_PATTERN},
        "minItems": 1,
        "uniqueItems": True,
    },
    Kind.PYTHON: {"type": "string", "pattern": PYTHON_MINOR_PATTERN},
    Kind.PYTHON_MINORS: {
        "type": "array",
        "items": {"type": "string", "pattern": PYTHON_MINOR_PATTERN},
        "minItems": 1,
        "uniqueItems": True,
    },
    Kind.DISTRIBUTION: {"type": "string", "pattern": f"^{DISTRIBUTION_NAME.pattern}$"},
    Kind.DIRECTORY: {"type": "string", "minLength": 1, "pattern": DIRECTORY_PATTERN},
    Kind.NAMES: {"type": "array", "items": {"type": "string", "pattern": f"^{PLAIN_NAME.pattern}$"}},
    Kind.TORCH_SELECTOR: {"type": "string", "minLength": 1},
    Kind.IMAGE_BASE: {"type": "string", "pattern": f"^(?:{DEBOOTSTRAP_BASE.pattern}|{IMAGE_REFERENCE.pattern})$"},
    Kind.SECONDS: {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SECONDS},
    Kind.ABSOLUTE_DIRECTORY: {"type": "string", "pattern": "^(/|file:///)"},
    Kind.URL: {"type": "string", "pattern": "^https?://"},
    Kind.LOCAL_FIND_LINKS: {"type": "string", "pattern": f"^(/|{PIP_CONFIG}$)"},
    Kind.NAME: {"type": "string", "pattern": f"^{PLAIN_NAME.pattern}$"},
    Kind.VARIANT: {"type": "string", "pattern": f"^{VARIANT_NAME.pattern}$"},
    Kind.TEMPLATE: {"type": "string", "minLength": 1},
    Kind.ABSOLUTE_PATHS: {"type": "array", "items": {"type": "string", "pattern": "^/"}},
    Kind.GLOBS: {"type": "array", "items": {"type": "string", "pattern": f"^{FILE_GLOB.pattern}$"}},
}


def _json_default(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value


def description(option: Option) -> str:
    text = option.doc
    if option.default_doc:
        text += f" Default: {option.default_doc}."
    return text


def _value_schema(option: Option) -> dict[str, Any]:
    """The schema of an option's value, without its description."""
    if option.kind == Kind.MAPPING:
        path = option.path
        schema = {"$ref": f"#/$defs/{option.shape}"} if option.shape else _object(path)
        if option.schema_extra:
            schema = {**schema, **option.schema_extra}
        if option.shorthand is not None:
            scalar = (
                {"enum": list(option.shorthand_allowed)} if option.shorthand_allowed else KIND_SCHEMA[option.shorthand]
            )
            return {"oneOf": [scalar, schema]}
        return schema
    if option.kind == Kind.LIST:
        schema = {"type": "array", "items": option_schema(item(option.path), described=False)}
        return {**schema, "minItems": 1} if option.required else schema
    if option.kind == Kind.NAMED:
        return {
            "type": "object",
            "propertyNames": {"pattern": f"^{PLAIN_NAME.pattern}$"},
            "additionalProperties": option_schema(item(option.path), described=False),
            **option.schema_extra,
        }
    schema = dict(KIND_SCHEMA[option.kind])
    if option.root_allowed:
        schema["pattern"] = ROOT_OR_DIRECTORY_PATTERN
    if option.allowed and option.kind == Kind.CHOICE:
        schema = {"enum": list(option.allowed)}
    elif option.allowed and option.kind == Kind.INTEGER:
        schema = {"enum": [int(a) for a in option.allowed]}
    return schema


def _object(path: str) -> dict[str, Any]:
    declared = children(path)
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {o.key: option_schema(o) for o in declared},
    }
    required = [o.key for o in declared if o.required]
    if required:
        schema["required"] = required
    return schema


def option_schema(option: Option, described: bool = True) -> dict[str, Any]:
    schema = _value_schema(option)
    if described:
        schema = {"description": description(option), **schema}
        if option.has_default and option.kind not in (Kind.MAPPING, Kind.LIST, Kind.NAMED):
            schema["default"] = _json_default(option.default)
        elif option.has_default and option.shorthand is not None:
            schema["default"] = option.default
    return schema


def _shape_schema(shape: str) -> dict[str, Any]:
    """A shape's object schema, from the keys of its first use (the same keys at every use)."""
    user = next(o for o in OPTIONS.values() if o.shape == shape)
    schema = _object(user.path)
    if shape in SHAPE_SCHEMA:
        schema.update(SHAPE_SCHEMA[shape])
    return schema


def matrix_schema() -> dict[str, Any]:
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "matrix.schema.json",
        "title": "matrix.yaml of torch-buildmatrix: the wheels to build across torch releases, Pythons and SDK "
        "versions",
        "description": "Generated from torch_buildmatrix/model/options.py by `torch-buildmatrix schema`; do not edit.",
        "$defs": {shape: _shape_schema(shape) for shape in SHAPES},
    }
    schema.update(_object(""))
    return schema


def schema_json() -> str:
    """The schema as committed: stable key order, two-space indent, a final newline."""
    return json.dumps(matrix_schema(), indent=2, ensure_ascii=False) + "\n"
