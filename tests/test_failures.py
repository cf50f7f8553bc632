"""Failure classes from output and from OSErrors: pure, table-driven."""

from __future__ import annotations

import errno

import pytest

from buildmatrix.model.vocab import Cause, FailureClass
from buildmatrix.util.failures import classify_output, is_resource_error, resource_message


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ("error: Failed to fetch: `https://pypi.org/simple/numpy/`", (FailureClass.TRANSIENT, Cause.NETWORK)),
        ("urllib.error.HTTPError: HTTP Error 503: Service Unavailable", (FailureClass.TRANSIENT, Cause.NETWORK)),
        ("socket.gaierror: [Errno -3] Temporary failure in name resolution", (FailureClass.TRANSIENT, Cause.NETWORK)),
        (
            "error: failed to write to file `/b/x`: No space left on device (os error 28)",
            (FailureClass.TRANSIENT, Cause.DISK_FULL),
        ),
        ("tiny.c:3:1: error: expected ';' before '}' token", (FailureClass.DETERMINISTIC, None)),
        ("FAILED tests/test_device.py::test_copy - AssertionError: 503 != 200", (FailureClass.DETERMINISTIC, None)),
        ("error: patch failed: plugin/csrc/x.cpp:12", (FailureClass.DETERMINISTIC, None)),
    ],
)
def test_classify_output(tail: str, expected: tuple[FailureClass, Cause | None]) -> None:
    assert classify_output(tail) == expected


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        (errno.ENOSPC, "free space on that file system"),
        (errno.EDQUOT, "free space on that file system"),
        (errno.EROFS, "remount it read-write"),
        (errno.EACCES, "give this user write permission there"),
        (errno.EPERM, "give this user write permission there"),
    ],
)
def test_resource_errors_name_the_path_and_what_to_do(code: int, advice: str) -> None:
    exc = OSError(code, "reason", "/srv/wheels/results")
    assert is_resource_error(exc)
    message = resource_message(exc)
    assert message.startswith("cannot write /srv/wheels/results: reason; ") and advice in message
    assert "\n" not in message


def test_other_os_errors_are_not_resource_faults() -> None:
    assert not is_resource_error(OSError(errno.ENOENT, "No such file or directory", "/x"))
    assert not is_resource_error(ValueError("x"))
