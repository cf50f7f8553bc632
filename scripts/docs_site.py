#!/usr/bin/env python3
"""Build the documentation site with `mkdocs build --strict` and, only when the build passes, put it in place and
serve it on 127.0.0.1. `nox -s docs` runs this.

    python3 scripts/docs_site.py                      # build into build/docs-site, serve on http://127.0.0.1:8000/
    python3 scripts/docs_site.py --build-only         # build and place only (CI, the publish job)
    python3 scripts/docs_site.py --build-only --site-dir wheels/site/docs
    python3 scripts/docs_site.py --write-sessions     # regenerate docs/reference/nox-sessions.md from noxfile.py

Before MkDocs runs, the pages generated from the code (options, command line, exit codes: `torch-buildmatrix schema`;
the nox sessions: this script, from noxfile.py) are checked against what their generators make now: a stale reference
fails the build like a broken link.

MkDocs writes every page before it counts the warnings that fail a strict build, so it builds into a staging
directory beside the destination: a failed build removes the staging copy and leaves the destination (an older good
build, or nothing) as it was, and nothing is served. A passing build replaces the destination whole.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSIONS_PAGE = "reference/nox-sessions.md"


GENERATED = {  # `torch-buildmatrix schema` option -> page, relative to the docs directory
    "--reference": "reference/matrix-options.md",
    "--cli": "reference/command-line.md",
    "--exit-codes": "reference/exit-codes.md",
}


def _session_name(function: ast.FunctionDef) -> str | None:
    for decorator in function.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call else decorator
        if isinstance(target, ast.Attribute) and target.attr == "session":
            for keyword in call.keywords if call else []:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
            return function.name
    return None


def sessions_markdown(noxfile: Path) -> str:
    """The nox sessions page: every session of noxfile.py, in its order, with its docstring."""
    lines = [
        "# nox sessions",
        "",
        "<!-- generated from noxfile.py by `python3 scripts/docs_site.py --write-sessions`; do not edit -->",
        "",
        "Each session installs what it needs into an environment of its own; most call the "
        "[command line](command-line.md) and pass it the arguments after `--`, e.g. "
        "`nox -s build-matrix -- --torch 2.13`. `nox` alone runs the default sessions (lint and the fast tests).",
        "",
        "| session | what it does |",
        "|---|---|",
    ]
    for node in ast.parse(noxfile.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and (name := _session_name(node)) is not None:
            doc = " ".join((ast.get_docstring(node) or "").split()).replace("|", "\\|")
            lines.append(f"| `nox -s {name}` | {doc} |")
    return "\n".join(lines) + "\n"


def stale_references(docs: Path) -> subprocess.CompletedProcess[str]:
    """`torch-buildmatrix schema --check` over the generated pages of `docs`, and the sessions page against noxfile.py:
    exit status 1 when one differs."""
    pages = [arg for option, page in GENERATED.items() for arg in (option, str(docs / page))]
    checked = subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "schema", *pages, "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    sessions = docs / SESSIONS_PAGE
    if not sessions.is_file() or sessions.read_text(encoding="utf-8") != sessions_markdown(ROOT / "noxfile.py"):
        message = (
            f"{sessions} is not what noxfile.py's sessions give; run python3 scripts/docs_site.py --write-sessions"
        )
        return subprocess.CompletedProcess(checked.args, 1, checked.stdout + message + "\n", checked.stderr)
    return checked


def build(config: Path, destination: Path) -> subprocess.CompletedProcess[str]:
    """Build strictly into a staging directory; on success it replaces `destination`, else nothing changes."""
    checked = stale_references(config.resolve().parent / "docs")
    if checked.returncode != 0:
        return subprocess.CompletedProcess(checked.args, 1, checked.stdout, checked.stdout + checked.stderr)
    destination = destination.resolve()
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner is not a build problem
    try:
        command = ["mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(staging)]
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            return result
        old = destination.with_name(f".{destination.name}.old")
        if destination.exists():
            destination.rename(old)  # kept until the new build is in place
        staging.rename(destination)
        shutil.rmtree(old, ignore_errors=True)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def serve(directory: Path, port: int) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving {directory} on http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the docs site strictly, then serve it on 127.0.0.1.")
    parser.add_argument("--config", type=Path, default=ROOT / "mkdocs.yml", help="default: the project's mkdocs.yml")
    parser.add_argument("--site-dir", type=Path, default=ROOT / "build" / "docs-site", help="where the site goes")
    parser.add_argument("--build-only", action="store_true", help="build and place the site; do not serve it")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default: 8000; 0: any free one)")
    parser.add_argument("--write-sessions", action="store_true", help="regenerate the nox sessions page and stop")
    args = parser.parse_args(argv)
    if args.write_sessions:
        page = ROOT / "docs" / SESSIONS_PAGE
        page.write_text(sessions_markdown(ROOT / "noxfile.py"), encoding="utf-8")
        print(f"wrote {page.relative_to(ROOT)}")
        return 0
    result = build(args.config, args.site_dir)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        print(f"the docs build failed; {args.site_dir} is unchanged and nothing is served", file=sys.stderr)
        return 1
    print(f"built {args.site_dir}", flush=True)
    if not args.build_only:
        serve(args.site_dir, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
