"""Faults with real processes on the tiny plugin-shaped project: hangs, signals, SIGKILL, network blips, full and
read-only disks. Every test checks the process table (by a marker in the children's environment) and what is on disk.

Full and read-only disks are real mounts (tmpfs, read-only tmpfs); they need root and are skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_http import running
from test_local_runner import CELLS, ENV, FIXTURE, MATRIX, record

pytestmark = pytest.mark.integration

DRV2 = CELLS[1]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root)
    (root / "matrix.yaml").write_text(MATRIX)
    return root


def marker() -> tuple[dict[str, str], str]:
    token = uuid.uuid4().hex
    return {**ENV, "FAULTS_TEST_MARK": token}, f"FAULTS_TEST_MARK={token}"


def living(mark: str) -> list[str]:
    """`pid command` of every live (not zombie) process whose environment holds mark."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if mark.encode() in environ and state != "Z":
            found.append(f"{entry.name} {argv[:120]}")
    return found


def wait_gone(mark: str, seconds: float = 5) -> list[str]:
    deadline = time.monotonic() + seconds
    while living(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    return living(mark)


def build(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(root / "matrix.yaml"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
        env=env or ENV,
    )


def start_build(root: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "torch_buildmatrix", "build", "--matrix", str(root / "matrix.yaml"), *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=env,
    )


def wait_for_line(proc: subprocess.Popen[str], prefix: str, seconds: float = 600) -> list[str]:
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + seconds
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(prefix) or time.monotonic() > deadline:
            return seen
    raise AssertionError(f"the build ended before printing {prefix!r}:\n{''.join(seen)}")


def test_hung_smoke_is_killed_by_its_timeout_then_rebuilt(tiny: Path) -> None:
    (tiny / "matrix.yaml").write_text(MATRIX + "timeouts: {smoke: 5}\n")
    (tiny / "plugin" / "tests" / "HANG_SMOKE").write_text("")
    env, mark = marker()
    started = time.monotonic()
    result = build(tiny, "--sdk", "2", "--retries", "0", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert time.monotonic() - started < 300
    failed = record(tiny, DRV2)
    assert failed["status"] == "failed" and failed["failed_step"] == "smoke"
    assert failed["failure_class"] == "transient" and failed["cause"] == "timeout"
    assert failed["error"].startswith("timed out after 5 s in step smoke")
    assert "transient: timeout" in result.stdout
    assert "# timed out after 5 s in step smoke" in (tiny / "wheels" / failed["log"]).read_text()
    assert wait_gone(mark) == [], "the hung pytest or its sleep outlived the timeout"
    # the build's wheel is published (its build passed); the cell that timed out testing it is not installable
    assert record(tiny, DRV2, "builds")["status"] == "passed" and failed["wheel"] is not None

    (tiny / "plugin" / "tests" / "HANG_SMOKE").unlink()
    (tiny / "matrix.yaml").write_text(MATRIX)  # timeouts are no cell input: the same inputs hash as before
    again = build(tiny, "--sdk", "2")
    assert again.returncode == 0, again.stdout + again.stderr
    # a transient failure is tried again, not remembered; the build stays (the smoke suite is no build input)
    assert f"\n{DRV2}: up-to-date" not in f"\n{again.stdout}" and f"build {DRV2}: up-to-date" in again.stdout
    assert record(tiny, DRV2)["status"] == "passed"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_the_run_and_kills_every_child(tiny: Path, signum: signal.Signals) -> None:
    (tiny / "plugin" / "HANG_BUILD").write_text("")
    env, mark = marker()
    proc = start_build(tiny, env, "--sdk", "2")
    wait_for_line(proc, f"build {DRV2}: build\n")
    deadline = time.monotonic() + 60
    while not any(" sleep 600" in p for p in living(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert any(" sleep 600" in p for p in living(mark)), living(mark)
    stopped = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)  # Ctrl-C: the terminal signals the foreground process group
    else:
        proc.send_signal(signum)  # `kill PID`
    out, _ = proc.communicate(timeout=30)
    assert time.monotonic() - stopped < 10, f"took {time.monotonic() - stopped:.1f} s to stop"
    assert proc.returncode == 128 + signum, out
    assert wait_gone(mark) == [], "children outlived the run"
    interrupted = record(tiny, DRV2)
    assert interrupted["status"] == "interrupted" and interrupted["failed_step"] == "build"
    assert interrupted["cause"] == "interrupted" and interrupted["failure_class"] == "transient"
    assert f"stopped by {signum.name}" in out
    assert not (tiny / "wheels" / "torch2.13").exists()

    if signum == signal.SIGTERM:  # the next run rebuilds the interrupted cell
        (tiny / "plugin" / "HANG_BUILD").unlink()
        again = build(tiny, "--sdk", "2")
        assert again.returncode == 0 and "up-to-date" not in again.stdout, again.stdout + again.stderr
        assert record(tiny, DRV2)["status"] == "passed"


def test_an_interrupted_compile_has_ended_every_process_when_the_run_returns(tiny: Path) -> None:
    """Ctrl-C during a build's compile once returned, in one run of two, with compilers still running two seconds
    later. A real compile (two cc processes, one in a session of its own, as a parallel build tool may start them)
    is interrupted again and again: each time, when the run has returned, none of its processes is left."""
    (tiny / "plugin" / "ESCAPING_COMPILE").write_text("")
    for attempt in range(3):
        env, mark = marker()
        proc = start_build(tiny, {**env, "CCACHE_DISABLE": "1"}, "--sdk", "2")
        wait_for_line(proc, f"build {DRV2}: build\n")
        deadline = time.monotonic() + 120
        while sum(" -O2 -c " in p for p in living(mark)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sum(" -O2 -c " in p for p in living(mark)) >= 2, living(mark)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground process group
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGINT, out
        assert living(mark) == [], f"attempt {attempt}: processes outlived the run"  # at once, no grace


def test_sigkill_leaves_orphans_that_the_next_run_ends(tiny: Path) -> None:
    (tiny / "plugin" / "HANG_BUILD").write_text("")
    env, mark = marker()
    proc = start_build(tiny, env, "--sdk", "2")
    wait_for_line(proc, f"build {DRV2}: build\n")
    deadline = time.monotonic() + 60
    while not any(" sleep 600" in p for p in living(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.kill()  # SIGKILL to the run alone: nothing in it can react
    proc.wait()
    orphans = living(mark)
    assert any(" sleep 600" in p for p in orphans), orphans  # the hung build survived its parent

    (tiny / "plugin" / "HANG_BUILD").unlink()
    again = build(tiny, "--sdk", "2")
    assert living(mark) == [], "orphans of the killed run outlived the start of the next one"
    assert again.returncode == 0, again.stdout + again.stderr
    assert "left running by an earlier run that was killed" in again.stdout
    assert record(tiny, DRV2)["status"] == "passed"
    leftovers = [p for p in (tiny / "wheels").rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


class FlakyServer(http.server.BaseHTTPRequestHandler):
    """Answers 503 to the first `failures` requests, then 200."""

    failures = 0
    served: list[int]

    def do_GET(self) -> None:
        code = 503 if len(self.served) < self.failures else 200
        self.served.append(code)
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[tuple[str, type[FlakyServer]]]:
    handler = type("Handler", (FlakyServer,), {"served": [], "failures": 1})
    with running(handler) as root:
        yield f"{root}/blob", handler


def test_network_blip_is_transient_then_rerun_and_retry_succeed(
    tiny: Path, flaky: tuple[str, type[FlakyServer]]
) -> None:
    url, handler = flaky
    (tiny / "plugin" / "FETCH_URL").write_text(url)
    first = build(tiny, "--sdk", "2", "--retries", "0")
    assert first.returncode == 1, first.stdout + first.stderr
    failed = record(tiny, DRV2)
    assert (failed["failed_step"], failed["failure_class"], failed["cause"]) == ("build", "transient", "network")
    assert "transient: network" in first.stdout

    rerun = build(tiny, "--sdk", "2")  # the server answers now
    assert rerun.returncode == 0 and "up-to-date" not in rerun.stdout, rerun.stdout + rerun.stderr
    assert record(tiny, DRV2)["status"] == "passed" and record(tiny, DRV2)["attempts"] == 1

    handler.served.clear()  # one more blip: --retries (default 1) absorbs it within the run
    retried = build(tiny, "--sdk", "2", "--force")
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert handler.served == [503, 200]
    assert record(tiny, DRV2)["status"] == "passed" and record(tiny, DRV2, "builds")["attempts"] == 2
    assert f"build {DRV2}: retry 2" in retried.stdout
    log = (tiny / "wheels" / "logs" / "builds" / f"{DRV2}.log").read_text()
    assert "attempt 1" in log and "attempt 2" in log and "503" in log  # the failed attempt's log is kept


def mount_tmpfs(path: Path, options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=False, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); needs root")


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False)


def test_full_disk_fails_the_cell_as_transient(tiny: Path) -> None:
    build_dir = tiny / "build"
    mount_tmpfs(build_dir, "size=40m")  # cell scratch and caches: the build environment does not fit
    try:
        result = build(tiny, "--sdk", "2")
    finally:
        unmount(build_dir)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    failed = record(tiny, DRV2)
    assert failed["failure_class"] == "transient" and failed["cause"] == "disk-full", failed
    assert record(tiny, DRV2, "builds")["attempts"] == 2  # retried once within the run: the disk was still full
    assert "no space left on the device of" in failed["error"] and "free space" in failed["error"]
    assert not (tiny / "wheels" / "torch2.13").exists()
    assert [p for p in (tiny / "wheels").rglob("*") if p.suffix == ".tmp"] == []


def test_full_disk_while_publishing_leaves_nothing_half_written(tiny: Path) -> None:
    published = tiny / "wheels" / "torch2.13"
    mount_tmpfs(published, "size=64k")
    try:
        with contextlib.suppress(OSError), (published / "filler").open("wb", buffering=0) as filler:
            while True:  # fill it: the wheel's copy runs out of space part way
                filler.write(b"x" * 4096)
        result = build(tiny, "--sdk", "2", "--retries", "0")
        left = sorted(p.name for p in published.iterdir())
    finally:
        unmount(published)
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    failed = record(tiny, DRV2)
    assert (failed["failed_step"], failed["failure_class"], failed["cause"]) == ("publish", "transient", "disk-full")
    # the record names the directory as the project does (its published error reads the same from any checkout)
    made = record(tiny, DRV2, "builds")
    assert made["error"].startswith("cannot write wheels/torch2.13/tiny_plugin-") and "free space" in made["error"]
    assert failed["error"] == f"build {DRV2} failed in step publish: {made['error']}"
    assert left == ["filler"]  # no partial wheel, no temporary file
    assert failed["wheel"] is None


def test_read_only_wheels_stops_the_run_with_one_line(tiny: Path) -> None:
    wheels = tiny / "wheels"
    mount_tmpfs(wheels, "size=1m,ro")
    try:
        result = build(tiny, "--sdk", "2")
        site = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch_buildmatrix",
                "compat-table",
                "--offline",
                "--matrix",
                str(tiny / "matrix.yaml"),
            ],
            check=False,
            capture_output=True,
            text=True,
            cwd=tiny,
            env=ENV,
            timeout=300,
        )
    finally:
        unmount(wheels)
    assert result.returncode == 8, result.stdout + result.stderr
    error = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"cannot write {wheels}" in error[0] and "Read-only file system; remount it read-write" in error[0]
    assert not (tiny / "build" / "matrix" / "cells").exists()  # no cell started
    assert not (tiny / "build" / "matrix" / "builds").exists()  # nor any build
    assert "Traceback" not in site.stderr and site.returncode != 0, site.stderr
