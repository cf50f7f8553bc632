"""The build epoch: what a build's and a cell's key hold of this tool's own code, so that a refactor rebuilds nothing.

A commit that changes what a build makes or how a cell is judged bumps BUILD_EPOCH (every build and cell is then
rebuilt); any other change of the build code (buildcode.py says which files that is) re-confirms BUILD_CODE_SHA256
for the same epoch. `nox -s lint` fails while the build code's hash differs from BUILD_CODE_SHA256;
`nox -s build-epoch` re-confirms, `nox -s build-epoch -- --bump` bumps. Records carry the hash of the code that made
them, so a run can say that the build code changed since them without rebuilding them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from torch_buildmatrix.builder.buildcode import PACKAGE_DIR, build_code, code_hash
from torch_buildmatrix.util.atomic import write_text_atomic

BUILD_EPOCH = 1
BUILD_CODE_SHA256 = "9356bae880f2d77c96d2c8667ad293ca9a10c2faf9d78d68bec28524b44ee13b"

# Epoch 1 starts where the records are: its key is what keys held before epochs existed, the hash of each runner's
# build code files (util/fingerprint.py's tree_hash) at 3f9c881, so the records that code made stay up to date.
EPOCH_1_KEYS = {
    "local": "31c33083a1df5633a8a3e59cd79a9ce896ddf5374f4755329422769142725140",
    "docker": "7fe60b25ac370640e923a80d54ae2b5678a3a0a025aa330639302d50c5acfca8",
}

EPOCH_FILE = "builder/epoch.py"  # holds the confirmed hash, so it cannot count in it
BUMP_COMMAND = "nox -s build-epoch -- --bump"
CONFIRM_COMMAND = "nox -s build-epoch"


def epoch_key(runner: str, epoch: int = BUILD_EPOCH) -> str:
    """What a build's and a cell's inputs hold of the tool's code (their "build_code") under a runner."""
    if epoch == 1:
        return EPOCH_1_KEYS.get(runner, "epoch 1")
    return f"epoch {epoch}"


def build_code_hash(roots: Iterable[str], package_dir: Path = PACKAGE_DIR) -> str:
    """The code hash (buildcode.code_hash) of the build code of the modules `roots`, this file left out."""
    return code_hash(build_code(roots, package_dir) - {EPOCH_FILE}, package_dir)


def confirm_problem(current: str, confirmed: str = BUILD_CODE_SHA256, epoch: int = BUILD_EPOCH) -> str:
    """Why the lint check fails ('' when the build code is the one confirmed for the epoch)."""
    if current == confirmed:
        return ""
    return (
        f"the build code changed: its hash is {current}, and build epoch {epoch} was confirmed for {confirmed} "
        f"(torch_buildmatrix/{EPOCH_FILE}). If the change alters what a build makes or how a cell is judged, bump the "
        f"epoch (`{BUMP_COMMAND}`: every build and cell is rebuilt); if not, re-confirm it (`{CONFIRM_COMMAND}`: "
        "records stay up to date). Either way, commit the rewritten file with the change."
    )


def rewritten(text: str, epoch: int, confirmed: str) -> str:
    """epoch.py's text with BUILD_EPOCH and BUILD_CODE_SHA256 set; raises ValueError when either is not found."""
    for name, value in (("BUILD_EPOCH", str(epoch)), ("BUILD_CODE_SHA256", f'"{confirmed}"')):
        text, found = re.subn(rf"^{name} = .*$", f"{name} = {value}", text, count=1, flags=re.MULTILINE)
        if not found:
            raise ValueError(f"no `{name} = ...` line in {EPOCH_FILE}")
    return text


def confirm(current: str, bump: bool, package_dir: Path = PACKAGE_DIR) -> int:
    """Rewrite epoch.py under package_dir for the build code's hash `current`, bumping the epoch when asked; returns
    the epoch it now holds."""
    path = package_dir / EPOCH_FILE
    text = path.read_text(encoding="utf-8")
    match = re.search(r"^BUILD_EPOCH = (\d+)$", text, flags=re.MULTILINE)
    if match is None:
        raise ValueError(f"no `BUILD_EPOCH = <number>` line in {path}")
    epoch = int(match.group(1)) + (1 if bump else 0)
    write_text_atomic(path, rewritten(text, epoch, current))
    return epoch


class CodeHashes:
    """The code hash of each runner's build code, computed once per content of the package and kept in a cache file:
    a run that reuses every record pays a read of the package's files, not a parse of them."""

    def __init__(self, cache_file: Path | None, package_dir: Path = PACKAGE_DIR) -> None:
        self.cache_file, self.package_dir = cache_file, package_dir
        self._known: dict[str, str] | None = None
        self._stamp = ""

    def of(self, roots: tuple[str, ...]) -> str:
        key = " ".join(roots)
        if self._known is None:
            self._stamp, self._known = self._load()
        if key not in self._known:
            self._known[key] = build_code_hash(roots, self.package_dir)
            self._save()
        return self._known[key]

    def _load(self) -> tuple[str, dict[str, str]]:
        digest = hashlib.sha256()
        for path in sorted(self.package_dir.rglob("*.py")):
            digest.update(path.relative_to(self.package_dir).as_posix().encode() + b"\0" + path.read_bytes())
        stamp = digest.hexdigest()
        try:
            cached = json.loads(self.cache_file.read_text(encoding="utf-8")) if self.cache_file is not None else {}
        except (OSError, ValueError):
            cached = {}
        hashes = cached.get("hashes") if isinstance(cached, dict) and cached.get("package") == stamp else None
        valid = isinstance(hashes, dict) and all(isinstance(v, str) for v in hashes.values())
        return stamp, dict(hashes) if valid and isinstance(hashes, dict) else {}

    def _save(self) -> None:
        if self.cache_file is None:
            return
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.cache_file, json.dumps({"package": self._stamp, "hashes": self._known}))
        except OSError:
            pass  # a cache: the next run computes it again
