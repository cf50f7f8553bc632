"""Which of this package's files are a cell's build code (the engine's and its runner's modules, with all they
import), and the hash of their code.

Editing build code may change a wheel or a smoke verdict; nothing else of the package can: the CLI, reporting,
publishing and patch tools. Derived from the imports themselves (at any depth of a module, function-level ones
included, and every package __init__ on the way), so a module counts as soon as build code imports it, and the hash
never leaves out code that runs during a build. Keys do not hold the hash (they hold the build epoch, epoch.py): the
lint check compares it with the one confirmed for the epoch, and records carry it.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

import torch_buildmatrix

PACKAGE = "torch_buildmatrix"
PACKAGE_DIR = Path(torch_buildmatrix.__file__).parent
ENGINE_MODULES = ("torch_buildmatrix.builder.engine",)  # what runs a cell whatever the runner


def module_file(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of a module of the package (torch_buildmatrix.builder.engine -> builder/engine.py), None if it is
    none."""
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


def code_hash(files: Iterable[str], package_dir: Path = PACKAGE_DIR) -> str:
    """Hash of the files' code (relative POSIX paths under package_dir), not of their text: each file's syntax tree
    without docstrings, so a `ruff format`, a comment or a docstring leaves it as it was. The tree is written out by
    code_text, which Python 3.11 to 3.13 write alike."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        tree = ast.parse((package_dir / rel).read_text(encoding="utf-8"), rel)
        digest.update(rel.encode() + b"\0" + hashlib.sha256(code_text(_without_docstrings(tree)).encode()).digest())
    return digest.hexdigest()


def code_text(node: object) -> str:
    """A syntax tree as text, without positions and without the fields left empty: ast.dump writes those differently
    from one Python to the next (3.12 added `type_params`, 3.13 leaves empty fields out)."""
    if isinstance(node, ast.AST):
        fields = ",".join(f"{k}={code_text(v)}" for k, v in ast.iter_fields(node) if v is not None and v != [])
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ",".join(code_text(item) for item in node) + "]"
    return repr(node)


DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)  # what can have a docstring


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, DOCUMENTED) and node.body and _is_docstring(node.body[0]):
            node.body = node.body[1:]
    return tree


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )
