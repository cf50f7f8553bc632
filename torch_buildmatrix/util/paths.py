"""Confinement of paths that come from files we read (records, matrix.yaml): relative, plain, inside their base."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

# A name that is one path component and never special: no separator, no leading dot (so never '.' or '..').
_CONTROL_OR_BACKSLASH = re.compile(r"[\x00-\x1f\\]")
SAFE_NAME = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9._+-]{0,199}")


def relative_path_problem(text: str) -> str:
    """Why `text` is not a plain relative POSIX path that stays inside its base ('' when it is)."""
    if not text:
        return "is empty"
    if _CONTROL_OR_BACKSLASH.search(text):
        return "holds a backslash or a control character"
    if text.startswith("/"):
        return "is absolute"
    parts = text.split("/")
    if ":" in parts[0]:
        return "starts with a scheme or drive"
    if "." in parts or ".." in parts or "" in parts:  # "" is an empty part: '//' or a trailing '/'
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
    path = os.fspath(base)
    mode = 0
    for part in relative.split("/"):
        path = f"{path}/{part}"
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
    return Path(path)


def read_regular(base: Path, relative: str, max_bytes: int | None = None) -> bytes:
    """The bytes of regular_file(base, relative), opened without following a symlink; raises ValueError."""
    path = regular_file(base, relative)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ValueError(f"{relative} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise ValueError(f"{relative} is not a regular file")
        if max_bytes is None:
            data = handle.read()
        else:
            # The size fstat gives plus a byte, not max_bytes + 1: a read of n bytes allocates n (1 MiB per record,
            # 20 us each). A file that grew since is read on, up to max_bytes + 1.
            data = handle.read(min(status.st_size, max_bytes) + 1)
            if len(data) > status.st_size:
                data += handle.read(max_bytes + 1 - len(data))
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{relative} is larger than {max_bytes} bytes")
    return data
