"""Pure views of the expanded cells: a table for people, a strategy matrix for GitHub Actions."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from buildmatrix.errors import MatrixTooLarge
from buildmatrix.model.cells import Cell


def cells_table(cells: list[Cell]) -> Table:
    table = Table(title="build matrix")
    for column in ("cell", "torch", "variant", "python", "driver", "patches"):
        table.add_column(column)
    for cell in cells:
        row = cell.as_dict()
        table.add_row(row["id"], row["torch"], row["variant"], row["python"], row["driver"], row["patches"] or "-")
    return table


# GitHub Actions runs at most this many jobs from one matrix.
GITHUB_MATRIX_LIMIT = 256


def github_matrix(cells: list[Cell]) -> dict[str, Any]:
    """A strategy.matrix object: one include entry per cell, with the arguments that select it, its job name and
    its artifact's name; raises MatrixTooLarge beyond what one GitHub Actions matrix runs."""
    if len(cells) > GITHUB_MATRIX_LIMIT:
        raise MatrixTooLarge(
            f"{len(cells)} cells, but a GitHub Actions matrix runs at most {GITHUB_MATRIX_LIMIT} jobs; narrow the "
            "selection (--torch, --python, --driver, --variant) and run the workflow once per part"
        )
    include = []
    for cell in cells:
        row = cell.as_dict()
        include.append(
            {
                "cell": row["id"],
                "torch": row["torch_minor"],
                "torch_version": row["torch"],
                "python": row["python"],
                "driver": str(cell.driver.major),
                "variant": row["variant"],
                "artifact": f"cell-{row['id']}",
                "args": (
                    f"--torch {row['torch_minor']} --python {row['python']} "
                    f"--driver {cell.driver.major} --variant {row['variant']}"
                ),
            }
        )
    return {"include": include}
