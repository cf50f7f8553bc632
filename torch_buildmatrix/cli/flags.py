"""The flags several commands share, each declared once: which matrix, how to ask the registry, which cells, which
runner. A command adds the ones it takes; the command-line reference is generated from the parser they build."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from torch_buildmatrix.vocab import RunnerName

if TYPE_CHECKING:
    from torch_buildmatrix.builder.selection import SelectOptions


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


def add_matrix(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", default="matrix.yaml", help="path to matrix.yaml (default: %(default)s)")


def add_offline(parser: argparse.ArgumentParser) -> None:
    """--offline, and --network-deadline for the registry reads of a command that is not offline."""
    from torch_buildmatrix.util.http import NETWORK_DEADLINE

    parser.add_argument("--offline", action="store_true", help="use the cached registry answers only")
    add_network_deadline(parser, NETWORK_DEADLINE)


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0 (anything else is a usage error, exit code 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


def add_network_deadline(parser: argparse.ArgumentParser, default: float) -> None:
    """--network-deadline: the seconds all of the command's network reads may take in total (`default` its own)."""
    parser.add_argument(
        "--network-deadline",
        type=positive_seconds,
        default=default,
        metavar="SECONDS",
        help="seconds all network reads of the command may take in total, whatever the server does; past it the "
        "command stops with exit code 9 (a registry read uses its cached answer when there is one) "
        f"(default: {default:g})",
    )


def add_index_url(parser: argparse.ArgumentParser) -> None:
    """--index-url: the registry a command reads torch's releases from (`outdated`, and `probe` as outdated's does)."""
    from torch_buildmatrix.model.registry import DEFAULT_INDEX

    parser.add_argument(
        "--index-url", default=DEFAULT_INDEX, help="PEP 691 simple index to read torch from (default: %(default)s)"
    )


def add_runner(parser: argparse.ArgumentParser, default: str) -> None:
    """--runner; `default` says what runs without it (matrix.yaml's runner, or local for a probe)."""
    parser.add_argument(
        "--runner", choices=[r.value for r in RunnerName], help=f"which runner builds (default: {default})"
    )


def add_selection(parser: argparse.ArgumentParser) -> None:
    """--matrix, --offline and the cell selection (--torch, --python, --sdk, --variant, --build)."""
    add_matrix(parser)
    add_offline(parser)
    parser.add_argument("--torch", action="append", metavar="X.Y", help="only these torch minors (repeatable)")
    parser.add_argument("--python", action="append", metavar="X.Y", help="only these Pythons (repeatable)")
    parser.add_argument(
        "--sdk", action="append", metavar="V", help='only these SDK versions ("2" selects every 2.x; repeatable)'
    )
    parser.add_argument("--variant", action="append", metavar="NAME", help="only these torch variants (repeatable)")
    parser.add_argument(
        "--build", action="append", metavar="ID", help="only the cells of these builds, e.g. torch2.13-cpu-drv2"
    )


def selection(args: argparse.Namespace, refresh: bool = False) -> SelectOptions:
    """The typed selection of add_selection's flags."""
    from torch_buildmatrix.builder.selection import SelectOptions

    return SelectOptions(
        Path(args.matrix),
        offline=args.offline,
        network_deadline=args.network_deadline,
        refresh=refresh,
        torch=tuple(args.torch or ()),
        python=tuple(args.python or ()),
        sdk=tuple(args.sdk or ()),
        variant=tuple(args.variant or ()),
        builds=tuple(args.build or ()),
    )
