"""Errors a user can cause, each with the exit code the CLI returns for it: the one error hierarchy.

Every command ends with one of these codes (docs/reference/exit-codes.md, generated from this module, lists them):

    0    success
    1    EXIT_CELLS_FAILED: the command ran, and what it checked failed (a cell, a shim series, the docs, the site)
    2    UserError: a bad argument or another problem to fix (argparse's usage errors are 2 as well)
    3    MatrixError: matrix.yaml is invalid (every problem, located)
    4    InterpreterNotFound: no CPython for a cell's Python (locally under --runner local, nor in an image)
    5    EngineUnavailable: --runner docker, but no engine answers; under auto, cells left unbuilt
    6    RunLocked: another run holds the workspace, or another command is publishing or fetching the site
    7    RecordError: a result record, the release ledger or the live site's table is damaged (or the ledger lost)
    8    ResourceError: the disk is full or a directory is not writable
    9    RegistryError: an index, find-links location or cached registry answer cannot be read; FetchError: the
         live site cannot be read (fetch-site)
    10   UpdateError: `outdated --apply` cannot edit matrix.yaml
    11   MergeError: `merge-results` refuses the trees (nothing written)
    12   MatrixTooLarge: `matrix --github` would exceed GitHub's 256 jobs
    13   UnsupportedArchitecture: the Docker runner is needed, but no builder image serves this machine's architecture
    130  interrupted (Ctrl-C); 128+N when stopped by signal N

The CLI catches UserError once, at the top, and prints its message without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_buildmatrix.vocab import Cause, FailureClass

EXIT_CELLS_FAILED = 1

# The codes no error class carries (the classes below declare the others); docs/reference/exit-codes.md is generated
# from both (torch_buildmatrix/clireference.py).
EXIT_CODES_BESIDES_ERRORS: tuple[tuple[int, str, str], ...] = (
    (0, "-", "success"),
    (
        EXIT_CELLS_FAILED,
        "EXIT_CELLS_FAILED",
        "the command ran and what it checked failed: a cell (`build`, `probe`), a shim series (`patches check`), "
        "stale docs or a site problem (`compat-table`), a generated file that differs (`schema --check`)",
    ),
    (130, "-", "interrupted by Ctrl-C; 128+N when stopped by signal N (SIGTERM: 143); finished cells are recorded"),
)


class UserError(Exception):
    """A problem the user can fix; the CLI prints it without a traceback. Exit code 2 unless a subclass says."""

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
    """matrix.yaml is invalid; carries every problem found, not just the first. Exit code 3."""

    exit_code = 3

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the matrix:\n{lines}")


class InterpreterNotFound(UserError):
    """No CPython interpreter for a cell's Python on this machine (PATH, pyenv). Exit code 4."""

    exit_code = 4


class EngineUnavailable(UserError):
    """--runner docker, but no Docker engine answers; under runner auto, the run built what it could and left the
    cells only an image serves unbuilt (none failed): their records say how to start one. Exit code 5."""

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
    """The machine cannot hold the run's output (disk full, read-only, not writable): the run stops cleanly. Exit
    code 8."""

    exit_code = 8


class PatchError(StepFailed):
    """A shim series does not apply (or escapes plugin/): the cell fails in its patch step."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__("patch", message, log_tail)


class RunLocked(UserError):
    """Another run holds the workspace's lock, or another command the site's publish lock. Exit code 6."""

    exit_code = 6


class RecordError(UserError):
    """A result record is damaged (truncated, wrong types) or names files outside its own cell and wheels/. Exit
    code 7."""

    exit_code = 7

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class LedgerFull(UserError):
    """A publish would make the release ledger larger than its reader reads (publish/ledger.py's limits): nothing is
    published. Exit code 2."""


class DocsError(UserError):
    """The committed docs cannot be read or rendered: docs/compatibility.json is damaged, or README.md lacks its
    compat-table markers. Exit code 2."""


class RegistryError(UserError):
    """An index, a find-links location or a cached registry answer cannot be read (or answers nonsense). Exit code
    9."""

    exit_code = 9


class RegistryUnreachable(RegistryError):
    """A torch source could not be reached (no answer, a network error) and no cached answer stands in: the network's
    problem, not matrix.yaml's. Exit code 9."""


class FetchError(UserError):
    """`fetch-site` cannot read the live site (network, HTTP status, size, deadline), or it lost a released wheel.
    Exit code 9, like an unreadable index."""

    exit_code = 9


class UpdateError(UserError):
    """`outdated --apply` cannot edit matrix.yaml as found (nothing is written). Exit code 10."""

    exit_code = 10


class MergeError(UserError):
    """The trees cannot be merged as they are; carries every problem found, and nothing was written. Exit code 11."""

    exit_code = 11

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s); nothing was merged:\n{lines}")


class MatrixTooLarge(UserError):
    """`matrix --github` would make more jobs than one GitHub Actions matrix runs. Exit code 12."""

    exit_code = 12


class UnsupportedArchitecture(UserError):
    """The Docker runner is needed, but this machine's architecture is one no builder image serves: the runner builds
    natively, never under emulation. Exit code 13."""

    exit_code = 13
