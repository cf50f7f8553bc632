"""Failure classes from output and from OSErrors: pure, table-driven."""

from __future__ import annotations

import errno

import pytest

from torch_buildmatrix.util.failures import OutputSigns, classify_output, is_resource_error, resource_message
from torch_buildmatrix.vocab import Cause, FailureClass


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


# A network error inside a package's build script (an sdist with no wheel for this Python: tokenizers' maturin
# fetching Rust) fails again the same way; the installer's own fetches, build dependencies included, are transient.
SOURCE_BUILD_CASES = [
    (
        # pip: the backend ran and failed; the marker is at the end, in the tail
        "  urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>\n"
        "error: subprocess-exited-with-error\n\n\u00d7 Getting requirements to build wheel did not run successfully.",
        (FailureClass.DETERMINISTIC, None),
    ),
    (
        "curl: (6) Could not resolve host: static.rust-lang.org\n  ERROR: Failed building wheel for tokenizers",
        (FailureClass.DETERMINISTIC, None),
    ),
    (
        # pip: installing the build dependencies from the index failed: the installer's fetch
        "  ERROR: Could not find a version: Connection reset by peer\n"
        "\u00d7 pip subprocess to install build dependencies did not run successfully.",
        (FailureClass.TRANSIENT, Cause.NETWORK),
    ),
    (
        # uv: build-system.requires could not be fetched
        "error: Failed to build `netpkg @ file:///tmp/netpkg`\n"
        "  Caused by: Failed to resolve requirements from `build-system.requires`\n"
        "  Caused by: Failed to fetch: `https://pypi.org/simple/setuptools/`",
        (FailureClass.TRANSIENT, Cause.NETWORK),
    ),
    (
        "  Call to `maturin.build_wheel` failed (exit status: 1)\nOSError: [Errno 28] No space left on device",
        (FailureClass.TRANSIENT, Cause.DISK_FULL),
    ),
]


def seen(output: str) -> OutputSigns:
    signs = OutputSigns()
    for line in output.splitlines():
        signs.see(line)
    return signs


@pytest.mark.parametrize(("tail", "expected"), SOURCE_BUILD_CASES)
def test_a_network_error_in_a_dependencys_build_script_is_not_retried(
    tail: str, expected: tuple[FailureClass, Cause | None]
) -> None:
    assert classify_output(tail, seen(tail)) == expected


@pytest.mark.parametrize(("tail", "expected"), SOURCE_BUILD_CASES)
def test_a_network_error_in_the_projects_own_build_stays_transient(
    tail: str, expected: tuple[FailureClass, Cause | None]
) -> None:
    """No dependency_build: the project's own build script fetching what it needs (test_faults' network blip)."""
    cause = Cause.DISK_FULL if expected[1] == Cause.DISK_FULL else Cause.NETWORK
    assert classify_output(tail) == (FailureClass.TRANSIENT, cause)


def test_a_build_backend_failure_seen_before_the_tail_still_counts() -> None:
    # uv prints "The build backend returned an error" first, then the backend's whole traceback
    signs = OutputSigns()
    for line in ["error: The build backend returned an error", *["    frame"] * 100]:
        signs.see(line)
    tail = "  socket.gaierror: [Errno -2] Name or service not known"
    assert classify_output(tail) == (FailureClass.TRANSIENT, Cause.NETWORK)
    assert classify_output(tail, signs) == (FailureClass.DETERMINISTIC, None)
    assert classify_output(tail, OutputSigns()) == (FailureClass.TRANSIENT, Cause.NETWORK)


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
