"""Content hashes of everything a cell's result depends on, so unchanged cells are not rebuilt."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Build outputs and caches inside source trees never count as inputs.
# wheels/ and build/ are the workspace: a source tree that is the project itself (plugin.source ".") holds them.
IGNORED_DIRS = {
    "build",
    "wheels",
    "dist",
    ".venv",
    ".tox",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".nox",
    ".git",
}
IGNORED_SUFFIXES = (".pyc", ".so", ".o", ".egg-info")


def source_files(root: Path, generated: frozenset[str] = frozenset()) -> list[Path]:
    """Files of a source tree in a stable order, without build outputs: caches, compiled files, and the files named in
    `generated` (matrix.yaml's build.generated: what the project's build writes into its own tree)."""
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in IGNORED_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and not path.name.endswith(IGNORED_SUFFIXES) and path.name not in generated:
            out.append(path)
    return out


def tree_hash(
    root: Path,
    exclude: frozenset[str] = frozenset(),
    include: frozenset[str] | None = None,
    generated: frozenset[str] = frozenset(),
) -> str:
    """Hash of a tree's source files; `exclude` names paths relative to root (POSIX form) left out, a file or a
    directory with everything under it, `include` (when given) the only ones counted, `generated` file names the build
    writes (see source_files)."""
    digest = hashlib.sha256()
    for path in source_files(root, generated):
        rel = path.relative_to(root).as_posix()
        if _excluded(rel, exclude) or (include is not None and rel not in include):
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _excluded(rel: str, exclude: frozenset[str]) -> bool:
    return rel in exclude or any(rel.startswith(f"{e}/") for e in exclude)


def files_hash(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class FileHashes:
    """sha256 of files, each hashed once while its size, time and inode stay: the wheel a build made is checked for
    the build and for each of its cells in one run, and the run lock keeps others from writing it meanwhile."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int, int], str] = {}

    def of(self, path: Path) -> str:
        stat = path.stat()
        key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if key not in self._known:
            self._known[key] = file_sha256(path)
        return self._known[key]


def inputs_hash(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
