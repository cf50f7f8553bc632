"""`outdated --apply`: write the edits into matrix.yaml only if the result loads and expands; name what to probe."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from buildmatrix.errors import UpdateError, UserError
from buildmatrix.model.cells import expand
from buildmatrix.model.loader import load_matrix
from buildmatrix.model.matrix import Matrix, TorchRelease
from buildmatrix.model.matrixedit import apply_edits
from buildmatrix.model.outdated import AddRelease, Edit, SetVersion
from buildmatrix.model.pythons import Python
from buildmatrix.model.registry import Registry
from buildmatrix.util.atomic import write_text_atomic


@dataclass(frozen=True)
class Update:
    """What --apply did: the matrix as now written, and its releases that are new or moved (to probe)."""

    matrix: Matrix
    changed: tuple[TorchRelease, ...]
    before: str
    after: str


def write_edits(matrix: Matrix, edits: list[Edit], registry: Registry) -> Update:
    """Edit matrix.yaml in place (atomically); if the edited matrix would not load or expand, leave it unchanged."""
    before = matrix.path.read_text(encoding="utf-8")
    after = apply_edits(matrix.path, before, edits)
    # The candidate sits beside matrix.yaml so its relative paths (plugin/, patches/) resolve the same way.
    candidate = matrix.path.with_name(f".{matrix.path.name}.outdated")
    try:
        candidate.write_text(after, encoding="utf-8")
        edited = load_matrix(candidate)
        expand(edited, {release: _published(edited, release, registry) for release in edited.torch})
    except UserError as exc:
        problems = str(exc).replace(str(candidate), f"{matrix.path} (as edited)")
        raise UpdateError(
            f"the edits outdated would make leave an invalid matrix, so {matrix.path} is unchanged:\n{problems}"
        ) from None
    finally:
        candidate.unlink(missing_ok=True)
    write_text_atomic(matrix.path, after)
    edited = load_matrix(matrix.path)
    return Update(edited, changed_releases(edited, edits), before, after)


def _published(matrix: Matrix, release: TorchRelease, registry: Registry) -> set[Python]:
    """The release's Pythons; as declared when its source cannot be read here (CI has no find-links of this machine)."""
    try:
        return registry.pythons(release)
    except UserError:
        return set(release.python or matrix.python)


def changed_releases(matrix: Matrix, edits: list[Edit]) -> tuple[TorchRelease, ...]:
    """The releases of the edited matrix that the edits added or moved, in matrix order."""
    wanted = set()
    for edit in edits:
        version = edit.new if isinstance(edit, SetVersion) else edit.version
        assert isinstance(edit, SetVersion | AddRelease)
        wanted.add((version, str(edit.variant)))
    return tuple(r for r in matrix.torch if (r.version, r.variant) in wanted)


def report_path(matrix: Matrix) -> Path:
    return matrix.root / "build" / "outdated" / "report.md"
