"""The command line: the parser, built from each group of commands' declarations, and main, the only place that turns
errors into exit codes. `python -m torch_buildmatrix --help`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from torch_buildmatrix import __version__
from torch_buildmatrix.cli import cells, project, publishing, releases, render
from torch_buildmatrix.errors import EXIT_CELLS_FAILED, ResourceError, UserError
from torch_buildmatrix.util.failures import is_resource_error, resource_message
from torch_buildmatrix.util.gcthreshold import fewer_collections


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torch-buildmatrix",
        description="Build and test a PyTorch extension or backend across a torch x Python (x SDK) matrix.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cells.add_parsers(sub)
    releases.add_parsers(sub)
    cells.add_merge_parser(sub)
    publishing.add_parsers(sub)
    add_schema_parser(sub)
    project.add_parsers(sub)
    return parser


def cmd_schema(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.clireference import SchemaOptions, generate

    def file(value: str | None) -> Path | None:
        return Path(value) if value else None

    options = SchemaOptions(
        file(args.schema), file(args.reference), file(args.cli), file(args.exit_codes), check=args.check
    )
    outcome = generate(options, build_parser)
    if outcome.printed is not None:
        print(outcome.printed, end="")
        return 0
    if args.check:
        for path in outcome.stale:
            console.print(f"{path} is not what `torch-buildmatrix schema` generates; regenerate it", highlight=False)
        return EXIT_CELLS_FAILED if outcome.stale else 0
    for path in outcome.written:
        console.print(f"wrote {path}", highlight=False)
    return 0


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


def main(argv: Sequence[str] | None = None) -> int:
    with fewer_collections():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    console = render.console()
    try:
        code: int = args.func(args, console)
        return code
    except UserError as exc:
        errors = render.errors()
        errors.print(Text.assemble(("error: ", "bold red"), str(exc)), highlight=False, soft_wrap=True)
        return exc.exit_code
    except OSError as exc:
        errors = render.errors()
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
