"""The commands on the cells: `matrix` (show them), `build` (build and smoke-test them), `merge-results` (merge the
wheels/ trees several machines built). Each parses, calls the library and renders."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from torch_buildmatrix.cli.flags import add_matrix, add_runner, add_selection, at_least, selection
from torch_buildmatrix.cli.render import say_failed, say_lines, say_not_built

if TYPE_CHECKING:
    from torch_buildmatrix.builder.steps import ProgressCallback
    from torch_buildmatrix.model.builds import Build
    from torch_buildmatrix.model.cells import Cell


def cmd_matrix(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix import report_matrix
    from torch_buildmatrix.builder.selection import MatrixOptions, list_matrix

    # --github: each build's and cell's runner as `build` would choose it on this machine (the plan job's: the
    # Pythons setup-python gave it); one no runner can make stops the plan, before any job starts.
    options = MatrixOptions(selection(args), args.runner, plan=args.github or not args.json, github=args.github)
    listing = list_matrix(options)
    cells, builds, sdk_name = listing.cells, listing.builds, listing.sdk_name
    if args.github:
        print(json.dumps(report_matrix.github_matrix(cells, builds, listing.runners())))
    elif args.json:
        print(json.dumps([c.as_dict() for c in cells], indent=2))
    else:
        reasons, build_reasons = listing.reasons(), listing.build_reasons()
        if len(cells) > report_matrix.RICH_ROWS:
            print(report_matrix.cells_text(cells, reasons, sdk_name))
        else:
            console.print(report_matrix.cells_table(cells, reasons, sdk_name))
        if len(builds) > report_matrix.RICH_ROWS:
            print(f"\nbuilds\n{report_matrix.builds_text(builds, build_reasons, sdk_name)}")
        else:
            console.print(report_matrix.builds_table(builds, build_reasons, sdk_name))
        console.print(f"{len(cells)} cell(s), {len(builds)} build(s)")
        for problem in listing.problems:
            console.print(Text.assemble(("cannot build: ", "red"), problem))
    return 0


def cmd_build(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix import report_matrix
    from torch_buildmatrix.builder.buildrun import BuildOptions, BuildPlan, BuildReports, RunPlan, build
    from torch_buildmatrix.builder.scheduler import RunOptions
    from torch_buildmatrix.progress import ProgressDisplay, summary_table

    run = RunOptions(
        jobs=args.jobs, fail_fast=args.fail_fast, force=args.force, retries=args.retries, prebuilt=args.prebuilt
    )
    options = BuildOptions(selection(args, refresh=args.force), run, args.runner, args.builds_only)

    def planned(plan: RunPlan) -> None:
        reasons = plan.reasons
        say_lines(console, report_matrix.runner_plan_lines(list(reasons), reasons))

    def chosen(plan: BuildPlan) -> None:
        say_lines(console, plan.chosen.engine_actions)
        made = "testing builds made elsewhere" if args.prebuilt else f"{len(plan.builds)} build(s)"
        console.print(f"[bold]{len(plan.cells)} cell(s)[/bold], {made}, {plan.chosen.why}, {args.jobs} job(s)")

    shown: list[ProgressDisplay] = []

    @contextmanager
    def display(cells: list[Cell], builds: list[Build]) -> Iterator[ProgressCallback]:
        with ProgressDisplay(console, cells, builds) as live:
            shown.append(live)
            yield live.update

    outcome = build(options, BuildReports(display, planned, chosen))
    workspace = outcome.workspace
    if not outcome.ran:
        say_not_built(console, outcome.not_built)
        console.print(f"results: {workspace.results_dir / 'summary.json'}")
        return outcome.exit_code
    if outcome.orphans_ended:
        console.print(f"ended {outcome.orphans_ended} process(es) left running by an earlier run that was killed")
    console.print(summary_table(outcome.results, outcome.builds, up_to_date=shown[0].up_to_date()))
    for cell_id, damage in outcome.damaged.items():
        console.print(Text.assemble((cell_id, "yellow"), f" rebuilt: its record was damaged ({damage})"))
    if outcome.other_code:
        shown_ids = ", ".join(outcome.other_code[:3]) + (", ..." if len(outcome.other_code) > 3 else "")
        console.print(
            f"{len(outcome.other_code)} record(s) kept by the build epoch ({shown_ids}) were made by other build "
            "code: the build code changed since these records; `--force` rebuilds"
        )
    say_failed(console, workspace, outcome.failed)
    say_not_built(console, outcome.not_built)
    console.print(f"results: {workspace.results_dir / 'summary.json'}")
    if outcome.stopped_by:
        console.print(f"stopped by {outcome.stopped_by}; finished cells are recorded, the next run resumes the others")
    return outcome.exit_code


def cmd_merge_results(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.builder.merge import merge_results

    into = Path(args.into)
    report = merge_results([Path(p) for p in args.sources], into, Path(args.matrix))
    console.print(
        f"merged {len(args.sources)} tree(s) into {into}: {len(report.cells)} cell record(s), "
        f"{report.wheels} wheel(s) checked against their records, {report.copied} file(s) copied",
        highlight=False,
    )
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    matrix = sub.add_parser("matrix", help="show the expanded cells")
    add_selection(matrix)
    fmt = matrix.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="cells as JSON")
    fmt.add_argument("--github", action="store_true", help="a GitHub Actions strategy.matrix object")
    add_runner(matrix, "matrix.yaml's runner")
    matrix.set_defaults(func=cmd_matrix)

    build = sub.add_parser("build", help="build and smoke-test the selected cells")
    add_selection(build)
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
    add_runner(build, "matrix.yaml's runner")
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


def add_merge_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = sub.add_parser(
        "merge-results",
        help="merge wheels/ trees built on several machines: records, wheels and logs, checked (with the project's "
        "matrix.yaml, when there is one, records must name its distributions)",
    )
    merge.add_argument("sources", nargs="+", help="wheels/ trees made by `build` (each with results/cells/*.json)")
    merge.add_argument("--into", default="wheels", help="destination wheels/ tree (default: %(default)s)")
    add_matrix(merge)
    merge.set_defaults(func=cmd_merge_results)
