"""The drift probe: build and smoke-test the plugin against a torch release that matrix.yaml does not
list yet, and report the compile errors and smoke failures grouped by the interface they hit.

It runs one cell through the same engine and runner as the matrix, in its own workspace
(build/probe/), so nothing it does reaches wheels/ or the recorded results.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from torch_buildmatrix.builder.engine import Engine
from torch_buildmatrix.builder.records.model import CellResult
from torch_buildmatrix.builder.runners.base import Runner
from torch_buildmatrix.builder.scheduler import RunOptions
from torch_buildmatrix.builder.steps import ProgressCallback
from torch_buildmatrix.builder.workspace import RunLock, Workspace
from torch_buildmatrix.errors import UserError
from torch_buildmatrix.model.cells import Cell, make_cell
from torch_buildmatrix.model.matrix import Matrix, SdkVersion, TorchRelease, WheelSource
from torch_buildmatrix.model.registry import DEFAULT_INDEX, Registry
from torch_buildmatrix.util.atomic import write_text_atomic
from torch_buildmatrix.util.http import NETWORK_DEADLINE
from torch_buildmatrix.vocab import REGISTRY_VARIANT, RunnerName, Status, WheelSourceKind

# What kind of break a compiler message means, in the words a shim author needs.
BREAKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"marked .override., but does not override"),
        "virtual method absent in this release (drop the override)",
    ),
    (re.compile(r"looser exception specification"), "noexcept differs from this release's declaration"),
    (re.compile(r"abstract class type|pure virtual"), "new pure virtual method to implement"),
    (
        re.compile(r"has no member named|is not a member of|was not declared|does not name a type|no such file"),
        "name missing in this release",
    ),
    (
        re.compile(r"could not convert|cannot convert|no matching function|invalid conversion|no type named"),
        "signature or type changed",
    ),
    (re.compile(r"#error"), "header refuses this build configuration"),
)

ERROR_LINE = re.compile(
    r"^(?P<file>[^\s:]+\.(?:cpp|cc|c|h|hpp)):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<message>.*)$"
)
FAILED_TEST = re.compile(r"^FAILED (?P<test>\S+?)(?: - (?P<reason>.*))?$")


Interfaces = tuple[tuple[str, str], ...]  # (source path prefix, the torch interface its files implement)


@dataclass(frozen=True)
class CompileError:
    file: str  # path inside plugin/ (csrc/...), or a torch header
    line: int
    message: str

    def interface(self, interfaces: Interfaces = ()) -> str:
        """The torch interface the error's file implements, by matrix.yaml's probe.interfaces (first prefix that
        matches); a torch header names itself."""
        for prefix, name in interfaces:
            if self.file.startswith(prefix):
                return name
        return f"torch headers ({self.file})" if "/include/" in self.file else f"other ({self.file})"

    @property
    def kind(self) -> str:
        for pattern, name in BREAKS:
            if pattern.search(self.message):
                return name
        return "other compile error"


@dataclass
class ProbeReport:
    release: str
    cell_id: str
    status: Status
    failed_step: str | None
    errors: list[CompileError] = field(default_factory=list)
    failed_tests: list[str] = field(default_factory=list)
    log: Path | None = None
    interfaces: Interfaces = ()  # matrix.yaml's probe.interfaces: (source path prefix, torch interface)

    def by_interface(self) -> dict[str, list[CompileError]]:
        groups: dict[str, list[CompileError]] = defaultdict(list)
        for error in self.errors:
            groups[error.interface(self.interfaces)].append(error)
        return dict(sorted(groups.items()))

    def verdict(self) -> str:
        """One line for `outdated`: builds and passes as is, needs shims (where), or the probe could not tell."""
        if self.status == Status.PASSED:
            return "builds and passes as is"
        where = list(self.by_interface())
        if self.failed_tests:
            where.append(f"smoke suite ({len(self.failed_tests)} failed)")
        if where:
            return "needs shims: " + "; ".join(where)
        return f"probe inconclusive: failed in step {self.failed_step} before any compile error or smoke result"

    def markdown(self) -> str:
        lines = [
            f"# Drift probe: torch {self.release} ({self.cell_id})",
            "",
            f"Result: **{self.status}**" + (f" in step `{self.failed_step}`" if self.failed_step else "") + ".",
            "",
        ]
        if self.errors:
            lines += [f"## Compile errors ({len(self.errors)}), by interface", ""]
            for interface, errors in self.by_interface().items():
                lines.append(f"### {interface}")
                for e in errors:
                    lines.append(f"- `{e.file}:{e.line}` ({e.kind}): {e.message}")
                lines.append("")
        if self.failed_tests:
            lines += [f"## Smoke tests that failed ({len(self.failed_tests)})", ""]
            lines += [f"- {t}" for t in self.failed_tests] + [""]
        if self.status == Status.PASSED:
            lines += ["The plugin builds and passes its smoke suite on this release without a shim series.", ""]
        else:
            lines += [
                "Next: `torch-buildmatrix patches edit <minor>` after adding the release to matrix.yaml, fix the tree, "
                "then `torch-buildmatrix patches refresh <minor>` (patches/README.md).",
                "",
            ]
        if self.log is not None:
            lines.append(f"Full log: {self.log}")
        return "\n".join(lines) + "\n"


def _plugin_relative(path: str) -> str:
    """Compiler paths look like ../../csrc/aten/Ops.cpp or /abs/.../tree/plugin/csrc/...: keep csrc/..."""
    if "/torch/include/" in path:
        return "torch/include/" + path.split("/torch/include/", 1)[1]
    index = path.find("csrc/")
    return path[index:] if index >= 0 else path


def parse_compile_errors(log_text: str) -> list[CompileError]:
    seen: set[tuple[str, int, str]] = set()
    out = []
    for raw in log_text.splitlines():
        match = ERROR_LINE.match(raw.strip())
        if not match:
            continue
        key = (_plugin_relative(match["file"]), int(match["line"]), match["message"].strip())
        if key not in seen:
            seen.add(key)
            out.append(CompileError(*key))
    return out


def parse_failed_tests(log_text: str) -> list[str]:
    out = []
    for raw in log_text.splitlines():
        match = FAILED_TEST.match(raw.strip())
        if match:
            out.append(match["test"] + (f": {match['reason']}" if match["reason"] else ""))
    return out


def registry_versions(registry: Registry) -> list[Version]:
    versions = set()
    for filename, _url in registry.index_files("torch"):
        try:
            versions.add(parse_wheel_filename(filename)[1])
        except InvalidWheelFilename:
            continue
    return sorted(v for v in versions if not v.is_prerelease and not v.local)


def resolve_release(spec: str, matrix: Matrix, registry: Registry, series: tuple[str, ...]) -> TorchRelease:
    """'2.16' means the newest 2.16.x on the registry; '2.14.1' means exactly that release."""
    try:
        wanted = Version(spec)
    except InvalidVersion:
        raise UserError(f"probe: {spec!r} is not a torch version (expected e.g. 2.16 or 2.14.1)") from None
    known = registry_versions(registry)
    if len(wanted.release) == 2:
        candidates = [v for v in known if v.release[:2] == wanted.release]
    else:
        candidates = [v for v in known if v == wanted]
    if not candidates:
        newest = known[-1] if known else "none"
        raise UserError(f"probe: torch {spec} has no wheels on the registry (newest release there: {newest})")
    for name in series:
        if not (matrix.patches_dir / name / "series").is_file():
            raise UserError(
                f"probe: no shim series patches/{name}/series (known: "
                f"{', '.join(sorted(p.parent.name for p in matrix.patches_dir.glob('*/series')))})"
            )
    return TorchRelease(
        version=candidates[-1],
        variant=REGISTRY_VARIANT,
        wheels=WheelSource(WheelSourceKind.REGISTRY),
        python=None,
        patches=series,
    )


def probe_cell(release: TorchRelease, matrix: Matrix, registry: Registry, python: str | None, sdk: str | None) -> Cell:
    published = registry.pythons(release)
    wanted = [p for p in (release.python or matrix.python) if p in published]
    if python is not None:
        wanted = [p for p in wanted if str(p) == python]
        if not wanted:
            raise UserError(
                f"probe: torch {release.version} publishes no wheel for Python {python} among matrix.yaml's "
                f"Pythons (it has: {', '.join(str(p) for p in sorted(published)) or 'none'})"
            )
    if not wanted:
        raise UserError(
            f"probe: torch {release.version} publishes no wheel for any Python of matrix.yaml "
            f"({', '.join(str(p) for p in matrix.python)})"
        )
    return make_cell(matrix, release, max(wanted), probe_sdk(matrix, sdk))


def probe_sdk(matrix: Matrix, sdk: str | None) -> SdkVersion | None:
    """The SDK version asked for (a version or its prefix: "2"), else the newest of matrix.yaml; None without an SDK."""
    if matrix.sdk is None:
        if sdk is not None:
            raise UserError("probe: --sdk, but matrix.yaml declares no sdk")
        return None
    chosen = max(matrix.sdk.versions, key=lambda v: v.version) if sdk is None else matrix.sdk.version(sdk)
    if chosen is None:
        known = ", ".join(str(v.version) for v in matrix.sdk.versions)
        raise UserError(f"probe: no {matrix.sdk.name} {sdk} in matrix.yaml (known: {known})")
    return chosen


def probe_cell_here(
    release: TorchRelease, matrix: Matrix, registry: Registry, asked: RunnerName, sdk: str | None = None
) -> tuple[Cell, Runner, str]:
    """The probe's cell with a Python this machine can build, its runner, and why.

    The probe tests torch's C++ interfaces, not a Python: any Python the release publishes (within matrix.yaml's
    bounds) will do. The entry's own Python comes first (a coverage cell's), then the others newest first; the first
    one a runner can build here is probed. Raises UserError naming each Python and why it cannot be built here.
    """
    from torch_buildmatrix.builder.runners.select import runner_for_cell

    published = registry.pythons(release)
    own = [p for p in sorted(release.python or (), reverse=True) if p in published]
    others = sorted((p for p in published if p in matrix.python and p not in own), reverse=True)
    if not own and not others:
        probe_cell(release, matrix, registry, None, sdk)  # raises, saying which Pythons it publishes
    why_not = []
    for python in own + others:
        cell = make_cell(matrix, release, python, probe_sdk(matrix, sdk))
        try:
            runner, why = runner_for_cell(cell, probe_matrix(matrix, release), asked)
        except UserError as exc:
            why_not.append(f"{python}: {exc}")
            continue
        return cell, runner, why
    raise UserError(f"no Python that torch {release.version} publishes can be built here ({'; '.join(why_not)})")


def report_from_result(
    release: TorchRelease, result: CellResult, log: Path, interfaces: Interfaces = ()
) -> ProbeReport:
    text = log.read_text(errors="replace") if log.is_file() else ""
    return ProbeReport(
        str(release.version),
        result.id,
        result.status,
        result.failed_step,
        parse_compile_errors(text),
        parse_failed_tests(text) if result.failed_step == "smoke" else [],
        log,
        interfaces,
    )


def probe_matrix(matrix: Matrix, release: TorchRelease) -> Matrix:
    """The matrix as the probe sees it: only the probed release (the rest of matrix.yaml unchanged)."""
    return replace(matrix, torch=(release,))


def probe_dir(matrix: Matrix, release: TorchRelease) -> Path:
    return matrix.root / "build" / "probe" / f"torch{release.version}"


def run_probe(
    matrix: Matrix,
    release: TorchRelease,
    cell: Cell,
    registry: Registry,
    *,
    runner: Runner,
    progress: ProgressCallback,
) -> ProbeReport:
    """Build and smoke-test one cell in build/probe/torch<version>/ (its own workspace; caches are shared).

    Writes report.md there and returns the report; nothing reaches wheels/ or the matrix's results.
    """
    scratch = probe_dir(matrix, release)
    workspace = Workspace.for_root(matrix.root, build_dir=scratch / "work", wheels_dir=scratch / "out")
    alone = probe_matrix(matrix, release)
    with RunLock(workspace):
        engine = Engine(alone, workspace, runner, registry, progress=progress)
        [result] = engine.run([cell], RunOptions(jobs=1, fail_fast=False, force=True))
    report = report_from_result(
        release, result, workspace.logs_dir / f"{cell.id}.log", matrix.contract.probe_interfaces
    )
    write_text_atomic(scratch / "report.md", report.markdown())
    return report


__all__ = [
    "CompileError",
    "ProbeReport",
    "parse_compile_errors",
    "parse_failed_tests",
    "probe_cell",
    "probe_cell_here",
    "probe_matrix",
    "report_from_result",
    "resolve_release",
    "run_probe",
]


@dataclass(frozen=True)
class ProbeOptions:
    release: str  # "2.16" (the newest 2.16.x on the registry) or "2.14.1"
    matrix: Path = Path("matrix.yaml")
    offline: bool = False  # the cached registry answers only
    network_deadline: float = NETWORK_DEADLINE  # seconds for all its registry reads
    index_url: str = DEFAULT_INDEX  # the registry its release is resolved on
    python: str | None = None  # None: the newest Python the release publishes that this machine can build
    sdk: str | None = None  # None: the newest SDK version of matrix.yaml
    series: tuple[str, ...] = ()  # shim series applied first, in order
    runner: str | None = None  # None: local


@dataclass(frozen=True)
class ProbePlan:
    """The probe before it runs: the release, the cell it builds and tests, its runner and why."""

    matrix: Matrix
    registry: Registry
    release: TorchRelease
    cell: Cell
    runner: Runner
    why: str


def plan_probe(options: ProbeOptions) -> ProbePlan:
    from torch_buildmatrix.builder.runners.select import runner_for_cell
    from torch_buildmatrix.model.loader import load_matrix

    matrix = load_matrix(options.matrix.resolve())
    registry = Registry(
        Workspace.for_root(matrix.root).cache_dir / "registry",
        index_url=options.index_url,
        offline=options.offline,
        total=options.network_deadline,
    )
    release = resolve_release(options.release, matrix, registry, options.series)
    asked = RunnerName(options.runner or RunnerName.LOCAL)
    if options.python is None:  # any Python the release publishes that this machine can build
        cell, runner, why = probe_cell_here(release, matrix, registry, asked, options.sdk)
    else:
        cell = probe_cell(release, matrix, registry, options.python, options.sdk)
        runner, why = runner_for_cell(cell, probe_matrix(matrix, release), asked)
    return ProbePlan(matrix, registry, release, cell, runner, why)


def run_planned(plan: ProbePlan, progress: ProgressCallback) -> ProbeReport | str:
    """Run the probe; Ctrl-C or SIGTERM kill its children at once and interrupt its cell: then the signal's name is
    returned instead of the report."""
    from torch_buildmatrix.util.process import CHILDREN
    from torch_buildmatrix.util.signals import stop_on_signals

    with stop_on_signals(CHILDREN.stop) as stopped_by:
        report = run_probe(plan.matrix, plan.release, plan.cell, plan.registry, runner=plan.runner, progress=progress)
    return stopped_by[0] if stopped_by else report


@dataclass(frozen=True)
class ProbeOutcome:
    """The probe's report and where it was written, or the signal that stopped it (then no report)."""

    plan: ProbePlan
    report: ProbeReport | None
    stopped_by: str | None = None

    @property
    def report_path(self) -> Path:
        return probe_dir(self.plan.matrix, self.plan.release) / "report.md"


def probe(options: ProbeOptions, planned: Callable[[ProbePlan], None], progress: ProgressCallback) -> ProbeOutcome:
    """The `probe` command: plan it (`planned` hears which cell and runner, before anything is built), run it."""
    plan = plan_probe(options)
    planned(plan)
    report = run_planned(plan, progress)
    if isinstance(report, str):
        return ProbeOutcome(plan, None, report)
    return ProbeOutcome(plan, report)
