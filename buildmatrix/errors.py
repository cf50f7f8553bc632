"""Errors a user can cause, each with the exit code the CLI returns for it."""

from __future__ import annotations

from dataclasses import dataclass

from buildmatrix.model.vocab import Cause, FailureClass


class UserError(Exception):
    """A problem the user can fix; the CLI prints it without a traceback."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One problem in a configuration file, located as precisely as we can."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: {self.message}"


class MatrixError(UserError):
    """matrix.yaml is invalid; carries every problem found, not just the first."""

    exit_code = 3

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the matrix:\n{lines}")


class InterpreterNotFound(UserError):
    exit_code = 4


class EngineUnavailable(UserError):
    exit_code = 5


class StepFailed(Exception):
    """A build or test step of one cell failed; the cell is recorded as failed, the run goes on.

    Deterministic failures are remembered for the cell's inputs; transient ones (with their cause) are retried.
    """

    def __init__(
        self,
        step: str,
        message: str,
        log_tail: str = "",
        failure_class: FailureClass = FailureClass.DETERMINISTIC,
        cause: Cause | None = None,
    ) -> None:
        self.step = step
        self.message = message
        self.log_tail = log_tail
        self.failure_class = failure_class
        self.cause = cause
        super().__init__(f"{step}: {message}")


class Interrupted(StepFailed):
    """The run is stopping (Ctrl-C, SIGTERM): the cell is recorded as interrupted and rebuilt by the next run."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(step, message, "", FailureClass.TRANSIENT, Cause.INTERRUPTED)


class ResourceError(UserError):
    """The machine cannot hold the run's output (disk full, read-only, not writable): the run stops cleanly."""

    exit_code = 8


class PatchError(StepFailed):
    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__("patch", message, log_tail)


class RunLocked(UserError):
    exit_code = 6


class RecordError(UserError):
    """A result record is damaged (truncated, wrong types) or names files outside its own cell and wheels/."""

    exit_code = 7

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")
