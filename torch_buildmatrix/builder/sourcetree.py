"""A pristine copy of the plugin with the cell's patch series applied; plugin/ itself is never modified."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from torch_buildmatrix.errors import PatchError
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.util.atomic import write_text_atomic
from torch_buildmatrix.util.fingerprint import source_files
from torch_buildmatrix.util.process import run_captured


@dataclass(frozen=True)
class PatchSeries:
    """patches/<name>/series lists the series' patch files in the order they apply (quilt style)."""

    name: str
    directory: Path

    def patches(self) -> list[Path]:
        series = self.directory / "series"
        out = []
        for number, raw in enumerate(series.read_text().splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            patch = self.directory / line
            if not patch.is_file():
                raise PatchError(f"{series}:{number}: patch file '{line}' does not exist")
            out.append(patch)
        return out


def release_series(matrix: Matrix, release: TorchRelease) -> list[PatchSeries]:
    """The shim series a torch release applies, in order, from the matrix's patches directory."""
    return [PatchSeries(name, matrix.patches_dir / name) for name in release.patches]


def write_plugin_version(tree: Path, version_file: str, version: Version) -> Path:
    """The wheel's version into the patched copy (matrix.yaml's build.version-file), where the project's build reads
    it: made of plugin.version and the cell's local label (model.cellkey: plugin.label rendered for the cell)."""
    path = tree / version_file
    write_text_atomic(path, f"{version}\n")
    return path


def copy_pristine(source: Path, dest: Path, generated: frozenset[str] = frozenset()) -> Path:
    """Copy the source tree's files (no build outputs, none of `generated`) to dest/<source name>; returns the copy."""
    target = dest / source.name
    if target.exists():
        shutil.rmtree(target)
    for path in source_files(source, generated):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, out)
    return target


@dataclass(frozen=True)
class PatchSummary:
    """What a patch does, as git apply itself reads it (the same parser that applies it)."""

    paths: tuple[str, ...]  # every path written, deleted, or renamed/copied from or to (after -p1)
    binary: tuple[str, ...]  # paths with a binary change
    symlinks: tuple[str, ...]  # paths created as, or changed into, a symbolic link (mode 120000)


_BRACES = re.compile(r"^(?P<pre>[^{]*)\{(?P<old>[^}]*) => (?P<new>[^}]*)\}(?P<post>.*)$")


def _rename_paths(text: str) -> list[str]:
    """'plugin/{a => b}/c' or 'plugin/a => other/b' (git's --summary forms) as both full paths."""
    match = _BRACES.match(text)
    if match:
        pre, post = match["pre"], match["post"]
        return [_join(pre, match["old"], post), _join(pre, match["new"], post)]
    old, _, new = text.partition(" => ")
    return [old, new]


def _join(pre: str, middle: str, post: str) -> str:
    # git writes 'a/{ => b}/c' for a directory added in the middle: no doubled slash in the real path
    return (pre + middle + post).replace("//", "/")


def read_patch(patch: Path, root: Path) -> PatchSummary:
    """Ask `git apply --numstat --summary` (which applies nothing) what the patch touches; raises PatchError if it
    is not a patch git can read."""
    proc = run_captured(
        ["git", "apply", "-p1", "--numstat", "--summary", str(patch)], cwd=root, env=_outside_any_repository(root)
    )
    if proc.returncode != 0:
        raise PatchError(f"{patch}: git apply cannot read it: {proc.stderr.strip()}", proc.stderr[-4000:])
    paths: list[str] = []
    binary: list[str] = []
    symlinks: list[str] = []
    for line in proc.stdout.splitlines():
        fields = line.split("\t")
        if len(fields) == 3:  # numstat: added, deleted, path
            paths.append(fields[2])
            if fields[0] == "-" or fields[1] == "-":
                binary.append(fields[2])
            continue
        words = line.strip()
        if words.startswith(("rename ", "copy ")):
            paths += _rename_paths(words.split(" ", 1)[1].rsplit(" (", 1)[0])
        elif words.startswith(("create mode ", "delete mode ")):
            mode, name = words.split(" ", 3)[2:]
            paths.append(name)
            if mode == "120000" and words.startswith("create"):
                symlinks.append(name)
        elif words.startswith("mode change "):
            _old, _arrow, new, name = words.removeprefix("mode change ").split(" ", 3)
            paths.append(name)
            if new == "120000":
                symlinks.append(name)
    return PatchSummary(tuple(sorted(set(paths))), tuple(binary), tuple(symlinks))


def touched_paths(patch: Path, root: Path) -> list[str]:
    """Paths a patch touches, as git apply -p1 reads them (renames and copies: both sides)."""
    return list(read_patch(patch, root).paths)


def guard(patch: Path, root: Path, allowed_prefix: str) -> None:
    """Refuse a patch that reaches outside allowed_prefix/, makes a symlink, or carries a binary change."""
    summary = read_patch(patch, root)
    outside = [p for p in summary.paths if not _inside(p, allowed_prefix)]
    if outside:
        raise PatchError(f"{patch}: touches paths outside {allowed_prefix}/: {', '.join(outside)}")
    if summary.symlinks:
        raise PatchError(f"{patch}: creates symbolic links ({', '.join(summary.symlinks)}); patches carry text only")
    if summary.binary:
        raise PatchError(f"{patch}: has binary changes ({', '.join(summary.binary)}); patches carry text only")


def _inside(path: str, prefix: str) -> bool:
    parts = path.split("/")
    return (
        len(parts) > 1
        and parts[0] == prefix
        and not path.startswith('"')
        and all(p not in ("", ".", "..") for p in parts)
    )


def apply_series(series: list[PatchSeries], root: Path, allowed_prefix: str) -> list[str]:
    """Apply each series in order inside root (which holds the copied plugin dir); returns applied patch names."""
    applied = []
    for one in series:
        for patch in one.patches():
            guard(patch, root, allowed_prefix)
            proc = run_captured(
                ["git", "apply", "--verbose", "-p1", str(patch)], cwd=root, env=_outside_any_repository(root)
            )
            if proc.returncode != 0:
                raise PatchError(
                    f"{one.name}/{patch.name} does not apply: {_describe_failure(proc.stderr, patch)}",
                    proc.stderr[-4000:],
                )
            skipped = [line for line in proc.stderr.splitlines() if line.startswith("Skipped patch")]
            if skipped:  # git's silent way of not applying: never let it pass as applied
                raise PatchError(f"{one.name}/{patch.name} was not applied: {'; '.join(skipped)}", proc.stderr[-4000:])
            applied.append(f"{one.name}/{patch.name}")
    return applied


def _outside_any_repository(root: Path) -> dict[str, str]:
    """Inside another git work tree (say build/ of this project), `git apply` would take paths relative to
    that repository's top and silently skip them; stopping repository discovery at root's parent makes it
    patch root as a plain directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CEILING_DIRECTORIES"] = str(root.resolve().parent)
    return env


def _describe_failure(stderr: str, patch: Path) -> str:
    """git says 'patch failed: <file>:<line>'; name that file and the hunk of the patch starting there."""
    for line in stderr.splitlines():
        if "patch failed:" in line:
            where = line.split("patch failed:", 1)[1].strip()
            start = where.rsplit(":", 1)[-1]
            hunk = next(
                (
                    h
                    for h in patch.read_text(errors="replace").splitlines()
                    if h.startswith(f"@@ -{start},") or h.startswith(f"@@ -{start} ")
                ),
                "",
            )
            return f"hunk {hunk.strip() or '?'} failed at {where}"
    errors = [line.removeprefix("error:").strip() for line in stderr.splitlines() if line.startswith("error:")]
    return "; ".join(errors) if errors else (stderr.strip().splitlines() or ["git apply failed"])[-1]


def patches_line(release: TorchRelease, applied: list[str]) -> str:
    """What the source step applied to the copy, in a line of the build's log."""
    if applied:
        return f"source: applied {len(applied)} patch(es) for torch {release.version}: {', '.join(applied)}"
    if release.patches:
        return (
            f"source: no patch applied: the series of torch {release.version} ({', '.join(release.patches)}) hold none"
        )
    return f"source: no patch applied: torch {release.version} lists no patch series"
