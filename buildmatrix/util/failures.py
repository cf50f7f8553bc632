"""Tells transient failures (network, full disk) from deterministic ones, from a child's output or an OSError."""

from __future__ import annotations

import errno
import re
from pathlib import Path

from buildmatrix.model.vocab import Cause, FailureClass

# What uv, pip, urllib, git and docker print when the network or an index fails; a compile error or a failing test
# never does. Case-insensitive, matched anywhere in the output's tail.
NETWORK_PATTERNS = (
    r"temporary failure in name resolution",
    r"name or service not known",
    r"could not resolve host",
    r"network is unreachable",
    r"connection (?:refused|reset|timed out|aborted)",
    r"failed to (?:fetch|download)",
    r"request failed after \d+ retr",
    r"http status server error",
    r"\b50[234]\b.{0,3}(?:server error|bad gateway|service unavailable|gateway time-?out)",
    r"readtimeouterror|connecttimeouterror|newconnectionerror|max retries exceeded",
    r"error sending request",
    r"operation timed out",
    r"tls handshake|ssl: (?:wrong|unexpected eof)",
)
DISK_FULL_PATTERNS = (r"no space left on device", r"disk quota exceeded", r"os error 28\b")
_NETWORK = re.compile("|".join(NETWORK_PATTERNS), re.IGNORECASE)
_DISK_FULL = re.compile("|".join(DISK_FULL_PATTERNS), re.IGNORECASE)
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
NOT_WRITABLE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def classify_output(tail: str) -> tuple[FailureClass, Cause | None]:
    """The class of a child that exited non-zero, from the end of its output (pure)."""
    if _DISK_FULL.search(tail):
        return FailureClass.TRANSIENT, Cause.DISK_FULL
    if _NETWORK.search(tail):
        return FailureClass.TRANSIENT, Cause.NETWORK
    return FailureClass.DETERMINISTIC, None


def is_resource_error(exc: BaseException) -> bool:
    """A full disk, a read-only file system or a permission refused: the machine's fault, not the cell's."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS | NOT_WRITABLE_ERRNOS


def resource_message(exc: OSError, fallback: Path | None = None) -> str:
    """One line naming the path and what to do, for a resource OSError."""
    path = exc.filename or fallback or "?"
    reason = exc.strerror or str(exc)
    if exc.errno in DISK_FULL_ERRNOS:
        todo = "free space on that file system (or use another directory), then rerun"
    elif exc.errno == errno.EROFS:
        todo = "remount it read-write (or use another directory), then rerun"
    else:
        todo = "give this user write permission there (or use another directory), then rerun"
    return f"cannot write {path}: {reason}; {todo}"
