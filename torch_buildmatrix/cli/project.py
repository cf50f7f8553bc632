"""The commands on a project and its machine: `init` (a starter matrix.yaml, noxfile.py and workflow) and `engine`
(make a Docker engine answer). Each parses, calls the library and renders."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console


def cmd_init(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.starter import InitOptions, init_project

    root = Path(args.dir)
    options = InitOptions(root, args.distribution, args.version, args.source, args.tests, args.requirement)
    for path in init_project(options):
        console.print(f"wrote {path}", highlight=False)
    console.print(
        f"next, in {root}: `torch-buildmatrix matrix` lists the cells, `torch-buildmatrix build --torch 2.13 --jobs 1` "
        "builds one",
        highlight=False,
    )
    return 0


def cmd_engine(args: argparse.Namespace, console: Console) -> int:
    from torch_buildmatrix.docker.engine import ensure_engine

    report = ensure_engine(Path(args.log).resolve(), install=not args.no_install)
    for action in report.actions:
        console.print(action, highlight=False, markup=False)
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def add_init_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser(
        "init",
        help="write a starter matrix.yaml, noxfile.py and GitHub workflow into a project, from what its "
        "pyproject.toml, setup.cfg, setup.py (read, never run) or PKG-INFO say",
    )
    init.add_argument("--dir", default=".", help="the project's root (default: here)")
    init.add_argument("--distribution", help="the wheels' name (default: the project's metadata, else the directory's)")
    init.add_argument("--version", help="plugin.version (default: the project's metadata, else 0.1.0)")
    init.add_argument("--source", help="the source tree, relative to the root (default: . , the project itself)")
    init.add_argument("--tests", help="the smoke tests, inside the source (default: tests/ or test/)")
    init.add_argument(
        "--requirement",
        help="how noxfile.py installs torch-buildmatrix (default: the git commit this one was installed from, else "
        "torch-buildmatrix[docker]==THIS_VERSION, as a wheel only)",
    )
    init.set_defaults(func=cmd_init)
