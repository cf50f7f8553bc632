"""Pure views of the expanded cells: a table for people, a strategy matrix for GitHub Actions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from buildmatrix.errors import MatrixTooLarge
from buildmatrix.model.cells import Cell
from buildmatrix.model.vocab import RunnerName


def cells_table(cells: list[Cell], runners: Mapping[str, str] | None = None, sdk: str | None = None) -> Table:
    """The cells, one row each; with runners (cell id -> "local: /usr/bin/python3.13"), which runner builds it; sdk
    names the SDK column (none without an SDK)."""
    table = Table(title="build matrix")
    sdk_name: tuple[str, ...] = (sdk,) if sdk else ()
    for column in ("cell", "torch", "variant", "python", *sdk_name, "patches", *(("runner",) if runners else ())):
        table.add_column(column)
    for row in _rows(cells, runners, sdk):
        table.add_row(*row)
    return table


# Beyond this many rows the table is printed as plain aligned text: rich measures every cell of every column, which
# took 4.5 s for 1 000 rows here (45 s for 10 000); plain text takes a few milliseconds.
RICH_ROWS = 200


def _rows(cells: list[Cell], runners: Mapping[str, str] | None, sdk: str | None) -> list[tuple[str, ...]]:
    rows = []
    for cell in cells:
        row = cell.as_dict()
        extra = (runners.get(cell.id, "-"),) if runners else ()
        sdk_value = (row["sdk"],) if sdk else ()
        rows.append((row["id"], row["torch"], row["variant"], row["python"], *sdk_value, row["patches"] or "-", *extra))
    return rows


def cells_text(cells: list[Cell], runners: Mapping[str, str] | None = None, sdk: str | None = None) -> str:
    """The same table as cells_table, as plain text in aligned columns (linear in the cells)."""
    sdk_name: tuple[str, ...] = (sdk,) if sdk else ()
    head = ("cell", "torch", "variant", "python", *sdk_name, "patches", *(("runner",) if runners else ()))
    rows = [head, *_rows(cells, runners, sdk)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def runner_plan_lines(cells: list[Cell], runners: Mapping[str, str]) -> list[str]:
    """Which runner builds which cells and why, one line per reason: "local: /usr/bin/python3.11: torch2.13-..."."""
    by_reason: dict[str, list[str]] = {}
    for cell in cells:
        by_reason.setdefault(runners[cell.id], []).append(cell.id)
    return [f"{reason}: {', '.join(ids)}" for reason, ids in by_reason.items()]


# GitHub Actions runs at most this many jobs from one matrix.
GITHUB_MATRIX_LIMIT = 256


def check_github_limit(cells: list[Cell]) -> None:
    """Raise MatrixTooLarge beyond what one GitHub Actions matrix runs."""
    if len(cells) > GITHUB_MATRIX_LIMIT:
        raise MatrixTooLarge(
            f"{len(cells)} cells, but a GitHub Actions matrix runs at most {GITHUB_MATRIX_LIMIT} jobs; narrow the "
            "selection (--torch, --python, --sdk, --variant) and run the workflow once per part"
        )


def github_matrix(cells: list[Cell], runners: Mapping[str, RunnerName]) -> dict[str, Any]:
    """A strategy.matrix object: one include entry per cell, with the arguments that select it, the runner that
    builds it (cell id -> runner, as chosen for the machine planning), its job name and its artifact's name;
    raises MatrixTooLarge beyond what one GitHub Actions matrix runs."""
    check_github_limit(cells)
    include = []
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
                "runner": str(runners[cell.id]),
                "artifact": f"cell-{row['id']}",
                "args": f"--torch {row['torch_minor']} --python {row['python']}{sdk_args} --variant {row['variant']}",
            }
        )
    return {"include": include}
