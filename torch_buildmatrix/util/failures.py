"""Tells transient failures (network, full disk) from deterministic ones, from a child's output or an OSError."""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.vocab import Cause, FailureClass

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
# What uv and pip print when a package's own build script (its PEP 517 backend) failed, as opposed to the installer
# failing to fetch from an index. A network error inside that output is the build script downloading something
# (maturin fetching Rust for an sdist that has no wheel for this Python): the same inputs fail the same way, so it is
# not retried. pip's "install build dependencies did not run successfully" is the installer's fetch, and stays out.
BUILD_BACKEND_PATTERNS = (
    r"the build backend returned an error",  # uv
    r"call to `[\w.:]+\.(?:build_\w+|prepare_metadata_for_build_\w+|get_requires_for_build_\w+)` failed",  # uv
    r"(?:getting requirements to build wheel|preparing metadata \(pyproject\.toml\)) did not run successfully",  # pip
    r"building wheel for \S+ \(pyproject\.toml\) did not run successfully|failed building wheel for \S+",  # pip
)
_NETWORK = re.compile("|".join(NETWORK_PATTERNS), re.IGNORECASE)
_DISK_FULL = re.compile("|".join(DISK_FULL_PATTERNS), re.IGNORECASE)
_BUILD_BACKEND = re.compile("|".join(BUILD_BACKEND_PATTERNS), re.IGNORECASE)
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
NOT_WRITABLE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


@dataclass
class OutputSigns:
    """What a child's whole output showed, seen line by line as it streams: uv prints a build backend's failure
    first and the backend's traceback after it, so the tail kept for the message has often lost that line."""

    build_backend_failed: bool = False

    def see(self, line: str) -> None:
        if not self.build_backend_failed and _BUILD_BACKEND.search(line):
            self.build_backend_failed = True


def classify_output(tail: str, dependency_build: OutputSigns | None = None) -> tuple[FailureClass, Cause | None]:
    """The class of a child that exited non-zero, from the end of its output (pure).

    A full disk is transient wherever it shows, and so is a network error, with one exception. `dependency_build`
    is given when the child installed the cell's dependencies (the smoke environment): a network error met by a
    dependency's own build script there is deterministic. The dependency has no wheel for this Python, and its
    source build downloads something (maturin fetching Rust), which fails the same way next time. A project's own
    build may fetch what it needs, and its network errors stay transient.
    """
    if _DISK_FULL.search(tail):
        return FailureClass.TRANSIENT, Cause.DISK_FULL
    if _NETWORK.search(tail) and not (dependency_build is not None and dependency_build.build_backend_failed):
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
