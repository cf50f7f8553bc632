"""Whether the committed table (docs/compatibility.json) still describes matrix.yaml: the ways it no longer does."""

from __future__ import annotations

from torch_buildmatrix.errors import MatrixError
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.publish.table import CompatTable, SdkColumn, available_from_table, release_key, sdk_info


def stale_problems(table: CompatTable, matrix: Matrix) -> list[str]:
    """Ways the recorded table no longer describes matrix.yaml (so docs/compatibility.json must be regenerated)."""
    problems = []
    if (table.plugin, table.plugin_version) != (matrix.plugin.distribution, str(matrix.plugin.version)):
        problems.append(
            f"plugin {table.plugin} {table.plugin_version} is now {matrix.plugin.distribution} {matrix.plugin.version}"
        )
    declared = [(release_key(r.minor, r.variant), str(r.version)) for r in matrix.torch]
    recorded = [(r.key, r.version) for r in table.releases]
    if declared != recorded:
        problems.append(f"torch releases {recorded} are now {declared}")
        return problems
    try:
        cells = expand(matrix, available_from_table(table, matrix))
    except MatrixError as exc:
        return [*problems, f"matrix.yaml no longer expands with the recorded Pythons: {exc}"]
    expected = [c.id for c in cells]
    if expected != [c.id for c in table.cells]:
        recorded_ids = {c.id for c in table.cells}
        gone = sorted(recorded_ids - set(expected))
        new = sorted(set(expected) - recorded_ids)
        problems.append(
            f"cells changed: {len(gone)} gone ({', '.join(gone[:10])}), {len(new)} new "
            f"({', '.join(new[:10])}), or their order"
        )
    pythons = tuple(str(p) for p in matrix.python)
    sdks = tuple(SdkColumn(v.tag, str(v.version)) for v in matrix.sdk.versions) if matrix.sdk is not None else ()
    if (pythons, sdk_info(matrix), sdks) != (table.pythons, table.sdk, table.sdks):
        problems.append("the matrix's Pythons or SDK (its versions, names or kind) changed")
    return problems
