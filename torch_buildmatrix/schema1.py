"""Everything the tool reads of schema 1, the files written before the SDK axis existed, when every project had a
driver: the records and compatibility tables it upgrades to schema 2's form, and the hints for a matrix.yaml of
schema 1. The only module that knows schema 1's names (`driver`, `driver_wheel`, `-drv<major>`).

Pure: it turns data into data and raises Schema1Error (a ValueError) where a record is not of schema 1's shape; the
readers name the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

# matrix.yaml: the keys of schema 1 and where schema 2 has them, the hint of their "unknown key" error.
MOVED_KEYS = {
    "driver": "sdk (with kind: wheel)",
    "timeouts.driver": "sdk",
    "exclude[].driver": "sdk",
    "include[].driver": "sdk",
}
SDK_KEY = "driver"  # schema 1's top-level key of what schema 2 calls sdk
MATRIX_HINT = (
    "schema version 1 is the format before the SDK axis (allowed: 2): write `sdk: {kind: wheel, name: driver, "
    'id: "drv{sdk_major}", distribution: ..., source: ..., versions: [...]}` for `driver:`, `sdk:` for '
    "`driver:` in rules, and `plugin.label` for the label (docs/reference/matrix-options.md)"
)

# Records: cells named `driver` (its API version) with ids ending -drv<major>, wheels labelled
# torch.<minor>.drv.<major>, driver wheels under driver/.
RECORD_LABEL = "torch.{minor}.drv.{major}"

# Tables: cells named by the driver's API major, ids ending -drv<major>, requirements carrying the label, driver
# wheels under driver/.
TABLE_SDK = {"kind": "wheel", "name": "driver", "title": "driver API"}
SDK_WHEEL = "driver_wheel"  # schema 1's key of the SDK wheel (tables still write it, as an alias, for old readers)


class Schema1Error(ValueError):
    """Data that claims schema 1 but is not of its shape; the message starts with the key."""


def migrate_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A cell record of schema 1 in schema 2's form; raises Schema1Error."""
    cell = record.get("cell")
    if not isinstance(cell, dict):
        raise Schema1Error(f"cell: expected an object, got {type(cell).__name__}")
    cell = dict(cell)
    driver = cell.pop("driver", None)
    if not isinstance(driver, str):
        raise Schema1Error(f"cell.driver: expected a string, got {driver!r:.60}")
    try:
        major, torch = Version(driver).major, Version(str(cell.get("torch")))
    except InvalidVersion:
        raise Schema1Error(f"cell: driver {driver!r:.60} or torch {cell.get('torch')!r:.60} is not a version") from None
    label = RECORD_LABEL.format(minor=f"{torch.major}.{torch.minor}", major=major)
    migrated = {**record, "schema_version": 2, "cell": {**cell, "sdk": driver, "label": label}}
    if SDK_WHEEL in migrated:
        migrated["sdk_wheel"] = migrated.pop(SDK_WHEEL)
    if migrated.get("failed_step") == "driver":
        migrated["failed_step"] = "sdk"
    if isinstance(migrated.get("steps"), list):
        migrated["steps"] = [
            {**step, "name": "sdk"} if isinstance(step, dict) and step.get("name") == "driver" else step
            for step in migrated["steps"]
        ]
    return migrated


def migrate_table(data: Mapping[str, Any]) -> dict[str, Any]:
    """A compatibility table of schema 1 in schema 2's form (raises KeyError, TypeError or ValueError where it is
    not of schema 1's shape, as the table reader expects of any table)."""
    columns = {d["major"]: {"tag": f"drv{d['major']}", "version": d["api"]} for d in data["drivers"]}
    cells = []
    for old in data["cells"]:
        cell = dict(old)
        cell["sdk"] = columns[cell.pop("driver")]["tag"]
        cell["label"] = str(cell["requirement"]).partition("+")[2]
        if cell.get(SDK_WHEEL) is not None:
            cell["sdk_wheel"] = cell[SDK_WHEEL]
        cells.append(cell)
    out = {k: v for k, v in data.items() if k not in ("drivers", "driver_distribution")}
    sdk = {**TABLE_SDK, "distribution": data["driver_distribution"]}
    return {**out, "schema_version": 2, "sdk": sdk, "sdks": list(columns.values()), "cells": cells}
