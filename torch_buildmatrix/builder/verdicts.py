"""The verdicts on a build and a cell: the built wheel's check (check_built_wheel), the smoke run's judgement
(judge_smoke), and how a failed build or cell is recorded (its step, message, class and cause, and its log's end)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from torch_buildmatrix.builder.records.model import BuildResult, CellResult
from torch_buildmatrix.builder.relabel import relabel_wheel
from torch_buildmatrix.builder.runners.base import (
    BuildJob,
    BuildOutput,
    CellOutput,
    Runner,
    SmokeRun,
)
from torch_buildmatrix.builder.smoke import read_features, read_junit
from torch_buildmatrix.builder.wheelcheck import (
    CheckedWheel,
    SymbolCheck,
    check_plugin_wheel,
    check_symbols,
    requirement_named,
    requirements_named,
)
from torch_buildmatrix.errors import Interrupted, StepFailed, UserError
from torch_buildmatrix.model.contract import TorchPin
from torch_buildmatrix.util.failures import DISK_FULL_ERRNOS, is_resource_error, resource_message
from torch_buildmatrix.vocab import Cause, FailureClass, Status

log = logging.getLogger(__name__)


def fail_with_build(result: CellResult, made: BuildResult, log_file: Path, build_log: Path) -> None:
    """The cell fails as its build did: the build's step, message, class and cause, and its log copied into the
    cell's (so the cell's own log says why, wherever it is read)."""
    result.status = Status.INTERRUPTED if made.status == Status.INTERRUPTED else Status.FAILED
    result.failed_step = made.failed_step or "build"
    result.error = f"build {made.id} failed in step {result.failed_step}: {made.error or 'no error recorded'}"
    result.error_tail = made.error_tail
    result.failure_class = made.failure_class or FailureClass.DETERMINISTIC
    result.cause = made.cause
    text = build_log.read_text(errors="replace") if build_log.is_file() else "(the build's log is missing)\n"
    append_log(log_file, f"# build {made.id} failed; its log follows\n{text}\n# FAILED: {result.error}\n")


def record_failure(
    result: CellResult | BuildResult, exc: Exception, log_file: Path, workdir: Path, project: Path
) -> None:
    """Fill in how a build or cell failed: its step, message, class and cause (interrupted ones are not failures)."""
    result.status = Status.FAILED
    result.failed_step = result.steps[-1].name if result.steps else "setup"
    result.failure_class = FailureClass.DETERMINISTIC
    if isinstance(exc, StepFailed):
        result.status = Status.INTERRUPTED if isinstance(exc, Interrupted) else Status.FAILED
        result.failed_step, result.error, result.error_tail = exc.step, exc.message, exc.log_tail or None
        result.failure_class, result.cause = exc.failure_class, exc.cause
        if exc.cause == Cause.DISK_FULL and not exc.message.startswith("cannot write"):
            result.error = f"no space left on the device of {workdir}; free space there and rerun ({exc.message})"
    elif isinstance(exc, UserError):
        result.error = str(exc)
    elif isinstance(exc, OSError) and is_resource_error(exc):  # the machine's fault (full disk...): retried
        result.error = resource_message(exc)
        result.failure_class = FailureClass.TRANSIENT
        result.cause = Cause.DISK_FULL if exc.errno in DISK_FULL_ERRNOS else Cause.NOT_WRITABLE
    else:  # a bug or a bad path outside any step
        log.debug("%s failed outside a step", result.id, exc_info=exc)
        result.error = f"{type(exc).__name__}: {exc}"
    if result.error:
        # Published on the page: paths inside the project as the project names them, so the same failure reads the
        # same from any checkout (a CI job's workspace, a clone).
        result.error = result.error.replace(f"{project}{os.sep}", "")
    append_log(log_file, f"\n# {result.status.upper()} in step {result.failed_step}: {result.error}\n")


def append_log(log_file: Path, text: str) -> None:
    """Best effort: the record says the same, and a full disk must not hide the real failure."""
    try:
        with log_file.open("a") as handle:
            handle.write(text)
    except OSError:
        pass


def check_built_wheel(job: BuildJob, output: BuildOutput, runner: Runner, say: Callable[[str], None]) -> None:
    """The plugin wheel is the build's (name, version and label, pins, the torch it was built against) and every
    symbol it leaves undefined is provided by the build's torch or SDK; raises StepFailed("check", ...).

    say: takes each line saying what the check did (for the build's log and the console), as it is done."""
    assert output.plugin_wheel is not None
    matrix = job.matrix
    contract = matrix.contract
    if contract.build.relabel:  # the project's build fixed its own version: give the wheel the build's
        version = Version(f"{matrix.plugin.version}+{job.build.key.label}")
        built = output.plugin_wheel
        output.plugin_wheel = relabel_wheel(built, version, job.workdir / "relabeled")
        was = f"{built.name.split('-')[0]}-{parse_wheel_filename(built.name)[1]}"  # as the file spells its name
        say(f"check: relabelled {was} -> {version} (build.relabel)")
    sdk_distribution = matrix.sdk.distribution if matrix.sdk is not None and matrix.sdk.builds_wheel else None
    wheel = output.plugin_wheel
    checked = check_plugin_wheel(
        wheel,
        job.build,
        matrix.plugin.distribution,
        sdk_distribution,
        plugin_version=matrix.plugin.version,
        check=contract.check,
    )
    for line in wheel_lines(wheel, job, sdk_distribution, checked):
        say(line)
    torch = output.torch_build.get("version")
    symbols = check_symbols(wheel, runner.provided_symbols(job))
    say(symbols_line(symbols, f"torch {torch}'s libraries" + (" and the SDK's" if matrix.sdk is not None else "")))
    if symbols.missing:
        missing = symbols.missing
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise StepFailed("check", f"{len(missing)} symbol(s) not provided by torch {torch}: {shown}")
    output.torch_build["built_with"] = checked.build_info


def wheel_lines(wheel: Path, job: BuildJob, sdk_distribution: str | None, checked: CheckedWheel) -> list[str]:
    """What the check found the wheel to be, once it passed: its name, version and tags, its pins, the torch it says
    it was built against (from what the check read of it: the wheel is not opened again)."""
    contract, build = job.matrix.contract, job.build
    if contract.build.relabel:
        origin = "relabelled"
    elif contract.build.version_file:
        origin = f"version written to {contract.build.version_file}: build.version-file"
    elif contract.build.version_env:
        origin = f"version given as {contract.build.version_env}: build.version-env"
    else:
        origin = "version as the project's build set it"
    lines = [
        f"check: {wheel.name} is the build's distribution, version and label ({origin}), tags for Python {build.python}"
    ]
    requirements = checked.requires_dist
    torch = requirements_named(requirements, "torch")
    pins = ", ".join(f"'{r}'" for r in torch)
    if contract.check.torch_pin == TorchPin.RELEASE_LINE:
        serves = f", admitting torch {', '.join(map(str, build.torch_releases))}" if build.key.stable else ""
        lines.append(f"check: torch pin: Requires-Dist {pins}{serves} (check.torch-pin: release-line)")
    else:
        said = f"the wheel requires {pins}" if torch else "the wheel names no torch"
        lines.append(f"check: torch pin: not checked, {said} (check.torch-pin: none)")
    if sdk_distribution is not None and build.sdk is not None:
        sdk = requirement_named(requirements, sdk_distribution)
        lines.append(f"check: SDK pin: Requires-Dist '{sdk}' admits SDK {build.sdk.major}.x only")
    check = contract.check
    if check.build_info:
        recorded = checked.build_info.get(check.build_info_torch)
        lines.append(f"check: built against torch {recorded} ({check.build_info}: {check.build_info_torch})")
    return lines


def symbols_line(symbols: SymbolCheck, against: str) -> str:
    """The symbol check's outcome in one line: how many undefined symbols of which libraries, resolved or not."""
    if not symbols.libraries:
        return "check: symbols: the wheel holds no shared library (*.so), nothing to resolve"
    libraries = ", ".join(symbols.libraries)
    if symbols.missing:
        return (
            f"check: symbols: {len(symbols.missing)} of {symbols.undefined} undefined symbol(s) of {libraries} not "
            f"provided by {against}"
        )
    resolved = f"{symbols.undefined} undefined symbol(s) of {libraries} resolved against {against}"
    return f"check: symbols: {resolved}; none missing"


def judge_smoke(run: SmokeRun, output: CellOutput) -> None:
    """Record the smoke counts and features; a failed run fails the cell with its counts (a transient failure, a
    timeout or a signal, is raised as it is: the counts so far say nothing about the plugin)."""
    output.smoke = read_junit(run.junit)
    try:
        output.features = read_features(run.features)
    except ValueError as exc:
        if run.failure is not None and run.failure.failure_class == FailureClass.TRANSIENT:
            raise run.failure from None
        raise StepFailed("smoke", str(exc)) from None
    if run.failure is None:
        return
    if run.failure.failure_class == FailureClass.TRANSIENT:
        raise run.failure
    counts = output.smoke
    detail = f" ({run.detail})" if run.detail else ""
    raise StepFailed(
        "smoke",
        f"{counts.failed} failed, {counts.errors} errors, {counts.passed} passed{detail}",
        run.failure.log_tail,
    )
