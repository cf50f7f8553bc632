"""The files of a staged site, listed once for the checks that run before it goes live.

A staged version is private until the swap (nobody else writes it), so one listing taken after the last write answers
"is this a file of the site?" for every link of every page, without a stat per link; and each file is hashed once,
however many pages list it. The bytes hashed are still read from disk: the check is of what was written.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class SiteFiles:
    """Relative POSIX paths of the regular files under `root` (a symlink to a file counts, as Path.is_file says; a
    symlinked directory is not entered, as Path.rglob does not), and their sha256 once read."""

    root: Path
    paths: frozenset[str]
    _sha256: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, root: Path) -> SiteFiles:
        return cls(root, frozenset(_walk(os.fspath(root), "")))

    def has(self, rel: str) -> bool:
        return rel in self.paths

    def sha256(self, rel: str) -> str:
        """The file's sha256 ('' when it is not a file of the site), read once."""
        if rel not in self.paths:
            return ""
        digest = self._sha256.get(rel)
        if digest is None:
            digest = hashlib.sha256((self.root / rel).read_bytes()).hexdigest()
            self._sha256[rel] = digest
        return digest


def _walk(directory: str, prefix: str) -> list[str]:
    out: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                out += _walk(entry.path, rel + "/")
            elif entry.is_file():
                out.append(rel)
    return out
