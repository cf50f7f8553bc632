"""The subprocess choke point with real processes: streaming, timeouts that end the whole tree, stops, orphan sweeps."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from torch_buildmatrix.errors import Interrupted, StepFailed
from torch_buildmatrix.util import process
from torch_buildmatrix.util.failures import classify_output
from torch_buildmatrix.util.process import CHILDREN, OWNER_ENV, kill_orphans, run_captured, run_logged
from torch_buildmatrix.vocab import Cause, FailureClass


def marked() -> tuple[dict[str, str], str]:
    """An environment variable only this test's processes carry, to find them in the process table."""
    token = uuid.uuid4().hex
    return {"FAULTS_TEST_MARK": token}, f"FAULTS_TEST_MARK={token}"


def living(mark: str) -> list[int]:
    """Pids (not zombies) whose environment holds mark, read from /proc like `ps e` would."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if mark.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def wait_gone(mark: str, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while living(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    return living(mark)


@pytest.fixture(autouse=True)
def fresh_children() -> Iterator[None]:
    CHILDREN.reset()
    yield
    CHILDREN.reset()


def test_output_streams_to_the_log_while_the_child_runs(tmp_path: Path) -> None:
    log = tmp_path / "cell.log"
    seen: list[str] = []

    def watch() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if log.is_file() and "first" in log.read_text().splitlines():
                seen.append(log.read_text())
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    tail = run_logged("step", ["bash", "-c", "echo first; sleep 1; echo second >&2"], log)
    watcher.join()
    assert seen and "second" not in seen[0].splitlines()  # read before the child finished
    assert tail.splitlines() == ["first", "second"]
    assert "$ bash -c 'echo first; sleep 1; echo second >&2'" in log.read_text()


def test_timeout_kills_the_whole_tree_of_a_chatty_step(tmp_path: Path) -> None:
    env, mark = marked()
    log = tmp_path / "cell.log"
    # A child that keeps printing (the old code read to EOF before the timeout began) and a grandchild sleeping.
    script = "sleep 300 & while true; do echo tick; sleep 0.1; done"
    started = time.monotonic()
    with pytest.raises(StepFailed) as caught:
        run_logged("build", ["bash", "-c", script], log, env=env, timeout=1)
    elapsed = time.monotonic() - started
    assert elapsed < 4, f"took {elapsed:.1f} s"
    assert caught.value.step == "build"
    assert caught.value.message.startswith("timed out after 1 s in step build")
    assert caught.value.failure_class == FailureClass.TRANSIENT and caught.value.cause == Cause.TIMEOUT
    assert wait_gone(mark) == []  # the grandchild `sleep 300` too
    text = log.read_text()
    assert "tick" in text and "# timed out after 1 s in step build" in text


def test_non_zero_exit_is_deterministic_with_the_tail(tmp_path: Path) -> None:
    with pytest.raises(StepFailed) as caught:
        run_logged("build", ["bash", "-c", "echo 'error: expected ;'; exit 3"], tmp_path / "log")
    assert caught.value.failure_class == FailureClass.DETERMINISTIC and caught.value.cause is None
    assert "exit code 3" in caught.value.message and caught.value.log_tail == "error: expected ;"


@pytest.mark.parametrize(
    ("output", "cause"),
    [
        ("error: Request failed after 3 retries\n  Caused by: Connection reset by peer", Cause.NETWORK),
        ("urllib3.exceptions.NewConnectionError: Failed to establish a new connection", Cause.NETWORK),
        ("OSError: [Errno 28] No space left on device: '/x/y'", Cause.DISK_FULL),
    ],
)
def test_network_and_disk_errors_are_transient(tmp_path: Path, output: str, cause: Cause) -> None:
    with pytest.raises(StepFailed) as caught:
        run_logged("build-env", [sys.executable, "-c", f"print({output!r}); raise SystemExit(2)"], tmp_path / "log")
    assert (caught.value.failure_class, caught.value.cause) == (FailureClass.TRANSIENT, cause)


def test_a_source_build_that_needs_the_network_is_deterministic(tmp_path: Path) -> None:
    """A real uv install of an sdist whose build script downloads something and meets a refused connection (what
    tokenizers' maturin does on a Python it has no wheel for): not "transient: network", which a retry never fixes."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    with socket.socket() as sock:  # a port nothing listens on: the connection is refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    project = tmp_path / "netpkg"
    project.mkdir()
    # An in-tree build backend with no requirements: uv's isolated build needs nothing from an index.
    (project / "pyproject.toml").write_text(
        '[project]\nname = "netpkg"\nversion = "0.1"\n'
        '[build-system]\nrequires = []\nbuild-backend = "netbackend"\nbackend-path = ["."]\n'
    )
    fetch = f"urllib.request.urlopen('http://127.0.0.1:{port}/rustup-init', timeout=5)"
    (project / "netbackend.py").write_text(
        "import urllib.request\n\n"
        + "".join(
            f"def {hook}(*args, **kwargs):\n    {fetch}\n\n"
            for hook in ("get_requires_for_build_wheel", "prepare_metadata_for_build_wheel", "build_wheel")
        )
    )
    target = tmp_path / "env"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(target)], check=True)
    log_file = tmp_path / "smoke-env.log"
    command = [uv, "pip", "install", "--python", str(target / "bin" / "python"), str(project)]
    with pytest.raises(StepFailed) as caught:
        run_logged("smoke-env", command, log_file)
    assert (caught.value.failure_class, caught.value.cause) == (FailureClass.DETERMINISTIC, None)
    text = log_file.read_text()
    assert "Connection refused" in text and "build backend" in text.lower()
    assert not list((target / "lib").glob("python*/site-packages/netpkg*"))  # nothing half-installed
    # The same failure in the project's own build (its build script may fetch what it needs) stays transient.
    with pytest.raises(StepFailed) as own:
        run_logged("build", command, tmp_path / "build.log")
    assert (own.value.failure_class, own.value.cause) == (FailureClass.TRANSIENT, Cause.NETWORK)


def test_classify_leaves_compile_and_test_failures_deterministic() -> None:
    assert classify_output("foo.c:3: error: 'x' undeclared\nninja: build stopped") == (FailureClass.DETERMINISTIC, None)
    assert classify_output("FAILED test_tiny.py::test_x - AssertionError") == (FailureClass.DETERMINISTIC, None)


def test_child_killed_by_a_signal_is_transient(tmp_path: Path) -> None:
    with pytest.raises(StepFailed) as caught:
        run_logged("smoke", ["bash", "-c", "kill -KILL $$"], tmp_path / "log")
    assert caught.value.failure_class == FailureClass.TRANSIENT and caught.value.cause == Cause.OOM
    with pytest.raises(StepFailed) as caught:
        run_logged("smoke", ["bash", "-c", "kill -SEGV $$"], tmp_path / "log")
    assert caught.value.cause == Cause.SIGNAL and "killed by SIGSEGV" in caught.value.message


def test_stop_ends_running_groups_and_refuses_new_children(tmp_path: Path) -> None:
    env, mark = marked()
    errors: list[BaseException] = []

    def cell() -> None:
        try:
            run_logged("build", ["bash", "-c", "sleep 300 & sleep 300"], tmp_path / "log", env=env)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=cell)
    worker.start()
    deadline = time.monotonic() + 5
    while len(living(mark)) < 3 and time.monotonic() < deadline:  # bash and its two sleeps
        time.sleep(0.02)
    assert len(living(mark)) == 3
    started = time.monotonic()
    assert CHILDREN.stop("SIGTERM") == 1
    worker.join(5)
    assert time.monotonic() - started < 2
    assert len(errors) == 1 and isinstance(errors[0], Interrupted)
    assert errors[0].cause == Cause.INTERRUPTED and "interrupted by SIGTERM" in str(errors[0])
    assert wait_gone(mark) == []
    with pytest.raises(Interrupted):
        run_logged("smoke", ["true"], tmp_path / "log")


def test_finished_step_leaves_no_background_child(tmp_path: Path) -> None:
    env, mark = marked()
    run_logged("build", ["bash", "-c", "(sleep 300 >/dev/null 2>&1 &); echo done"], tmp_path / "log", env=env)
    assert wait_gone(mark) == []


def test_run_captured_keeps_streams_apart_and_times_out() -> None:
    got = run_captured(["bash", "-c", "echo out; echo err >&2; exit 4"])
    assert (got.returncode, got.stdout, got.stderr) == (4, "out\n", "err\n")
    with pytest.raises(StepFailed) as caught:
        run_captured(["sleep", "30"], step="check", timeout=0.5)
    assert caught.value.cause == Cause.TIMEOUT


def test_cannot_start_names_the_program(tmp_path: Path) -> None:
    with pytest.raises(StepFailed, match="cannot start /no/such/tool"):
        run_logged("build", ["/no/such/tool"], tmp_path / "log")


def test_orphans_of_a_killed_run_are_swept_by_owner(tmp_path: Path) -> None:
    owner = str(tmp_path / "build")
    other = str(tmp_path / "elsewhere")
    # Stand-ins for what a SIGKILLed run leaves: detached trees carrying its owner mark, and one of another workspace.
    ours = subprocess.Popen(
        ["bash", "-c", "sleep 300 & sleep 300"], env={**os.environ, OWNER_ENV: owner}, start_new_session=True
    )
    theirs = subprocess.Popen(["sleep", "300"], env={**os.environ, OWNER_ENV: other}, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(process.owned_processes(owner)) < 3 and time.monotonic() < deadline:  # bash and its two sleeps
            time.sleep(0.02)
        assert len(process.owned_processes(owner)) == 3
        ended = kill_orphans(owner)
        assert len(ended) == 3
        ours.wait(5)
        assert process.owned_processes(owner) == []
        assert theirs.poll() is None  # another workspace's process is left alone
    finally:
        theirs.kill()
        theirs.wait()


def test_children_carry_the_owner_mark(tmp_path: Path) -> None:
    CHILDREN.owner = str(tmp_path)
    try:
        got = run_captured(["bash", "-c", f"echo ${OWNER_ENV}"])
    finally:
        CHILDREN.owner = None
    assert got.stdout.strip() == str(tmp_path)
