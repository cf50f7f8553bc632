"""The commands on torch releases: `patches` (the per-release shim series), `probe` (a release not in matrix.yaml),
`outdated` (matrix.yaml against the registry, --apply edits it and probes). Each parses, calls the library and
renders."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.text import Text

from torch_buildmatrix.cli.flags import add_index_url, add_matrix, add_offline, add_runner
from torch_buildmatrix.errors import EXIT_CELLS_FAILED
from torch_buildmatrix.vocab import Status


def cmd_patches(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.builder.patchtool import PatchAction, PatchesOptions, patches

    outcome = patches(PatchesOptions(Path(args.matrix), PatchAction(args.action), args.release))
    matrix = outcome.matrix
    if outcome.check is not None:
        report = outcome.check
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
    if outcome.tree is not None:
        console.print(
            f"edit the plugin for torch {args.release} in {outcome.tree / matrix.plugin.source.name}, "
            f"then run `torch-buildmatrix patches refresh {args.release}`"
        )
        return 0
    assert outcome.refresh is not None
    for path in outcome.refresh.files:
        console.print(f"wrote {path.relative_to(matrix.root)}", highlight=False)
    if outcome.refresh.missing_from_matrix:
        console.print(
            f"now add '{args.release}' as the last entry of the patches of torch {args.release} in {matrix.path.name}"
        )
    return 0


def cmd_probe(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.builder.probe import ProbeOptions, ProbePlan, probe
    from torch_buildmatrix.util.signals import exit_code_of

    options = ProbeOptions(
        args.release,
        Path(args.matrix),
        offline=args.offline,
        network_deadline=args.network_deadline,
        index_url=args.index_url,
        python=args.python,
        sdk=args.sdk,
        series=tuple(args.series or ()),
        runner=args.runner,
    )

    def planned(plan: ProbePlan) -> None:
        release = plan.release
        console.print(
            f"probing torch {release.version} as cell {plan.cell.id} ({plan.why})"
            + (f" with series {', '.join(release.patches)}" if release.patches else "")
        )

    outcome = probe(options, planned, lambda cell_id, what: console.print(f"  {cell_id}: {what}", highlight=False))
    if outcome.stopped_by is not None:
        console.print(f"stopped by {outcome.stopped_by}")
        return exit_code_of(outcome.stopped_by)
    report = outcome.report
    assert report is not None  # a probe not stopped has its report
    console.print(report.markdown(), highlight=False, markup=False)
    console.print(f"report: {outcome.report_path}")
    return 0 if report.status == Status.PASSED else EXIT_CELLS_FAILED


def cmd_outdated(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.builder.update import OutdatedOptions, outdated

    options = OutdatedOptions(
        Path(args.matrix),
        offline=args.offline,
        network_deadline=args.network_deadline,
        index_url=args.index_url,
        apply=args.apply,
        probe=not args.no_probe,
        variants=frozenset(args.variant) if args.variant else None,
        runner=args.runner,
        report=Path(args.report) if args.report else None,
    )
    report = outdated(options, lambda line: console.print(line, highlight=False))
    console.print(report.text, highlight=False, markup=False)
    console.print(f"report: {report.path}", highlight=False)
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    patches = sub.add_parser("patches", help="check, edit and refresh the per-release shim series")
    patches.add_argument("action", choices=("check", "edit", "refresh"))  # patchtool.PatchAction
    patches.add_argument("release", nargs="?", help="torch minor for edit/refresh, e.g. 2.4")
    add_matrix(patches)
    patches.set_defaults(func=cmd_patches)

    probe = sub.add_parser(
        "probe", help="build and smoke-test against a torch release not in matrix.yaml; report the breaks by interface"
    )
    probe.add_argument("release", help="e.g. 2.16 (newest 2.16.x on the registry) or 2.14.1")
    add_matrix(probe)
    add_offline(probe)
    add_index_url(probe)
    probe.add_argument(
        "--python",
        metavar="X.Y",
        help="default: the newest Python the release publishes (within matrix.yaml's) that this machine can build",
    )
    probe.add_argument("--sdk", metavar="V", help="SDK version (default: the newest in matrix.yaml)")
    probe.add_argument(
        "--series", action="append", metavar="NAME", help="apply this shim series first (repeatable, in order)"
    )
    add_runner(probe, "local")
    probe.set_defaults(func=cmd_probe)

    add_outdated_parser(sub)


def add_outdated_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    outdated = sub.add_parser(
        "outdated",
        help="compare matrix.yaml with the torch registry: new minors, patch releases, Pythons, yanked releases",
    )
    add_matrix(outdated)
    add_offline(outdated)
    add_index_url(outdated)
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
    add_runner(outdated, "local")
    outdated.add_argument("--report", metavar="FILE", help="Markdown report (default: build/outdated/report.md)")
    outdated.set_defaults(func=cmd_outdated)
