"""The commands that publish: `compat-table` (the docs, the static site and the wheel index, checked before they go
live) and `fetch-site` (the live site's release history, the base a publish starts from). Each parses, calls the
library and renders."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.text import Text

from torch_buildmatrix.cli.flags import add_matrix, add_network_deadline, add_offline
from torch_buildmatrix.cli.render import origins_lines
from torch_buildmatrix.errors import EXIT_CELLS_FAILED


def cmd_compat_table(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.publish.compat import CompatOptions, compat_table

    options = CompatOptions(
        Path(args.matrix),
        offline=args.offline,
        network_deadline=args.network_deadline,
        site_url=args.site_url,
        check=args.check,
        yank=tuple(args.yank or ()),
        remove=tuple(args.remove or ()),
        reason=args.reason or "",
        new_ledger=args.new_ledger,
        first_publish=args.first_publish,
    )
    outcome = compat_table(options)
    report, problems = outcome.report, outcome.problems
    if report is not None:
        for line in origins_lines(report.origins):
            console.print(line, highlight=False)
        for note in report.notes:
            console.print(f"note: {note}", highlight=False)
        if report.published:
            for path in report.docs:
                console.print(f"wrote {path.relative_to(outcome.matrix.root)}", highlight=False)
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


def cmd_fetch_site(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.publish.compat import FetchOptions, fetch

    options = FetchOptions(
        args.site_url,
        Path(args.matrix),
        new_ledger=args.new_ledger,
        first_publish=args.first_publish,
        network_deadline=args.network_deadline,
    )
    report, site = fetch(options)
    for note in report.notes:
        console.print(note, highlight=False)
    if report.version is not None:
        console.print(
            f"fetched {report.url}: released.json ({report.ledger_entries} wheel(s) released), {report.wheels} "
            f"wheel(s) served and {report.logs} log(s), into {site} -> {report.version.name}",
            highlight=False,
        )
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_compat_parser(sub)
    add_fetch_site_parser(sub)


def add_compat_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compat = sub.add_parser(
        "compat-table", help="compatibility table (docs, README), static site and wheel index under wheels/site/"
    )
    add_matrix(compat)
    add_offline(compat)
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
    from torch_buildmatrix.publish.fetch import TOTAL_DEADLINE

    add_matrix(fetch)
    add_network_deadline(fetch, TOTAL_DEADLINE)
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
