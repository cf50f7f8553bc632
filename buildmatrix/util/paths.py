"""Confinement of paths that come from files we read (records, matrix.yaml): relative, plain, inside their base."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

# A name that is one path component and never special: no separator, no leading dot (so never '.' or '..').
SAFE_NAME = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9._+-]{0,199}")


def relative_path_problem(text: str) -> str:
    """Why `text` is not a plain relative POSIX path that stays inside its base ('' when it is)."""
    if not text:
        return "is empty"
    if "\\" in text or "\x00" in text or any(ord(ch) < 0x20 for ch in text):
        return "holds a backslash or a control character"
    path = PurePosixPath(text)
    if path.is_absolute():
        return "is absolute"
    if ":" in path.parts[0]:
        return "starts with a scheme or drive"
    if any(part in ("..", ".") for part in text.split("/")) or "//" in text or text.endswith("/"):
        return "is not a plain relative path (no '.', '..', '//' or trailing '/')"
    return ""


def name_problem(text: str) -> str:
    """Why `text` cannot be used as one file name component ('' when it can)."""
    return "" if SAFE_NAME.fullmatch(text) else "is not a plain file name (letters, digits, . _ + -; no leading dot)"


def inside(base: Path, relative: str) -> Path:
    """base/relative, refusing a relative that is not plain or that leaves base through a symlink; raises ValueError."""
    problem = relative_path_problem(relative)
    if problem:
        raise ValueError(f"{relative!r} {problem}")
    path = base / relative
    root = base.resolve()
    if not path.resolve().is_relative_to(root):
        raise ValueError(f"{relative!r} leads outside {base} (through a symlink)")
    return path
