"""Command line: the only layer that talks to the terminal. `python -m buildmatrix --help`."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from buildmatrix import __version__
from buildmatrix.builder.workspace import RunLock, Workspace
from buildmatrix.errors import EXIT_CELLS_FAILED, EngineUnavailable, ResourceError, UserError
from buildmatrix.model.builds import Build, plan_builds
from buildmatrix.model.cells import Cell, Selection, expand
from buildmatrix.model.loader import load_matrix
from buildmatrix.model.matrix import Matrix
from buildmatrix.model.registry import DEFAULT_INDEX, Registry, published_pythons
from buildmatrix.progress import failure_kind
from buildmatrix.util.atomic import write_text_atomic
from buildmatrix.util.failures import is_resource_error, resource_message
from buildmatrix.util.process import CHILDREN
from buildmatrix.vocab import RunnerName, Status

if TYPE_CHECKING:
    from buildmatrix.builder.records.model import BuildResult, CellResult
    from buildmatrix.builder.records.store import ResultStore
    from buildmatrix.builder.runners.select import RunnerPlan
    from buildmatrix.model.pythons import Python


@dataclass(frozen=True)
class Loaded:
    """The matrix, its builds (planned from every cell, so a selection never changes one), the selected cells."""

    matrix: Matrix
    cells: list[Cell]  # selected
    builds: dict[str, Build]  # every build of the matrix, by id
    registry: Registry

    def builds_of(self, cells: list[Cell]) -> list[Build]:
        return [self.builds[i] for i in dict.fromkeys(c.build.id for c in cells)]


def load_cells(args: argparse.Namespace) -> Loaded:
    matrix = load_matrix(Path(args.matrix).resolve())
    registry = Registry(
        Workspace.for_root(matrix.root).cache_dir / "registry",
        offline=args.offline,
        refresh=getattr(args, "force", False),  # build --force: the registry's answers are a cache too
    )
    available = published_pythons(matrix, registry)
    cells = expand(matrix, available)
    builds = plan_builds(matrix, cells, available)
    selection = Selection(
        tuple(args.torch or ()), tuple(args.python or ()), tuple(args.sdk or ()), tuple(args.variant or ())
    )
    selected = selection.apply(cells)
    if getattr(args, "build", None):
        unknown = [b for b in args.build if b not in builds]
        if unknown:
            raise UserError(f"--build {unknown[0]}: no such build (the matrix's: {', '.join(builds)})")
        selected = [c for c in selected if c.build.id in args.build]
    return Loaded(matrix, selected, builds, registry)


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= minimum (argparse reports anything else as a usage error, exit code 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", default="matrix.yaml", help="path to matrix.yaml (default: %(default)s)")
    parser.add_argument("--offline", action="store_true", help="use the cached registry answers only")
    parser.add_argument("--torch", action="append", metavar="X.Y", help="only these torch minors (repeatable)")
    parser.add_argument("--python", action="append", metavar="X.Y", help="only these Pythons (repeatable)")
    parser.add_argument(
        "--sdk", action="append", metavar="V", help='only these SDK versions ("2" selects every 2.x; repeatable)'
    )
    parser.add_argument("--variant", action="append", metavar="NAME", help="only these torch variants (repeatable)")
    parser.add_argument(
        "--build", action="append", metavar="ID", help="only the cells of these builds, e.g. torch2.13-cpu-drv2"
    )


def cmd_matrix(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix import report_matrix

    loaded = load_cells(args)
    matrix, cells = loaded.matrix, loaded.cells
    builds = loaded.builds_of(cells)
    if args.github:
        # Each build's and cell's runner as `build` would choose it on this machine (the plan job's: the Pythons
        # setup-python gave it); one no runner can make stops the plan, before any job starts.
        report_matrix.check_github_limit(cells, builds)
        plan = runner_plan(matrix, cells, args, builds)
        plan.check()
        runners = {p: r for p, c in plan.by_python.items() if (r := c.runner) is not None}
        print(json.dumps(report_matrix.github_matrix(cells, builds, runners)))
    elif args.json:
        print(json.dumps([c.as_dict() for c in cells], indent=2))
    else:
        plan = runner_plan(matrix, cells, args, builds)
        sdk_name = matrix.sdk.name if matrix.sdk is not None else None
        reasons = {c.id: plan.choice(c).reason for c in cells}
        build_reasons = {b.id: plan.choice_for(b.python).reason for b in builds}
        if len(cells) > report_matrix.RICH_ROWS:
            print(report_matrix.cells_text(cells, reasons, sdk_name))
        else:
            console.print(report_matrix.cells_table(cells, reasons, sdk_name))
        if len(builds) > report_matrix.RICH_ROWS:
            print(f"\nbuilds\n{report_matrix.builds_text(builds, build_reasons, sdk_name)}")
        else:
            console.print(report_matrix.builds_table(builds, build_reasons, sdk_name))
        console.print(f"{len(cells)} cell(s), {len(builds)} build(s)")
        for problem in plan.problems:
            console.print(Text.assemble(("cannot build: ", "red"), problem))
    return 0


def runner_plan(matrix: Matrix, cells: list[Cell], args: argparse.Namespace, builds: list[Build]) -> RunnerPlan:
    """Each cell's and build's runner and why (--runner, else matrix.yaml's runner), with this machine's
    interpreters."""
    from buildmatrix.builder.runners.local import LocalRunner
    from buildmatrix.builder.runners.select import plan_runners

    asked = RunnerName(args.runner or matrix.runner)
    return plan_runners(cells, matrix, asked, LocalRunner(), [b.python for b in builds])


def cmd_build(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.builder.engine import Engine
    from buildmatrix.builder.records.parse import RecordRules
    from buildmatrix.builder.records.store import ResultStore
    from buildmatrix.builder.runners.select import runners_or_unbuilt
    from buildmatrix.builder.scheduler import RunOptions
    from buildmatrix.builder.unbuilt import record_not_built
    from buildmatrix.progress import ProgressDisplay, summary_table

    loaded = load_cells(args)
    matrix, cells, registry = loaded.matrix, loaded.cells, loaded.registry
    if not cells:
        raise UserError("the selection matches no cell of the matrix; `buildmatrix matrix` lists them")
    builds = loaded.builds_of(cells)
    # --prebuilt makes no build: only the cells need a runner here
    plan = runner_plan(matrix, [] if args.builds_only else cells, args, [] if args.prebuilt else builds)
    _print_plan(console, plan, [] if args.builds_only else cells, [] if args.prebuilt else builds)
    # Before anything is written: a cell no runner can build, or --runner docker with no engine, stops the run here.
    # Under auto, a missing engine is started where it can be; else the cells only an image serves are not built.
    workspace = Workspace.for_root(matrix.root)
    chosen = runners_or_unbuilt(plan, matrix, workspace.build_dir.parent / "dockerd.log")
    _say_lines(console, chosen.engine_actions)
    cells, unbuilt = _leave_unbuilt(loaded, cells, chosen.unbuilt, args.builds_only)
    builds = loaded.builds_of(cells)
    made = "testing builds made elsewhere" if args.prebuilt else f"{len(builds)} build(s)"
    console.print(f"[bold]{len(cells)} cell(s)[/bold], {made}, {chosen.why}, {args.jobs} job(s)")
    options = RunOptions(
        jobs=args.jobs, fail_fast=args.fail_fast, force=args.force, retries=args.retries, prebuilt=args.prebuilt
    )
    shown = [] if args.prebuilt else builds
    store = ResultStore(workspace.results_dir, RecordRules.of(matrix))
    with RunLock(workspace), ProgressDisplay(console, [] if args.builds_only else cells, shown) as display:
        not_built = [r for r in record_not_built(store, unbuilt) if r.status == Status.NOT_BUILT]
        if not chosen.runners or not builds:  # every cell needs the engine: the records and summary say so
            _write_summary(store)
            _say_not_built(console, not_built)
            console.print(f"results: {workspace.results_dir / 'summary.json'}")
            return EngineUnavailable.exit_code
        cell_runners = chosen.cell_runners(plan)
        engine = Engine(matrix, workspace, cell_runners, registry, progress=display.update, builds=loaded.builds)
        with stop_on_signals(engine.interrupt) as stopped_by:
            results = engine.run(cells, options, builds_only=args.builds_only)
    if engine.orphans_ended:
        console.print(f"ended {engine.orphans_ended} process(es) left running by an earlier run that was killed")
    made_builds = [engine.build_results[b.id] for b in builds if b.id in engine.build_results]
    console.print(summary_table(results, made_builds, up_to_date=display.up_to_date()))
    for cell_id, damage in engine.damaged.items():
        console.print(Text.assemble((cell_id, "yellow"), f" rebuilt: its record was damaged ({damage})"))
    failed: list[CellResult | BuildResult] = [r for r in results if r.status != Status.PASSED]
    if args.builds_only:
        failed = [b for b in made_builds if b.status != Status.PASSED]
    _say_failed(console, workspace, failed)
    _say_not_built(console, not_built)
    console.print(f"results: {workspace.results_dir / 'summary.json'}")
    if stopped_by:
        console.print(f"stopped by {stopped_by[0]}; finished cells are recorded, the next run resumes the others")
        return 128 + int(signal.Signals[stopped_by[0]])
    if failed:
        return EXIT_CELLS_FAILED
    return EngineUnavailable.exit_code if not_built else 0


def _print_plan(console: Console, plan: RunnerPlan, cells: list[Cell], builds: list[Build]) -> None:
    """Each cell's and build's runner and why, before anything runs."""
    from buildmatrix import report_matrix

    reasons = {c.id: plan.choice(c).reason for c in cells}
    reasons |= {f"build {b.id}": plan.choice_for(b.python).reason for b in builds}
    _say_lines(console, report_matrix.runner_plan_lines(list(reasons), reasons))


def _say_lines(console: Console, lines: Sequence[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, markup=False)


def _say_failed(console: Console, workspace: Workspace, failed: Sequence[CellResult | BuildResult]) -> None:
    for result in failed:
        log_path = workspace.wheels_dir / (result.log or "")
        error = result.error or ""
        where = "" if f"(log: {log_path})" in error else f"  (log: {log_path})"  # step errors name their log already
        what = f" {result.status} in {result.failed_step} ({failure_kind(result)}): "
        console.print(Text.assemble((result.id, "red"), what, f"{error}{where}"))


def _leave_unbuilt(
    loaded: Loaded, cells: list[Cell], unbuilt: Mapping[Python, str], builds_only: bool
) -> tuple[list[Cell], list[tuple[Cell, str]]]:
    """The cells the run builds, and those it leaves unbuilt with the reason: a cell of an unbuilt Python, or whose
    build runs on one."""
    skipped = {b.id for b in loaded.builds_of(cells) if b.python in unbuilt}
    left = [
        (c, unbuilt.get(c.python) or unbuilt[loaded.builds[c.build.id].python])
        for c in cells
        if c.build.id in skipped or (c.python in unbuilt and not builds_only)
    ]
    out = {c.id for c, _ in left}
    return [c for c in cells if c.id not in out], left


def _write_summary(store: ResultStore) -> None:
    try:
        cells, damaged = store.scan()
        builds, damaged_builds = store.scan_builds()
        store.write_summary(cells, damaged + damaged_builds, builds)
    except OSError as exc:
        raise ResourceError(resource_message(exc, store.directory)) from None


def _say_not_built(console: Console, not_built: list[CellResult]) -> None:
    """Each cell the run left unbuilt, with its record's reason (which names the command that fixes it)."""
    for result in not_built:
        console.print(Text.assemble((result.id, "yellow"), f" {result.status}: ", result.error or ""))


@contextmanager
def stop_on_signals(stop: Callable[[str], object]) -> Iterator[list[str]]:
    """While the block runs, Ctrl-C and SIGTERM call stop (an engine's interrupt: its children die at once, no new
    cell starts); yields the signals seen."""
    seen: list[str] = []

    def handler(number: int, _frame: object) -> None:
        seen.append(signal.Signals(number).name)
        stop(seen[0])

    previous = {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield seen
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def cmd_merge_results(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.builder.merge import merge_wheel_trees
    from buildmatrix.builder.records.parse import RecordRules

    into = Path(args.into)
    # With the project's matrix.yaml, every record's wheels are checked against its distributions too.
    matrix_path = Path(args.matrix)
    matrix = load_matrix(matrix_path.resolve()) if matrix_path.is_file() else None
    rules = RecordRules.of(matrix) if matrix is not None else None
    # In a project, under the run lock a build takes (RunLocked, exit 6): a build writing wheels/ meanwhile would mix
    # its records with the merged ones.
    with RunLock(Workspace.for_root(matrix.root)) if matrix is not None else contextlib.nullcontext():
        report = merge_wheel_trees([Path(p) for p in args.sources], into, rules)
    console.print(
        f"merged {len(args.sources)} tree(s) into {into}: {len(report.cells)} cell record(s), "
        f"{report.wheels} wheel(s) checked against their records, {report.copied} file(s) copied",
        highlight=False,
    )
    return 0


def cmd_patches(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.builder import patchtool

    matrix = load_matrix(Path(args.matrix).resolve())
    edit_root = Workspace.for_root(matrix.root).build_dir.parent / "patch-edit"
    if args.action == "check":
        report = patchtool.check(matrix)
        for release, applied in report.applied.items():
            console.print(
                f"{release}: {len(applied)} patch(es) apply cleanly" + (f" ({', '.join(applied)})" if applied else ""),
                highlight=False,
            )
        for line in report.failures:
            console.print(Text.assemble(("FAIL ", "red"), line))
        for name in report.unused_series:
            console.print(
                Text.assemble(
                    ("UNUSED ", "red"), f"patches/{name}: no torch release of the matrix uses this series; delete it"
                )
            )
        for line in report.dead_gates:
            console.print(Text.assemble(("DEAD ", "red"), line))
        return 0 if report.ok else EXIT_CELLS_FAILED
    if not args.release:
        raise UserError(f"`patches {args.action}` needs a torch release, e.g. `patches {args.action} 2.4`")
    if args.action == "edit":
        tree = patchtool.edit_tree(matrix, args.release, edit_root)
        console.print(
            f"edit the plugin for torch {args.release} in {tree / matrix.plugin.source.name}, "
            f"then run `buildmatrix patches refresh {args.release}`"
        )
        return 0
    result = patchtool.refresh(matrix, args.release, edit_root / f"torch{args.release}")
    for path in result.files:
        console.print(f"wrote {path.relative_to(matrix.root)}", highlight=False)
    if result.missing_from_matrix:
        console.print(
            f"now add '{args.release}' as the last entry of the patches of torch {args.release} in {matrix.path.name}"
        )
    return 0


def cmd_probe(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.builder import probe
    from buildmatrix.builder.runners.select import runner_for_cell

    matrix = load_matrix(Path(args.matrix).resolve())
    registry = Registry(Workspace.for_root(matrix.root).cache_dir / "registry", offline=args.offline)
    release = probe.resolve_release(args.release, matrix, registry, tuple(args.series or ()))
    asked = RunnerName(args.runner or RunnerName.LOCAL)
    if args.python is None:  # any Python the release publishes that this machine can build
        cell, runner, why = probe.probe_cell_here(release, matrix, registry, asked, args.sdk)
    else:
        cell = probe.probe_cell(release, matrix, registry, args.python, args.sdk)
        runner, why = runner_for_cell(cell, probe.probe_matrix(matrix, release), asked)
    console.print(
        f"probing torch {release.version} as cell {cell.id} ({why})"
        + (f" with series {', '.join(release.patches)}" if release.patches else "")
    )
    with stop_on_signals(CHILDREN.stop) as stopped_by:  # the probe's children die at once, its cell is interrupted
        report = probe.run_probe(
            matrix,
            release,
            cell,
            registry,
            runner=runner,
            progress=lambda cell_id, what: console.print(f"  {cell_id}: {what}", highlight=False),
        )
    if stopped_by:
        console.print(f"stopped by {stopped_by[0]}")
        return 128 + int(signal.Signals[stopped_by[0]])
    console.print(report.markdown(), highlight=False, markup=False)
    console.print(f"report: {probe.probe_dir(matrix, release) / 'report.md'}")
    return 0 if report.status == Status.PASSED else EXIT_CELLS_FAILED


def cmd_outdated(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.builder import probe, update
    from buildmatrix.builder.probe import ProbeReport
    from buildmatrix.model.matrix import TorchRelease
    from buildmatrix.model.outdated import compare, read_sources
    from buildmatrix.report_outdated import outdated_markdown
    from buildmatrix.util.atomic import write_text_atomic

    matrix = load_matrix(Path(args.matrix).resolve())
    registry = Registry(
        Workspace.for_root(matrix.root).cache_dir / "registry", index_url=args.index_url, offline=args.offline
    )
    variants = frozenset(args.variant) if args.variant else None
    comparison = compare(matrix, read_sources(matrix, registry), variants)
    probes: dict[TorchRelease, ProbeReport | str] = {}
    applied = False
    if args.apply and comparison.edits:
        result = update.write_edits(matrix, comparison.edits, registry)
        applied = True
        console.print(f"edited {matrix.path.name}: {len(comparison.edits)} change(s)", highlight=False)
        for release in result.changed:
            if args.no_probe:
                probes[release] = "not probed (`--no-probe`)"
                continue
            # One release the probe cannot run on (no interpreter, a locked workspace) leaves the others probed.
            try:
                asked = RunnerName(args.runner or RunnerName.LOCAL)
                cell, runner, why = probe.probe_cell_here(release, result.matrix, registry, asked)
                console.print(f"drift probe of torch {release.version} as cell {cell.id} ({why})", highlight=False)
                report = probe.run_probe(
                    result.matrix,
                    release,
                    cell,
                    registry,
                    runner=runner,
                    progress=lambda cell_id, what: console.print(f"  {cell_id}: {what}", highlight=False),
                )
            except UserError as exc:
                probes[release] = f"not probed: {exc}"
                console.print(f"torch {release.version}: {probes[release]}", highlight=False)
                continue
            probes[release] = report
            console.print(f"torch {release.version}: {report.verdict()}", highlight=False)
    text = outdated_markdown(comparison, applied, probes, matrix.root)
    report_path = Path(args.report).resolve() if args.report else update.report_path(matrix)
    write_text_atomic(report_path, text)
    console.print(text, highlight=False, markup=False)
    console.print(f"report: {report_path}", highlight=False)
    return 0


def cmd_compat_table(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.builder.records.parse import RecordRules
    from buildmatrix.builder.records.store import ResultStore
    from buildmatrix.publish.docs import DocsLayout, docs_problems, read_docs_table
    from buildmatrix.publish.ledger import reason_problem
    from buildmatrix.publish.site import publish
    from buildmatrix.publish.staging import Withdrawal

    matrix = load_matrix(Path(args.matrix).resolve())
    workspace = Workspace.for_root(matrix.root)
    withdrawals = [Withdrawal(w, args.reason or "") for w in args.yank or ()]
    withdrawals += [Withdrawal(w, args.reason or "", remove=True) for w in args.remove or ()]
    if withdrawals and (problem := reason_problem(args.reason or "")):
        raise UserError(f"--reason {problem} (nothing was written)")
    if args.check:
        if withdrawals or args.new_ledger or args.first_publish:
            raise UserError("--check writes nothing: it takes no --yank, --remove, --new-ledger or --first-publish")
        problems = docs_problems(read_docs_table(matrix.root, DocsLayout.of(matrix)), matrix)
    else:
        registry = Registry(workspace.cache_dir / "registry", offline=args.offline)
        available = published_pythons(matrix, registry)
        results = ResultStore(workspace.results_dir, RecordRules.of(matrix)).all()
        # Under the publish lock: the live site's ledger and table, this run's records over them and the committed
        # table; the site is built and checked beside the live one, and nothing (site or docs) changes unless every
        # check passes.
        _table, report = publish(
            matrix,
            expand(matrix, available),
            results,
            available,
            wheels_dir=workspace.wheels_dir,
            site=workspace.wheels_dir / "site",
            site_url=args.site_url,
            docs_root=matrix.root,
            withdrawals=withdrawals,
            new_ledger=args.new_ledger,
            layout=DocsLayout.of(matrix),
            first_publish=args.first_publish,
        )
        for line in origins_lines(report.origins):
            console.print(line, highlight=False)
        for note in report.notes:
            console.print(f"note: {note}", highlight=False)
        problems = report.problems
        if report.published:
            for path in report.docs:
                console.print(f"wrote {path.relative_to(matrix.root)}", highlight=False)
            console.print(
                f"site: {report.site / 'index.html'} ({report.wheels} wheel(s), {len(report.pages)} index page(s))",
                highlight=False,
            )
        else:
            console.print(
                f"not published: the live site {report.site} and the docs are unchanged; {len(problems)} problem(s):",
                highlight=False,
            )
    for problem in problems:
        console.print(Text.assemble(("FAIL ", "red"), problem))
    return EXIT_CELLS_FAILED if problems else 0


def origins_lines(origins: dict[str, str] | Mapping[str, str], shown: int = 12) -> list[str]:
    """Where each cell's result came from, one line per source: its cells when few, else how many."""
    by_source: dict[str, list[str]] = {}
    for cell_id, origin in origins.items():
        by_source.setdefault(origin or "not built", []).append(cell_id)
    lines = []
    for source in sorted(by_source, key=lambda s: (s != "records", s == "not built", s)):
        ids = sorted(by_source[source])
        name = "this run's records (wheels/results)" if source == "records" else source
        listed = ": " + ", ".join(ids) if len(ids) <= shown else ""
        lines.append(f"{len(ids)} cell(s) from {name}{listed}")
    return lines


def cmd_fetch_site(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.publish.docs import DocsLayout, read_docs_table
    from buildmatrix.publish.fetch import fetch_site

    matrix = load_matrix(Path(args.matrix).resolve())
    workspace = Workspace.for_root(matrix.root)
    layout = DocsLayout.of(matrix)
    committed = read_docs_table(matrix.root, layout) if (matrix.root / layout.table).is_file() else None
    if committed is not None and committed.plugin != matrix.plugin.distribution:
        committed = None  # another project's docs (a template's, a copy's) say nothing about this site
    report = fetch_site(
        args.site_url,
        workspace.wheels_dir / "site",
        committed=committed,
        new_ledger=args.new_ledger,
        first_publish=args.first_publish,
    )
    for note in report.notes:
        console.print(note, highlight=False)
    if report.version is not None:
        console.print(
            f"fetched {report.url}: released.json ({report.ledger_entries} wheel(s) released), {report.wheels} "
            f"wheel(s) served and {report.logs} log(s), into {workspace.wheels_dir / 'site'} -> {report.version.name}",
            highlight=False,
        )
    return 0


def cmd_engine(args: argparse.Namespace, console: Console) -> int:
    from buildmatrix.docker.engine import ensure_engine

    report = ensure_engine(Path(args.log).resolve(), install=not args.no_install)
    for action in report.actions:
        console.print(action, highlight=False, markup=False)
    return 0


def cmd_schema(args: argparse.Namespace, console: Console) -> int:
    """matrix.schema.json and the reference pages generated from the code: options (from the declared options
    table), the command line (from this module's parser) and the exit codes (from the error hierarchy)."""
    from buildmatrix.clireference import cli_markdown, exit_codes_markdown
    from buildmatrix.model.reference import reference_markdown
    from buildmatrix.model.schema import schema_json

    generators: list[tuple[str | None, Callable[[], str]]] = [
        (args.schema, schema_json),
        (args.reference, reference_markdown),
        (args.cli, lambda: cli_markdown(build_parser())),
        (args.exit_codes, exit_codes_markdown),
    ]
    outputs = [(Path(p), make()) for p, make in generators if p]
    if not outputs:
        print(schema_json(), end="")
        return 0
    stale = [path for path, text in outputs if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            console.print(f"{path} is not what `buildmatrix schema` generates; regenerate it", highlight=False)
        return EXIT_CELLS_FAILED if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, dict(outputs)[path])
        console.print(f"wrote {path}", highlight=False)
    return 0


def add_build_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = sub.add_parser("build", help="build and smoke-test the selected cells")
    add_common(build)
    build.add_argument(
        "--jobs",
        "-j",
        type=at_least(1),
        default=1,
        help="builds and cells run at once, each build compiling on its share of the cores (default: %(default)s)",
    )
    build.add_argument("--fail-fast", action="store_true", help="start no new cell after a failure")
    build.add_argument(
        "--force", action="store_true", help="rebuild cells whose inputs are unchanged, and the caches they use"
    )
    build.add_argument(
        "--retries",
        type=at_least(0),
        default=1,
        metavar="N",
        help="retry a transient failure (network, timeout, signal, full disk) N more times (default: %(default)s)",
    )
    build.add_argument("--runner", choices=[r.value for r in RunnerName], help="default: matrix.yaml's runner")
    made = build.add_mutually_exclusive_group()
    made.add_argument(
        "--builds-only", action="store_true", help="make the selected cells' builds, test no cell (a CI build job)"
    )
    made.add_argument(
        "--prebuilt",
        action="store_true",
        help="test the cells with the builds already in wheels/ (a CI cell job), never build; a missing build fails",
    )
    build.set_defaults(func=cmd_build)


def add_schema_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schema = sub.add_parser(
        "schema",
        help="matrix.schema.json and the reference pages generated from the code (default: schema to stdout)",
    )
    schema.add_argument("--schema", metavar="FILE", help="write the JSON Schema here (e.g. matrix.schema.json)")
    schema.add_argument("--reference", metavar="FILE", help="write the options reference page (Markdown) here")
    schema.add_argument("--cli", metavar="FILE", help="write the command-line reference page here, from the parser")
    schema.add_argument("--exit-codes", metavar="FILE", help="write the exit codes page here, from the error classes")
    schema.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    schema.set_defaults(func=cmd_schema)


def cmd_init(args: argparse.Namespace, console: Console) -> int:
    """The starter files of a project: matrix.yaml, noxfile.py and the GitHub workflow (never over existing files)."""
    from buildmatrix.starter import project_facts, starter_files, write_starter

    root = Path(args.dir)
    if not root.is_dir():
        raise UserError(f"{root} is not a directory (init writes into an existing project)")
    facts = project_facts(
        root,
        distribution=args.distribution,
        version=args.version,
        source=args.source,
        tests=args.tests,
        requirement=args.requirement,
    )
    for path in write_starter(root, starter_files(root, facts), facts):
        console.print(f"wrote {path}", highlight=False)
    console.print(
        f"next, in {root}: `buildmatrix matrix` lists the cells, `buildmatrix build --torch 2.13 --jobs 1` builds one",
        highlight=False,
    )
    return 0


def add_init_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser("init", help="write a starter matrix.yaml, noxfile.py and GitHub workflow into a project")
    init.add_argument("--dir", default=".", help="the project's root (default: here)")
    init.add_argument("--distribution", help="the wheels' name (default: pyproject.toml's, else the directory's)")
    init.add_argument("--version", help="plugin.version (default: pyproject.toml's, else 0.1.0)")
    init.add_argument("--source", help="the source tree, relative to the root (default: . , the project itself)")
    init.add_argument("--tests", help="the smoke tests, inside the source (default: tests/ or test/)")
    init.add_argument("--requirement", default="buildmatrix[docker]", help="how noxfile.py installs buildmatrix")
    init.set_defaults(func=cmd_init)


def add_outdated_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    outdated = sub.add_parser(
        "outdated",
        help="compare matrix.yaml with the torch registry: new minors, patch releases, Pythons, yanked releases",
    )
    outdated.add_argument("--matrix", default="matrix.yaml")
    outdated.add_argument("--offline", action="store_true", help="use the cached registry answers only")
    outdated.add_argument(
        "--index-url", default=DEFAULT_INDEX, help="PEP 691 simple index to read torch from (default: %(default)s)"
    )
    outdated.add_argument(
        "--apply",
        action="store_true",
        help="edit matrix.yaml (comments kept): new releases as coverage cells, patch moves; then probe each",
    )
    outdated.add_argument("--no-probe", action="store_true", help="with --apply: edit only, do not run the drift probe")
    outdated.add_argument(
        "--variant",
        action="append",
        metavar="NAME",
        help="new minors of these variants only (default: any; the registry's build first)",
    )
    outdated.add_argument(
        "--runner", choices=[r.value for r in RunnerName], help="runner for the probe (default: local)"
    )
    outdated.add_argument("--report", metavar="FILE", help="Markdown report (default: build/outdated/report.md)")
    outdated.set_defaults(func=cmd_outdated)


def add_compat_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compat = sub.add_parser(
        "compat-table", help="compatibility table (docs, README), static site and wheel index under wheels/site/"
    )
    compat.add_argument("--matrix", default="matrix.yaml")
    compat.add_argument("--offline", action="store_true", help="use the cached registry answers only")
    compat.add_argument(
        "--site-url",
        help="URL the site is served at, for the commands in the docs (default: the committed "
        "docs/compatibility.json's, else <site>)",
    )
    compat.add_argument("--check", action="store_true", help="write nothing; fail if the committed docs are stale")
    compat.add_argument(
        "--yank",
        action="append",
        metavar="WHEEL",
        help="withdraw a released wheel (its filename or site path) as PEP 592 yanked: still served, marked, with "
        "--reason; recorded in released.json for good (repeatable)",
    )
    compat.add_argument(
        "--remove",
        action="append",
        metavar="WHEEL",
        help="withdraw a released wheel from the index; released.json keeps when and why (--reason), and its "
        "filename never serves other bytes (repeatable)",
    )
    compat.add_argument("--reason", help="why --yank or --remove withdraws the wheels (required with them)")
    compat.add_argument(
        "--new-ledger",
        action="store_true",
        help="the live site has published but lost its released.json: start a new ledger from the wheels it serves",
    )
    compat.add_argument(
        "--first-publish",
        action="store_true",
        help="this is the project's first publish: start a release history although there is no local site while "
        "the committed docs name a site or list passed cells (else: fetch-site first)",
    )
    compat.set_defaults(func=cmd_compat_table)


def add_fetch_site_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fetch = sub.add_parser(
        "fetch-site",
        help="copy the live site's release history (released.json, compatibility.json, every released wheel and the "
        "logs) into wheels/site, the base compat-table publishes on",
    )
    fetch.add_argument("--matrix", default="matrix.yaml")
    fetch.add_argument("--site-url", required=True, help="where the site is served, e.g. https://owner.github.io/repo")
    fetch.add_argument(
        "--new-ledger",
        action="store_true",
        help="the site has published but serves no released.json: start a ledger from the wheels its table lists",
    )
    fetch.add_argument(
        "--first-publish",
        action="store_true",
        help="the project's first publish: a site URL that answers 404 for everything starts an empty release "
        "history (else it is 'not found')",
    )
    fetch.set_defaults(func=cmd_fetch_site)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="buildmatrix",
        description="Build and test a PyTorch extension or backend across a torch x Python (x SDK) matrix.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    matrix = sub.add_parser("matrix", help="show the expanded cells")
    add_common(matrix)
    fmt = matrix.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="cells as JSON")
    fmt.add_argument("--github", action="store_true", help="a GitHub Actions strategy.matrix object")
    matrix.add_argument(
        "--runner",
        choices=[r.value for r in RunnerName],
        help="show which runner would build each cell this way (default: matrix.yaml's runner)",
    )
    matrix.set_defaults(func=cmd_matrix)

    add_build_parser(sub)

    patches = sub.add_parser("patches", help="check, edit and refresh the per-release shim series")
    patches.add_argument("action", choices=("check", "edit", "refresh"))
    patches.add_argument("release", nargs="?", help="torch minor for edit/refresh, e.g. 2.4")
    patches.add_argument("--matrix", default="matrix.yaml")
    patches.set_defaults(func=cmd_patches)

    probe = sub.add_parser(
        "probe", help="build and smoke-test against a torch release not in matrix.yaml; report the breaks by interface"
    )
    probe.add_argument("release", help="e.g. 2.16 (newest 2.16.x on the registry) or 2.14.1")
    probe.add_argument("--matrix", default="matrix.yaml")
    probe.add_argument("--offline", action="store_true", help="use the cached registry answers only")
    probe.add_argument(
        "--python",
        metavar="X.Y",
        help="default: the newest Python the release publishes (within matrix.yaml's) that this machine can build",
    )
    probe.add_argument("--sdk", metavar="V", help="SDK version (default: the newest in matrix.yaml)")
    probe.add_argument(
        "--series", action="append", metavar="NAME", help="apply this shim series first (repeatable, in order)"
    )
    probe.add_argument("--runner", choices=[r.value for r in RunnerName], help="default: local")
    probe.set_defaults(func=cmd_probe)

    add_outdated_parser(sub)

    merge = sub.add_parser(
        "merge-results", help="merge wheels/ trees built on several machines: records, wheels and logs, checked"
    )
    merge.add_argument("sources", nargs="+", help="wheels/ trees made by `build` (each with results/cells/*.json)")
    merge.add_argument("--into", default="wheels", help="destination wheels/ tree (default: %(default)s)")
    merge.add_argument(
        "--matrix",
        default="matrix.yaml",
        help="the project's matrix.yaml, when there is one: records must name its distributions (default: %(default)s)",
    )
    merge.set_defaults(func=cmd_merge_results)

    add_compat_parser(sub)
    add_fetch_site_parser(sub)

    add_schema_parser(sub)
    add_init_parser(sub)

    engine = sub.add_parser(
        "engine",
        help="make a Docker engine answer: apt-get install docker.io and debootstrap if missing, start dockerd (root)",
    )
    engine.add_argument(
        "--log", default="build/dockerd.log", help="dockerd's log when started here (default: %(default)s)"
    )
    engine.add_argument("--no-install", action="store_true", help="never run apt-get; say what is missing")
    engine.set_defaults(func=cmd_engine)
    return parser


# The cyclic garbage collector's first threshold while a command runs (CPython's default is 700 allocations). A command
# builds tens of thousands of long-lived objects (records, tables, ledger entries: 10 000 cells make ~1 million) and
# almost no cycles; at the default, collections that find nothing took 15 % of compat-table's CPU at 10 000 cells.
GC_THRESHOLD = 100_000


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """GC_THRESHOLD while the command runs, the caller's thresholds again after (main may run inside a test)."""
    before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def main(argv: Sequence[str] | None = None) -> int:
    with _fewer_collections():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    # Logs and CI output are not terminals: keep lines whole rather than wrapped at 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 200)
    try:
        code: int = args.func(args, console)
        return code
    except UserError as exc:
        errors = Console(stderr=True, width=None if sys.stderr.isatty() else 200)  # paths in errors stay whole
        errors.print(Text.assemble(("error: ", "bold red"), str(exc)), highlight=False, soft_wrap=True)
        return exc.exit_code
    except OSError as exc:
        errors = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
        if is_resource_error(exc):
            # A full disk or a read-only directory outside the engine's own checks (the site, the docs): one line.
            errors.print(Text.assemble(("error: ", "bold red"), resource_message(exc)), highlight=False, soft_wrap=True)
            return ResourceError.exit_code
        if exc.filename is None:
            raise
        # A path the user named (--report, --into, ...) that does not exist or is not what it must be.
        logging.getLogger(__name__).debug("%s", exc, exc_info=True)
        where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
        errors.print(Text.assemble(("error: ", "bold red"), f"{where}: {exc.strerror or exc}"), highlight=False)
        return UserError.exit_code
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted; finished cells are recorded, the next run resumes")
        return 130


if __name__ == "__main__":
    sys.exit(main())
