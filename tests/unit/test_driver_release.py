"""The emu driver's wheels are never replaced once published: what goes into them changes only with a new patch.

driver/setup.py builds every API version's wheel (1.4, 2.4, ...) from one tree, so any change to the tree's build
inputs changes the bytes of every API version's wheel. A site's ledger refuses a published wheel whose bytes changed
under the same name; found at the end of a full run, that costs the run. driver/release.txt records the patch release
and the digest of the build inputs it was cut from: a change to them fails here first, until the patch moves on.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

DRIVER = Path(__file__).resolve().parents[2] / "driver"
RELEASE = DRIVER / "release.txt"
# What driver/setup.py puts into a wheel: its own metadata, the headers, the library's sources, the package.
INPUTS = ("setup.py", "pyproject.toml", "include", "src", "emu_driver")


def build_inputs_digest(driver: Path) -> str:
    digest = hashlib.sha256()
    for name in INPUTS:
        root = driver / name
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" in path.parts:
                continue
            digest.update(path.relative_to(driver).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def patches(text: str) -> list[tuple[int, str]]:
    """release.txt's `patch N inputs <sha256>` lines, in file order."""
    return [(int(n), digest) for n, digest in re.findall(r"^patch (\d+) inputs ([0-9a-f]{64})\b", text, re.MULTILINE)]


def test_the_driver_patch_release_moves_with_its_build_inputs() -> None:
    listed = patches(RELEASE.read_text())
    assert listed, f"{RELEASE}: no `patch N inputs <sha256>` line"
    numbers, digests = [n for n, _ in listed], [d for _, d in listed]
    assert numbers == sorted(set(numbers)), f"{RELEASE}: patches must rise, one line each: {numbers}"
    assert len(set(digests)) == len(digests), f"{RELEASE}: two patches cut from the same inputs"
    now = build_inputs_digest(DRIVER)
    assert now == digests[-1], (
        f"driver/ changed what goes into its wheels since patch {numbers[-1]} was cut, and its published wheels "
        f"cannot be replaced: append `patch {numbers[-1] + 1} inputs {now}` to {RELEASE}."
    )


def test_the_digest_covers_every_build_input(tmp_path: Path) -> None:
    for name in ("setup.py", "pyproject.toml", "include/a.h", "src/b.cpp", "emu_driver/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    before = build_inputs_digest(tmp_path)
    for name in ("setup.py", "pyproject.toml", "include/a.h", "src/b.cpp", "emu_driver/__init__.py"):
        (tmp_path / name).write_text("y")
        assert build_inputs_digest(tmp_path) != before, name
        (tmp_path / name).write_text("x")
    # Tests, docs and the record itself are not build inputs.
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("z")
    (tmp_path / "README.md").write_text("z")
    (tmp_path / "release.txt").write_text("patch 9")
    assert build_inputs_digest(tmp_path) == before
