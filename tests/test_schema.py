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
