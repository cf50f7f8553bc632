"""The stages of ARCHITECTURE.md import only downwards: the vocabulary and the errors know nothing else, util nothing of
the model, model and util nothing of building or publishing, the builder nothing of publishing, and only the CLI
layer talks to the terminal."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

# The checkout's sources, not the installed copy: nox installs the package without ARCHITECTURE.md beside it.
REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "torch_buildmatrix"
# A module under the key may not import any module under the values.
FORBIDDEN = {
    "model": (
        "torch_buildmatrix.builder",
        "torch_buildmatrix.publish",
        "torch_buildmatrix.docker",
        "torch_buildmatrix.cli",
    ),
    "util": (
        "torch_buildmatrix.model",
        "torch_buildmatrix.builder",
        "torch_buildmatrix.publish",
        "torch_buildmatrix.docker",
        "torch_buildmatrix.cli",
    ),
    "builder": ("torch_buildmatrix.publish", "torch_buildmatrix.cli", "torch_buildmatrix.progress"),
    "docker": ("torch_buildmatrix.publish", "torch_buildmatrix.cli", "torch_buildmatrix.progress"),
    "publish": ("torch_buildmatrix.cli", "torch_buildmatrix.progress"),
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("stage", sorted(FORBIDDEN))
def test_a_stage_never_imports_a_later_one(stage: str) -> None:
    files = sorted((PACKAGE / stage).rglob("*.py"))
    assert files
    for path in files:
        bad = {n for n in imports(path) if n.startswith(FORBIDDEN[stage])}
        assert not bad, f"{path.relative_to(PACKAGE)} ({stage}) imports {sorted(bad)}"


# The leaves: what the modules at the package root below every stage may import of the package.
LEAVES = {"vocab.py": set[str](), "errors.py": {"torch_buildmatrix.vocab"}, "schema1.py": set[str]()}


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_the_vocabulary_and_the_errors_import_only_below_them(leaf: str) -> None:
    ours = {n for n in imports(PACKAGE / leaf) if n == "torch_buildmatrix" or n.startswith("torch_buildmatrix.")}
    assert ours <= LEAVES[leaf], f"{leaf} imports {sorted(ours - LEAVES[leaf])}"


def module_graph() -> ModuleType:
    """scripts/module_graph.py, which prints the figures these tests hold the package to."""
    spec = importlib.util.spec_from_file_location("module_graph_under_test", REPO / "scripts" / "module_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_no_import_cycle_at_module_level_inside_functions_or_for_the_type_checker() -> None:
    graph = module_graph().read_graph(PACKAGE)
    assert len(graph.modules) > 50 and len(graph.edges) > 200  # it read the package
    cycles = graph.cycles()
    where = {(e.source, e.target): f"{e.source}:{e.line} ({e.where})" for e in graph.edges}
    assert not cycles, "import cycles:\n" + "\n".join(
        "  "
        + " <-> ".join(group)
        + ": "
        + ", ".join(v for (s, d), v in sorted(where.items()) if s in group and d in group)
        for group in cycles
    )


def test_the_cycle_check_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    """A cycle closed only by an import inside a function, or only under TYPE_CHECKING, is still a cycle."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text("def f():\n    from pkg import a\n\nB = 1\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.d import D\n")
    (package / "d.py").write_text("from pkg.c import *\nD = 1\n")
    graph = module_graph().read_graph(package)
    assert graph.cycles() == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    assert graph.cycles(frozenset({"module"})) == []


# Over the line limit and waiting for their split: this list may only shrink (issue 35), and is empty.
PENDING: frozenset[str] = frozenset()


def test_no_module_over_the_line_limit_but_the_options_table() -> None:
    graph_module = module_graph()
    graph = graph_module.read_graph(PACKAGE)
    over = {m: graph.lines(m) for m in graph.modules if graph.lines(m) > graph_module.LINE_LIMIT}
    allowed = graph_module.EXEMPT | PENDING
    assert {m: n for m, n in over.items() if m not in allowed} == {}, (
        f"over {graph_module.LINE_LIMIT} lines: split them by job (scripts/module_graph.py prints the sizes)"
    )


def test_every_module_named_in_architecture_md_exists() -> None:
    text = (REPO / "ARCHITECTURE.md").read_text()
    named = {token.strip("`") for token in text.split() if token.strip("`,.;:()").endswith(".py")}
    names = {n.strip("`,.;:()") for n in named}
    existing = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    for name in names:
        if name == "setup.py" or name.startswith(("tests/", "scripts/")):  # the repository's, not the package's
            continue
        assert any(e == name or e.endswith("/" + name) for e in existing), (
            f"ARCHITECTURE.md names {name}: no such module"
        )


def test_architecture_md_names_every_module() -> None:
    """Each module of the package is named in ARCHITECTURE.md, by a path that names it alone (`builder/engine.py`
    where `engine.py` would name two); the starter templates are data, not modules."""
    text = re.sub(r"```.*?```", "", (REPO / "ARCHITECTURE.md").read_text(), flags=re.DOTALL)
    modules = [
        p.relative_to(PACKAGE).as_posix()
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "__init__.py" and p.parent.name != "templates"
    ]
    named = set()
    for token in {t.strip(",.;:()").split(" ")[0] for t in re.findall(r"`([^`\n]+)`", text)}:
        found = [m for m in modules if m == token or m.endswith("/" + token)]
        if len(found) == 1:
            named.add(found[0])
    assert [m for m in modules if m not in named] == [], "ARCHITECTURE.md does not name these modules"
