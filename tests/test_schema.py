"""matrix.schema.json stays in step with the parser: same keys, same choices, and it accepts our matrix.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from buildmatrix.model import matrix as model

ROOT = Path(__file__).parent.parent
SCHEMA = json.loads((ROOT / "matrix.schema.json").read_text())


def test_project_matrix_validates() -> None:
    jsonschema.validate(yaml.safe_load((ROOT / "matrix.yaml").read_text()), SCHEMA)


@pytest.mark.parametrize(
    ("schema_keys", "code_keys"),
    [
        (SCHEMA["properties"], model.TOP_KEYS),
        (SCHEMA["properties"]["plugin"]["properties"], model.PLUGIN_KEYS),
        (SCHEMA["properties"]["driver"]["properties"], model.DRIVER_KEYS),
        (SCHEMA["properties"]["torch"]["items"]["properties"], model.TORCH_KEYS),
        (SCHEMA["$defs"]["rule"]["properties"], model.RULE_KEYS),
        (SCHEMA["properties"]["images"]["additionalProperties"]["properties"], model.IMAGE_KEYS),
        (SCHEMA["properties"]["timeouts"]["properties"], model.TIMEOUT_KEYS),
        (
            SCHEMA["properties"]["torch"]["items"]["properties"]["wheels"]["oneOf"][2]["properties"],
            model.INDEX_SOURCE_KEYS,
        ),
    ],
)
def test_same_keys(schema_keys: dict, code_keys: tuple[str, ...]) -> None:  # type: ignore[type-arg]
    assert set(schema_keys) == set(code_keys)


def test_same_choices() -> None:
    assert tuple(SCHEMA["properties"]["runner"]["enum"]) == model.RUNNERS
    assert tuple(SCHEMA["$defs"]["variant"]["enum"]) == model.VARIANTS
    assert (
        tuple(SCHEMA["properties"]["torch"]["items"]["properties"]["wheels"]["oneOf"][0]["enum"]) == model.WHEEL_SOURCES
    )


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("python",), ["3.11", "3.11.0"]),
        (("python",), ["3.11", "3.11"]),
        (("plugin", "source"), "/etc"),
        (("plugin", "source"), "../outside"),
        (("driver", "source"), "."),
        (("images",), {"deb": {"base": "debootstrap:../../X", "python": ["3.11"]}}),
        (("images",), {"deb": {"base": "/srv/rootfs", "python": ["3.11"]}}),
        (("images",), {"../x": {"base": "debian:12", "python": ["3.11"]}}),
    ],
)
def test_schema_refuses_what_the_parser_refuses(where: tuple[str, ...], value: object) -> None:
    document = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    target = document
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def test_schema_accepts_image_references() -> None:
    document = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    document["images"] = {
        "a": {"base": "quay.io/pypa/manylinux_2_28_x86_64:2024.11.16-1", "python": ["3.11"]},
        "b": {"base": "localhost:5000/debian:12", "python": ["3.11"]},
        "c": {"base": "debian:12", "python": ["3.11"]},
    }
    jsonschema.validate(document, SCHEMA)


def test_same_name_patterns() -> None:
    images = SCHEMA["properties"]["images"]
    base = images["additionalProperties"]["properties"]["base"]["pattern"]
    assert base == f"^(?:{model.DEBOOTSTRAP_BASE.pattern}|{model.IMAGE_REFERENCE.pattern})$"
    assert images["propertyNames"]["pattern"] == f"^{model.PLAIN_NAME.pattern}$"
    assert (
        SCHEMA["properties"]["torch"]["items"]["properties"]["patches"]["items"]["pattern"]
        == f"^{model.PLAIN_NAME.pattern}$"
    )


def test_same_distribution_pattern() -> None:
    for part in ("plugin", "driver"):
        pattern = SCHEMA["properties"][part]["properties"]["distribution"]["pattern"]
        assert pattern == f"^{model.DISTRIBUTION_NAME.pattern}$"
