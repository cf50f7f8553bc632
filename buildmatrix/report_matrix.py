"""Pure views of the expanded cells: a table for people, a strategy matrix for GitHub Actions."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from buildmatrix.model.cells import Cell


def cells_table(cells: list[Cell]) -> Table:
    table = Table(title="build matrix")
    for column in ("cell", "torch", "variant", "python", "driver", "patches"):
        table.add_column(column)
    for cell in cells:
        row = cell.as_dict()
        table.add_row(row["id"], row["torch"], row["variant"], row["python"], row["driver"], row["patches"] or "-")
    return table


def github_matrix(cells: list[Cell]) -> dict[str, Any]:
    """A strategy.matrix object: one include entry per cell, with the arguments that select it."""
    include = []
    for cell in cells:
        row = cell.as_dict()
        include.append(
            {
                "cell": row["id"],
                "torch": row["torch_minor"],
                "python": row["python"],
                "driver": str(cell.driver.major),
                "variant": row["variant"],
                "args": f"--torch {row['torch_minor']} --python {row['python']} --driver {cell.driver.major} --variant {row['variant']}",
            }
        )
    return {"include": include}
