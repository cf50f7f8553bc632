"""Confinement of paths that come from files we read (records, matrix.yaml): relative, plain, inside their base."""

from __future__ import annotations

import os
import re
import stat
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


def regular_file(base: Path, relative: str) -> Path:
    """base/relative when it is a regular file reached through no symlink below `base`; raises ValueError saying
    which component is a symlink, a special file or missing. Trees from other machines (CI artifacts) and records are
    not trusted: a log linked to /etc/passwd must never be copied or published."""
    problem = relative_path_problem(relative)
    if problem:
        raise ValueError(f"{relative!r} {problem}")
    path = base
    for part in relative.split("/"):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise ValueError(f"{relative} is missing from {base}") from None
        except OSError as exc:
            raise ValueError(f"{relative} cannot be read ({exc.strerror})") from None
        if stat.S_ISLNK(mode):
            raise ValueError(f"{relative} is a symlink ({path}); only regular files are read")
    if not stat.S_ISREG(mode):
        raise ValueError(f"{relative} is not a regular file ({path})")
    return path


def read_regular(base: Path, relative: str, max_bytes: int | None = None) -> bytes:
    """The bytes of regular_file(base, relative), opened without following a symlink; raises ValueError."""
    path = regular_file(base, relative)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ValueError(f"{relative} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(f"{relative} is not a regular file")
        data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{relative} is larger than {max_bytes} bytes")
    return data
