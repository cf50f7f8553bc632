"""Compatibility tables of schema 1, read as schema 2: written when every project had a driver (cells named by the
driver's API major, ids ending -drv<major>, requirements carrying the label, driver wheels under driver/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Tables of schema 1 were written when every project had a driver: cells named by the driver's API major, ids ending
# -drv<major>, requirements carrying the label, driver wheels under driver/.
V1_SDK = {"kind": "wheel", "name": "driver", "title": "driver API"}


V1_SDK_WHEEL = "driver_wheel"


def migrate_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A schema 1 table in schema 2's form."""
    columns = {d["major"]: {"tag": f"drv{d['major']}", "version": d["api"]} for d in data["drivers"]}
    cells = []
    for old in data["cells"]:
        cell = dict(old)
        cell["sdk"] = columns[cell.pop("driver")]["tag"]
        cell["label"] = str(cell["requirement"]).partition("+")[2]
        if cell.get(V1_SDK_WHEEL) is not None:
            cell["sdk_wheel"] = cell[V1_SDK_WHEEL]
        cells.append(cell)
    out = {k: v for k, v in data.items() if k not in ("drivers", "driver_distribution")}
    sdk = {**V1_SDK, "distribution": data["driver_distribution"]}
    return {**out, "schema_version": 2, "sdk": sdk, "sdks": list(columns.values()), "cells": cells}
