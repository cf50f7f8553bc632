"""The one way we run subprocesses: each in its own process group, output streamed and redacted, a timeout.

Every child starts in a new session (so its process group is its own and a terminal's Ctrl-C does not reach it) and
carries OWNER_ENV in its environment, naming the build directory of the run that started it. Three ways end a group:
its step's timeout, `ChildGroups.stop()` (Ctrl-C or SIGTERM of the run), and, after the run itself was SIGKILLed,
`kill_orphans()` at the start of the next run, which finds leftovers by that environment variable in /proc.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.errors import Interrupted, StepFailed
from torch_buildmatrix.util.failures import OutputSigns, classify_output
from torch_buildmatrix.util.redact import redact, secret_values
from torch_buildmatrix.vocab import Cause, FailureClass, Step

log = logging.getLogger(__name__)
TAIL_LINES = 40
POLL_SECONDS = 0.1
OWNER_ENV = "BUILDMATRIX_OWNER"  # set in every child's environment: whose child it is, for the orphan sweep


class ChildGroups:
    """The process groups this process's children lead, so an interrupt can end them all at once.

    A process-wide fact (the children of this process), hence one instance per process: `CHILDREN`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._stopping: str | None = None
        self.owner: str | None = None  # OWNER_ENV value given to children, set by the run that owns them

    @property
    def stopping(self) -> str | None:
        """Why the run is stopping ('SIGINT', 'SIGTERM'), or None."""
        return self._stopping

    def add(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            stopping = self._stopping
        if stopping:  # started in the instant the stop came: end it too
            _kill_group(pgid)

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)

    def stop(self, reason: str) -> int:
        """Refuse new children and SIGKILL every live group; returns how many groups were signalled."""
        with self._lock:
            self._stopping = reason
            groups = sorted(self._groups)
        for pgid in groups:
            _kill_group(pgid)
        return len(groups)

    def reset(self) -> None:
        """Accept children again (tests, or a second run in the same process)."""
        with self._lock:
            self._stopping = None

    def check(self, step: str) -> None:
        """Raise Interrupted when the run is stopping."""
        if self._stopping:
            raise Interrupted(step, f"interrupted by {self._stopping}")


CHILDREN = ChildGroups()


@dataclass(frozen=True)
class Captured:
    """What a short command printed and how it ended (run_captured)."""

    returncode: int
    stdout: str
    stderr: str


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _reap(proc: subprocess.Popen[str]) -> None:
    """However a supervised child ended, its whole group goes, it is waited for, and the run stops tracking it."""
    _kill_group(proc.pid)
    if proc.poll() is None:
        proc.wait()
    CHILDREN.discard(proc.pid)


def _child_env(env: Mapping[str, str] | None, inherit: bool = True) -> dict[str, str]:
    """env on top of ours (inherit), or env as the whole environment; either way with the owner mark."""
    full = dict(os.environ) if inherit or env is None else {}
    if env:
        full.update(env)
    if CHILDREN.owner:
        full[OWNER_ENV] = CHILDREN.owner
    return full


def _exited(pid: int) -> bool:
    """True once pid has exited, without reaping it: the zombie keeps its process group id ours until we reap."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _supervise(proc: subprocess.Popen[str], step: str, timeout: float | None) -> str | None:
    """Wait for proc; on timeout or stop, kill its whole group. Returns why it was killed, or None.

    The group is killed before the leader is reaped in every case, so leftovers of a finished step (a compiler
    server, a backgrounded helper) die with it and the group id cannot have been reused by then.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    why = None
    pause = 0.002  # short tools (nm, git apply) finish in milliseconds; long steps are polled every POLL_SECONDS
    while not _exited(proc.pid):
        if CHILDREN.stopping:
            why = f"interrupted by {CHILDREN.stopping}"
            break
        if deadline is not None and time.monotonic() >= deadline:
            why = f"timed out after {timeout:g} s in step {step}"
            break
        time.sleep(pause)
        pause = min(pause * 2, POLL_SECONDS)
    if why is None and CHILDREN.stopping:  # the stop killed it between two polls
        why = f"interrupted by {CHILDREN.stopping}"
    _kill_group(proc.pid)
    proc.wait()
    return why


def _start(
    argv: list[str], step: str, *, cwd: Path | None, env: dict[str, str], stdout: int, stderr: int
) -> subprocess.Popen[str]:
    CHILDREN.check(step)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise StepFailed(step, redact(f"cannot start {argv[0]}: {exc}", secret_values(env))) from None
    CHILDREN.add(proc.pid)
    return proc


def _drain(stream: object, sink: Callable[[str], None]) -> threading.Thread:
    """Read a pipe line by line into sink on a daemon thread (a grandchild that escaped the group may hold it open)."""

    def pump() -> None:
        with contextlib.suppress(ValueError, OSError):
            for line in stream:  # type: ignore[attr-defined]
                sink(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _failure(
    step: str,
    why: str | None,
    code: int,
    shown: str,
    *,
    tail: str,
    log_file: Path | None,
    signs: OutputSigns | None = None,
) -> StepFailed:
    where = f" (log: {log_file})" if log_file else ""
    if why is not None and why.startswith("interrupted"):
        return Interrupted(step, why)
    if why is not None:
        return StepFailed(step, f"{why}: {shown}{where}", tail, FailureClass.TRANSIENT, Cause.TIMEOUT)
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals.__members__.values() else str(-code)
        killed = Cause.OOM if -code == signal.SIGKILL else Cause.SIGNAL
        hint = " (the kernel's OOM killer sends SIGKILL)" if killed == Cause.OOM else ""
        return StepFailed(step, f"killed by {name}{hint}: {shown}{where}", tail, FailureClass.TRANSIENT, killed)
    failure_class, cause = classify_output(tail, signs)
    return StepFailed(step, f"exit code {code}: {shown}{where}", tail, failure_class, cause)


def run_logged(
    step: str,
    command: Sequence[str | os.PathLike[str]],
    log_file: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    inherit: bool = True,
) -> str:
    """Run command, appending its combined output to log_file as it comes; returns the output's tail. env goes on
    top of this process's environment, or is the whole of it (inherit False).

    Raises StepFailed(step, ...) with the last lines, classed deterministic or transient, when it exits non-zero,
    is killed by a signal or times out (then its whole process group is killed); Interrupted when the run stops.
    """
    argv = [str(part) for part in command]
    log_file.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    # Only the smoke environment installs dependencies whose own build scripts may fail (util/failures.py): its output
    # alone is watched for their failures.
    signs = OutputSigns() if step == Step.SMOKE_ENV else None
    full_env = _child_env(env, inherit)
    # Logs are published: the command as shown, each output line and every error message are redacted.
    secrets = secret_values(full_env)
    shown = redact(shlex.join(argv), secrets)
    log.debug("[%s] %s", step, shown)
    with log_file.open("a", encoding="utf-8", errors="replace") as handle:
        handle.write(f"\n$ {shown}\n")
        if cwd:
            handle.write(f"# cwd: {cwd}\n")
        handle.flush()

        def sink(raw: str) -> None:
            line = redact(raw, secrets)
            handle.write(line)
            handle.flush()
            tail.append(line.rstrip("\n"))
            if signs is not None:
                signs.see(line)

        proc = _start(argv, step, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            reader = _drain(proc.stdout, sink)
            why = _supervise(proc, step, timeout)
            reader.join(timeout=5)
        finally:
            _reap(proc)
        if why is not None:
            handle.write(f"\n# {why}\n")
    if why is not None or proc.returncode != 0:
        # The message names the program, not where this machine keeps it (the log above has the full path).
        named = redact(shlex.join([Path(argv[0]).name, *argv[1:]]), secrets)
        raise _failure(step, why, proc.returncode, named, tail="\n".join(tail), log_file=log_file, signs=signs)
    return "\n".join(tail)


def run_captured(
    command: Sequence[str | os.PathLike[str]],
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    step: str = "command",
    timeout: float | None = 120,
) -> Captured:
    """Run a short tool whose output we parse (nm, git apply --numstat, docker info); never raises for its exit code.

    env, when given, is the child's whole environment (git must not see our GIT_* variables), unlike run_logged's.

    Raises StepFailed when it cannot start or times out (its group killed), Interrupted when the run stops.
    """
    argv = [str(part) for part in command]
    full_env = _child_env(env, inherit=False)
    secrets = secret_values(full_env)
    shown = redact(shlex.join(argv), secrets)
    log.debug("[%s] %s", step, shown)
    out: list[str] = []
    err: list[str] = []
    proc = _start(argv, step, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        readers = [_drain(proc.stdout, out.append), _drain(proc.stderr, err.append)]
        why = _supervise(proc, step, timeout)
        for reader in readers:
            reader.join(timeout=5)
    finally:
        _reap(proc)
    if why is not None:
        raise _failure(step, why, proc.returncode, shown, tail=redact("".join(err)[-4000:], secrets), log_file=None)
    return Captured(proc.returncode, "".join(out), "".join(err))


def spawn_detached(command: Sequence[str | os.PathLike[str]], log_file: Path) -> subprocess.Popen[bytes]:
    """Start a long-lived service (dockerd) that must outlive this run: its own session, not tracked, no owner mark."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    with log_file.open("ab") as handle:
        return subprocess.Popen(
            [str(part) for part in command],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def owned_processes(owner: str, proc_root: Path = Path("/proc")) -> list[int]:
    """Pids whose environment carries OWNER_ENV=owner (children of a run over the same build directory)."""
    marker = f"{OWNER_ENV}={owner}".encode()
    found = []
    for entry in proc_root.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def kill_orphans(owner: str, grace: float = 5.0) -> list[int]:
    """SIGKILL what an earlier run over `owner` left behind (it was SIGKILLed itself); returns the pids ended.

    Called with the run lock held, so no live run owns these processes.
    """
    victims = owned_processes(owner)
    for pid in victims:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group != os.getpgrp():
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while victims and time.monotonic() < deadline and any(_alive(pid) for pid in victims):
        time.sleep(POLL_SECONDS)
    return victims


def _alive(pid: int) -> bool:
    """True while pid exists and is not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
