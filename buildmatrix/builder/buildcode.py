"""Which of this package's files are a cell's build code: the engine's and its runner's modules, with all they import.

The build code is a cell input (editing it may change a wheel or a smoke verdict), and nothing else of the package
is: the CLI, reporting, publishing and patch tools can change without rebuilding a cell. Derived from the imports
themselves (at any depth of a module, function-level ones included, and every package __init__ on the way), so a
module counts as soon as build code imports it, and the hash never leaves out code that runs during a build.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import buildmatrix

PACKAGE = "buildmatrix"
PACKAGE_DIR = Path(buildmatrix.__file__).parent
ENGINE_MODULES = ("buildmatrix.builder.engine",)  # what runs a cell whatever the runner


def module_file(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of a module of the package (buildmatrix.builder.engine -> builder/engine.py), None if it is none."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    rel = name.removeprefix(PACKAGE).lstrip(".").replace(".", "/")
    for candidate in (package_dir / f"{rel}.py", package_dir / rel / "__init__.py"):
        if rel and candidate.is_file():
            return candidate
    return package_dir / "__init__.py" if not rel else None


def imported_modules(path: Path) -> set[str]:
    """Every module of the package that a file imports, wherever the import statement is."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # submodules imported by name
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}


def build_code(roots: Iterable[str], package_dir: Path = PACKAGE_DIR) -> frozenset[str]:
    """Files (relative POSIX paths) that importing the modules `roots` runs: them, what they import, transitively,
    and the __init__ of every package on the way."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            module = ".".join(parts[:depth])
            path = module_file(module, package_dir)
            if path is None:
                continue  # a name imported from a module (a function, a class), not a module itself
            rel = path.relative_to(package_dir).as_posix()
            if rel not in seen:
                seen.add(rel)
                todo.extend(imported_modules(path))
    return frozenset(seen)
