"""`outdated`: compare matrix.yaml with the registry; with --apply, write the edits into matrix.yaml only if the result
loads and expands, then probe each release they add or move; the Markdown report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import UpdateError, UserError
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.model.matrixedit import apply_edits
from torch_buildmatrix.model.outdated import AddRelease, Edit, SetVersion, compare, read_sources
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import DEFAULT_INDEX, Registry
from torch_buildmatrix.util.atomic import write_text_atomic
from torch_buildmatrix.util.http import NETWORK_DEADLINE
from torch_buildmatrix.vocab import RunnerName


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


@dataclass(frozen=True)
class OutdatedOptions:
    matrix: Path = Path("matrix.yaml")
    offline: bool = False  # the cached registry answers only
    network_deadline: float = NETWORK_DEADLINE  # seconds for all its registry reads
    index_url: str = DEFAULT_INDEX  # the PEP 691 simple index torch is read from
    apply: bool = False  # edit matrix.yaml, then probe each new or moved release
    probe: bool = True  # with apply: run the drift probe of each changed release
    variants: frozenset[str] | None = None  # new minors of these variants only (None: any)
    runner: str | None = None  # the probe's runner (None: local)
    report: Path | None = None  # the Markdown report (None: build/outdated/report.md)


@dataclass(frozen=True)
class OutdatedReport:
    text: str  # the Markdown report, as written
    path: Path


def outdated(options: OutdatedOptions, say: Callable[[str], None]) -> OutdatedReport:
    """Compare matrix.yaml with the registry; with apply, edit it and probe each changed release (a release the
    probe cannot run on is reported and the others are probed); write the report. `say` hears each step."""
    from torch_buildmatrix.builder import probe
    from torch_buildmatrix.report_outdated import outdated_markdown

    matrix = load_matrix(options.matrix.resolve())
    registry = Registry(
        Workspace.for_root(matrix.root).cache_dir / "registry",
        index_url=options.index_url,
        offline=options.offline,
        total=options.network_deadline,
    )
    comparison = compare(matrix, read_sources(matrix, registry), options.variants)
    probes: dict[TorchRelease, probe.ProbeReport | str] = {}
    applied = False
    if options.apply and comparison.edits:
        result = write_edits(matrix, comparison.edits, registry)
        applied = True
        say(f"edited {matrix.path.name}: {len(comparison.edits)} change(s)")
        for release in result.changed:
            if not options.probe:
                probes[release] = "not probed (`--no-probe`)"
                continue
            # One release the probe cannot run on (no interpreter, a locked workspace) leaves the others probed.
            try:
                asked = RunnerName(options.runner or RunnerName.LOCAL)
                cell, runner, why = probe.probe_cell_here(release, result.matrix, registry, asked)
                say(f"drift probe of torch {release.version} as cell {cell.id} ({why})")
                report = probe.run_probe(
                    result.matrix,
                    release,
                    cell,
                    registry,
                    runner=runner,
                    progress=lambda cell_id, what: say(f"  {cell_id}: {what}"),
                )
            except UserError as exc:
                probes[release] = f"not probed: {exc}"
                say(f"torch {release.version}: {probes[release]}")
                continue
            probes[release] = report
            say(f"torch {release.version}: {report.verdict()}")
    text = outdated_markdown(comparison, applied, probes, matrix.root)
    path = options.report.resolve() if options.report else report_path(matrix)
    write_text_atomic(path, text)
    return OutdatedReport(text, path)
