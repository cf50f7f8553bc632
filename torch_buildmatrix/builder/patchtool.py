"""Maintain the per-release shim series: check that they apply, open a release's patched tree to edit, refresh one
(`patches`, the command's one function)."""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from torch_buildmatrix.builder.sourcetree import PatchSeries, apply_series, copy_pristine, release_series
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import PatchError, UserError
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.util.process import run_captured

# Smoke tests gated on a torch range say so with requires_torch("<2.5") (see plugin/tests/conftest.py).
GATE = re.compile(r"""requires_torch\(\s*["']([^"']+)["']""")


@dataclass
class CheckReport:
    applied: dict[str, list[str]] = field(default_factory=dict)  # release -> patches applied
    failures: list[str] = field(default_factory=list)
    unused_series: list[str] = field(default_factory=list)
    dead_gates: list[str] = field(default_factory=list)  # "file:line: requires_torch('<2.1') matches no release"

    @property
    def ok(self) -> bool:
        return not (self.failures or self.unused_series or self.dead_gates)


def series_dirs(patches_root: Path) -> list[Path]:
    return sorted(p for p in patches_root.iterdir() if (p / "series").is_file()) if patches_root.is_dir() else []


def check(matrix: Matrix) -> CheckReport:
    """Apply every release's series to a pristine copy; report failures, unused series and dead version gates."""
    report = CheckReport()
    plugin = matrix.plugin.source
    for release in matrix.torch:
        label = f"torch {release.minor} ({release.variant})"
        with tempfile.TemporaryDirectory(prefix="patch-check-") as tmp:
            copy_pristine(plugin, Path(tmp), matrix.contract.build.generated)
            try:
                report.applied[label] = apply_series(release_series(matrix, release), Path(tmp), plugin.name)
            except PatchError as exc:
                report.failures.append(f"{label}: {exc.message}")
    used = {name for release in matrix.torch for name in release.patches}
    report.unused_series = [d.name for d in series_dirs(matrix.patches_dir) if d.name not in used]
    report.dead_gates = dead_gates(matrix)
    return report


def dead_gates(matrix: Matrix) -> list[str]:
    """Version-gated smoke tests whose torch range matches no release of the matrix any more."""
    out = []
    for path in sorted(matrix.plugin.smoke_tests.rglob("*.py")):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            for text in GATE.findall(line):
                try:
                    spec = SpecifierSet(text)
                except InvalidSpecifier:
                    out.append(
                        f"{path.relative_to(matrix.root)}:{number}: requires_torch({text!r}) is not a valid specifier"
                    )
                    continue
                if not any(spec.contains(r.version) for r in matrix.torch):
                    out.append(
                        f"{path.relative_to(matrix.root)}:{number}: requires_torch({text!r}) matches no torch release "
                        "of the matrix"
                    )
    return out


def _git(args: list[str], cwd: Path) -> str:
    proc = run_captured(["git", *args], step="git", cwd=cwd)
    if proc.returncode != 0:
        raise UserError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def _find_release(matrix: Matrix, minor: str) -> TorchRelease:
    release = matrix.release(minor)
    if release is None:
        known = ", ".join(r.minor for r in matrix.torch)
        raise UserError(f"torch {minor} is not in {matrix.path} (known: {known})")
    return release


def edit_tree(matrix: Matrix, minor: str, workdir: Path) -> Path:
    """A git work tree of the plugin as the release sees it; one commit per applied series, tag `base` before the last.

    Edit the tree (commit or not), then `refresh` turns everything after `base` into the release's own series.
    """
    release = _find_release(matrix, minor)
    tree = workdir / f"torch{minor}"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    copy_pristine(matrix.plugin.source, tree, matrix.contract.build.generated)
    _git(["init", "-q"], tree)
    identity = ["-c", "user.name=patches", "-c", "user.email=patches@localhost"]
    _git([*identity, "add", "-A"], tree)
    _git([*identity, "commit", "-q", "-m", "pristine plugin"], tree)
    series = release_series(matrix, release)
    for index, one in enumerate(series):
        if index == len(series) - 1 and _own_series(matrix, release, one):
            break  # the release's own series is what refresh rewrites: leave it out of the base
        apply_series([one], tree, matrix.plugin.source.name)
        _git([*identity, "add", "-A"], tree)
        _git([*identity, "commit", "-q", "--allow-empty", "-m", f"series {one.name}"], tree)
    _git(["tag", "-f", "base"], tree)
    own = series[-1] if series and _own_series(matrix, release, series[-1]) else None
    if own is not None:
        apply_series([own], tree, matrix.plugin.source.name)  # present it applied, ready for editing
    return tree


def _own_series(matrix: Matrix, release: TorchRelease, series: PatchSeries) -> bool:
    return sum(series.name in r.patches for r in matrix.torch) == 1 and series.name == release.minor


@dataclass(frozen=True)
class RefreshResult:
    files: list[Path]
    missing_from_matrix: bool  # the release does not list its own series yet


def refresh(matrix: Matrix, minor: str, tree: Path) -> RefreshResult:
    """Write patches/<minor>/ (series + one patch) from the edited tree's changes since `base`."""
    release = _find_release(matrix, minor)
    if not (tree / ".git").is_dir():
        raise UserError(f"{tree} is not an edit tree; run `torch-buildmatrix patches edit {minor}` first")
    _git(["add", "-A"], tree)
    diff = _git(["diff", "--cached", "--binary", "base", "--", matrix.plugin.source.name], tree)
    target = matrix.patches_dir / minor
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    written = []
    header = (
        f"# Shims for torch {minor}: generated by `torch-buildmatrix patches refresh {minor}` from an edited tree.\n"
    )
    names = []
    if diff.strip():
        patch = target / f"0001-torch-{minor}.patch"
        patch.write_text(diff)
        names.append(patch.name)
        written.append(patch)
    (target / "series").write_text(header + "".join(f"{n}\n" for n in names))
    written.append(target / "series")
    return RefreshResult(written, minor not in release.patches)


class PatchAction(StrEnum):
    CHECK = "check"  # every release's series applies; no series unused, no dead version gate
    EDIT = "edit"  # a release's patched tree, to edit
    REFRESH = "refresh"  # the release's own series rewritten from the edited tree


@dataclass(frozen=True)
class PatchesOptions:
    matrix: Path
    action: PatchAction
    release: str | None = None  # the torch minor of edit and refresh, e.g. "2.4"


@dataclass(frozen=True)
class PatchesOutcome:
    """What the action found or made: check's report, edit's tree, or refresh's result."""

    matrix: Matrix
    check: CheckReport | None = None
    tree: Path | None = None
    refresh: RefreshResult | None = None


def patches(options: PatchesOptions) -> PatchesOutcome:
    """The `patches` command: edit and refresh work in the project's build area (patch-edit/ beside build/)."""
    matrix = load_matrix(options.matrix.resolve())
    edit_root = Workspace.for_root(matrix.root).build_dir.parent / "patch-edit"
    if options.action == PatchAction.CHECK:
        return PatchesOutcome(matrix, check=check(matrix))
    release = options.release
    if not release:
        raise UserError(f"`patches {options.action}` needs a torch release, e.g. `patches {options.action} 2.4`")
    if options.action == PatchAction.EDIT:
        return PatchesOutcome(matrix, tree=edit_tree(matrix, release, edit_root))
    return PatchesOutcome(matrix, refresh=refresh(matrix, release, edit_root / f"torch{release}"))
