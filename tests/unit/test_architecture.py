"""The stages of ARCHITECTURE.md import only downwards: the vocabulary and the errors know nothing else, util nothing of
the model, model and util nothing of building or publishing, the builder nothing of publishing, and only the CLI
layer talks to the terminal."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# The checkout's sources, not the installed copy: nox installs the package without ARCHITECTURE.md beside it.
REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "buildmatrix"
# A module under the key may not import any module under the values.
FORBIDDEN = {
    "model": ("buildmatrix.builder", "buildmatrix.publish", "buildmatrix.docker", "buildmatrix.cli"),
    "util": (
        "buildmatrix.model",
        "buildmatrix.builder",
        "buildmatrix.publish",
        "buildmatrix.docker",
        "buildmatrix.cli",
    ),
    "builder": ("buildmatrix.publish", "buildmatrix.cli", "buildmatrix.progress"),
    "docker": ("buildmatrix.publish", "buildmatrix.cli", "buildmatrix.progress"),
    "publish": ("buildmatrix.cli", "buildmatrix.progress"),
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
LEAVES = {"vocab.py": set[str](), "errors.py": {"buildmatrix.vocab"}}


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_the_vocabulary_and_the_errors_import_only_below_them(leaf: str) -> None:
    ours = {n for n in imports(PACKAGE / leaf) if n == "buildmatrix" or n.startswith("buildmatrix.")}
    assert ours <= LEAVES[leaf], f"{leaf} imports {sorted(ours - LEAVES[leaf])}"


def test_every_module_named_in_architecture_md_exists() -> None:
    text = (REPO / "ARCHITECTURE.md").read_text()
    named = {token.strip("`") for token in text.split() if token.strip("`,.;:()").endswith(".py")}
    names = {n.strip("`,.;:()") for n in named}
    existing = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    for name in names:
        if name == "setup.py":
            continue
        assert any(e == name or e.endswith("/" + name) for e in existing), (
            f"ARCHITECTURE.md names {name}: no such module"
        )
