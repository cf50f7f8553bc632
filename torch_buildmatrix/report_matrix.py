"""Pure views of the expanded cells and their builds: tables for people, strategy matrices for GitHub Actions (held to
the job limit of builder/selection.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from torch_buildmatrix.builder.selection import check_github_limit
from torch_buildmatrix.model.builds import Build
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName


def cells_table(cells: list[Cell], runners: Mapping[str, str] | None = None, sdk: str | None = None) -> Table:
    """The cells, one row each; with runners (cell id -> "local: /usr/bin/python3.13"), which runner builds it; sdk
    names the SDK column (none without an SDK)."""
    table = Table(title="build matrix")
    sdk_name: tuple[str, ...] = (sdk,) if sdk else ()
    columns = ("cell", "torch", "variant", "python", *sdk_name, "patches", "build", *(("runner",) if runners else ()))
    for column in columns:
        table.add_column(column)
    for row in _rows(cells, runners, sdk):
        table.add_row(*row)
    return table


# Beyond this many rows a table (cells or builds) is printed as plain aligned text: rich measures every cell of every
# column, which took 4.5 s for 1 000 rows here (45 s for 10 000); plain text takes a few milliseconds.
RICH_ROWS = 200


def _rows(cells: list[Cell], runners: Mapping[str, str] | None, sdk: str | None) -> list[tuple[str, ...]]:
    rows = []
    for cell in cells:
        row = cell.as_dict()
        extra = (runners.get(cell.id, "-"),) if runners else ()
        sdk_value = (row["sdk"],) if sdk else ()
        rows.append(
            (
                row["id"],
                row["torch"],
                row["variant"],
                row["python"],
                *sdk_value,
                row["patches"] or "-",
                cell.build.id,
                *extra,
            )
        )
    return rows


def cells_text(cells: list[Cell], runners: Mapping[str, str] | None = None, sdk: str | None = None) -> str:
    """The same table as cells_table, as plain text in aligned columns (linear in the cells)."""
    sdk_name: tuple[str, ...] = (sdk,) if sdk else ()
    head = ("cell", "torch", "variant", "python", *sdk_name, "patches", "build", *(("runner",) if runners else ()))
    return _aligned(head, _rows(cells, runners, sdk))


def _aligned(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A heading, a rule and the rows, in columns as wide as their widest value."""
    every = [head, *rows]
    widths = [max(len(row[i]) for row in every) for i in range(len(head))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip() for row in every]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _build_head(runners: Mapping[str, str] | None, sdk: str | None) -> tuple[str, ...]:
    sdk_name: tuple[str, ...] = (sdk,) if sdk else ()
    return (
        "build",
        "torch",
        "variant",
        "built with",
        *sdk_name,
        "wheel label",
        "cells",
        *(("runner",) if runners else ()),
    )


def _build_rows(builds: list[Build], runners: Mapping[str, str] | None, sdk: str | None) -> list[tuple[str, ...]]:
    rows = []
    for build in builds:
        sdk_value = (str(build.key.sdk),) if sdk else ()
        extra = (runners.get(build.id, "-"),) if runners else ()
        rows.append(
            (
                build.id,
                str(build.release.version),
                build.release.variant,
                str(build.python),
                *sdk_value,
                build.key.label,
                str(len(build.cells)),
                *extra,
            )
        )
    return rows


def builds_table(builds: list[Build], runners: Mapping[str, str] | None = None, sdk: str | None = None) -> Table:
    """The builds, one row each: what it is built against, with which Python, for which cells (and which runner)."""
    table = Table(title="builds")
    for column in _build_head(runners, sdk):
        table.add_column(column)
    for row in _build_rows(builds, runners, sdk):
        table.add_row(*row)
    return table


def builds_text(builds: list[Build], runners: Mapping[str, str] | None = None, sdk: str | None = None) -> str:
    """The same table as builds_table, as plain text in aligned columns (linear in the builds)."""
    return _aligned(_build_head(runners, sdk), _build_rows(builds, runners, sdk))


def runner_plan_lines(names: list[str], runners: Mapping[str, str]) -> list[str]:
    """Which runner makes which builds and tests which cells, and why, one line per reason:
    "local: /usr/bin/python3.11: build torch2.13-cpu-drv2, torch2.13-cpu-cp311-drv2"."""
    by_reason: dict[str, list[str]] = {}
    for name in names:
        by_reason.setdefault(runners[name], []).append(name)
    return [f"{reason}: {', '.join(ids)}" for reason, ids in by_reason.items()]


def build_artifact(build_id: str) -> str:
    return f"build-{build_id}"


def github_matrix(cells: list[Cell], builds: list[Build], runners: Mapping[Python, RunnerName]) -> dict[str, Any]:
    """Two strategy.matrix objects, `builds` and `cells`: one include entry per build (the arguments that make it
    alone, its runner, its artifact) and per cell (the arguments that select it, tested with its build's artifact:
    --prebuilt), each with the runner chosen for its Python on the machine planning; raises MatrixTooLarge beyond
    what one GitHub Actions matrix runs."""
    check_github_limit(cells, builds)
    made = [
        {
            "build": build.id,
            "torch_version": str(build.release.version),
            "variant": build.release.variant,
            "python": str(build.python),
            "runner": str(runners[build.python]),
            "artifact": build_artifact(build.id),
            "args": f"--build {build.id} --builds-only",
        }
        for build in builds
    ]
    include = []
    # With smoke.tiers, the deep cell's job runs its build's deep tier too (build --prebuilt knows it from the plan).
    deep_cells = {b.deep_cell for b in builds if b.deep_cell is not None}
    for cell in cells:
        row = cell.as_dict()
        sdk = {"sdk": row["sdk"]} if cell.sdk is not None else {}
        sdk_args = f" --sdk {row['sdk']}" if cell.sdk is not None else ""
        include.append(
            {
                "cell": row["id"],
                "torch": row["torch_minor"],
                "torch_version": row["torch"],
                "python": row["python"],
                **sdk,
                "variant": row["variant"],
                "runner": str(runners[cell.python]),
                "artifact": f"cell-{row['id']}",
                "build": cell.build.id,
                "build_artifact": build_artifact(cell.build.id),
                "args": f"--torch {row['torch_minor']} --python {row['python']}{sdk_args} --variant {row['variant']} "
                "--prebuilt",
                **({"deep": cell.id in deep_cells} if deep_cells else {}),
            }
        )
    return {"builds": {"include": made}, "cells": {"include": include}}
