"""The one way we run subprocesses: log the command, stream output to a log file, raise StepFailed with the tail."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from buildmatrix.errors import StepFailed
from buildmatrix.util.redact import redact, secret_values

log = logging.getLogger(__name__)
TAIL_LINES = 40


def run_logged(
    step: str,
    command: Sequence[str | os.PathLike[str]],
    log_file: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> str:
    """Run command, appending its combined output to log_file; returns the output's tail.

    Raises StepFailed(step, ...) with the last lines when it exits non-zero or times out.
    """
    argv = [str(part) for part in command]
    log_file.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    # Logs are published: the command as shown, each output line and every error message are redacted.
    secrets = secret_values(full_env)
    shown = redact(shlex.join(argv), secrets)
    log.debug("[%s] %s", step, shown)
    with log_file.open("a", encoding="utf-8", errors="replace") as handle:
        handle.write(f"\n$ {shown}\n")
        if cwd:
            handle.write(f"# cwd: {cwd}\n")
        handle.flush()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=full_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except OSError as exc:
            raise StepFailed(step, redact(f"cannot start {argv[0]}: {exc}", secrets)) from None
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                line = redact(raw, secrets)
                handle.write(line)
                tail.append(line.rstrip("\n"))
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise StepFailed(step, f"timed out after {timeout} s: {shown}", "\n".join(tail)) from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if code != 0:
        raise StepFailed(step, f"exit code {code}: {shown} (log: {log_file})", "\n".join(tail))
    return "\n".join(tail)


def run_captured(
    command: Sequence[str | os.PathLike[str]], cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a quick tool whose output we parse (git apply --numstat); never raises on a non-zero exit."""
    argv = [str(part) for part in command]
    log.debug("%s", shlex.join(argv))
    return subprocess.run(
        argv, cwd=cwd, env=dict(env) if env is not None else None, capture_output=True, text=True, check=False
    )
