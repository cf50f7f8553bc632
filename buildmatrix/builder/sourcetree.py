"""A pristine copy of the plugin with the cell's patch series applied; plugin/ itself is never modified."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from buildmatrix.errors import PatchError
from buildmatrix.util.fingerprint import source_files


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


def copy_pristine(source: Path, dest: Path) -> Path:
    """Copy the source tree's files (no build outputs) to dest/<source name>; returns the copy."""
    target = dest / source.name
    if target.exists():
        shutil.rmtree(target)
    for path in source_files(source):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, out)
    return target


def touched_paths(patch: Path) -> list[str]:
    """Paths a unified diff touches, as written after a/ b/ (git apply -p1)."""
    paths = []
    for line in patch.read_text(errors="replace").splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t", 1)[0].strip()
            if name != "/dev/null":
                paths.append(name.split("/", 1)[1] if name.startswith(("a/", "b/")) else name)
    return sorted(set(paths))


def apply_series(series: list[PatchSeries], root: Path, allowed_prefix: str) -> list[str]:
    """Apply each series in order inside root (which holds the copied plugin dir); returns applied patch names."""
    applied = []
    for one in series:
        for patch in one.patches():
            outside = [p for p in touched_paths(patch) if not p.startswith(allowed_prefix + "/")]
            if outside:
                raise PatchError(f"{patch}: touches paths outside {allowed_prefix}/: {', '.join(outside)}")
            proc = subprocess.run(
                ["git", "apply", "--verbose", "-p1", str(patch)],
                cwd=root,
                capture_output=True,
                text=True,
                env=_outside_any_repository(root),
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
