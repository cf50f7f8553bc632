"""The package's shape in figures: its largest modules, how many are over the line limit, and its import cycles.

    python3 scripts/module_graph.py [--top N] [--package DIR]

An import is an edge wherever it is written: at module level, inside a function, or under `if TYPE_CHECKING:` (shown
apart, since it runs only for the type checker). A cycle is a strongly connected group of modules. tests/unit/
test_architecture.py asserts on the same figures (no cycle; no module over LINE_LIMIT lines but the exempt one)."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "torch_buildmatrix"
LINE_LIMIT = 500
# The declared options table: one entry per matrix.yaml option, long by design.
EXEMPT = frozenset({"torch_buildmatrix.model.options"})


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    where: str  # "module", "function" or "type-checking"


@dataclass
class Graph:
    modules: dict[str, Path]
    edges: list[Edge] = field(default_factory=list)

    def lines(self, module: str) -> int:
        return len(self.modules[module].read_text(encoding="utf-8").splitlines())

    def cycles(self, kinds: frozenset[str] = frozenset({"module", "function", "type-checking"})) -> list[list[str]]:
        """Strongly connected groups of more than one module (or a module importing itself), sorted."""
        succ: dict[str, set[str]] = {m: set() for m in self.modules}
        for edge in self.edges:
            if edge.where in kinds:
                succ[edge.source].add(edge.target)
        return sorted(sorted(group) for group in strongly_connected(succ) if len(group) > 1 or _self_loop(group, succ))


def _self_loop(group: list[str], succ: dict[str, set[str]]) -> bool:
    return group[0] in succ[group[0]]


def strongly_connected(succ: dict[str, set[str]]) -> Iterator[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                yield group


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Each import statement with where it is written."""

    def visit(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, where
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from visit(child, "function")
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.body:
                    yield from visit(ast.Module(body=[sub], type_ignores=[]), "type-checking")
                for sub in child.orelse:
                    yield from visit(ast.Module(body=[sub], type_ignores=[]), where)
            else:
                yield from visit(child, where)

    yield from visit(tree, "module")


def read_graph(package: Path = PACKAGE) -> Graph:
    modules = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    graph = Graph(modules)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for node, where in _imports(tree):
            for target in _targets(node, name, is_package, modules):
                if target != name or isinstance(node, ast.Import):
                    graph.edges.append(Edge(name, target, node.lineno, where))
    return graph


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The package's modules an import statement loads (a `from X import Y` loads X.Y when it is a module)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = node.module or ""
    if node.level:
        anchor = name.split(".") if is_package else name.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, *([base] if base else [])])
    found = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules}
    if base in modules and len(found) < len(node.names):
        found.add(base)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=12, help="how many of the largest modules to list (default 12)")
    parser.add_argument(
        "--package", type=Path, default=PACKAGE, help="the package directory (default: torch_buildmatrix/)"
    )
    args = parser.parse_args()
    graph = read_graph(args.package)
    sizes = sorted(((graph.lines(m), m) for m in graph.modules), reverse=True)
    print(f"{len(sizes)} modules, {sum(n for n, _ in sizes)} lines")
    print(f"largest {args.top}:")
    for n, m in sizes[: args.top]:
        print(f"  {n:5d}  {m}{'  (exempt)' if m in EXEMPT else ''}")
    over = [(n, m) for n, m in sizes if n > LINE_LIMIT]
    print(f"over {LINE_LIMIT} lines: {len(over)} ({len([1 for _, m in over if m not in EXEMPT])} not exempt)")
    for label, kinds in (
        ("module-level imports", frozenset({"module"})),
        ("all imports (module level, in functions, TYPE_CHECKING)", frozenset({"module", "function", "type-checking"})),
    ):
        cycles = graph.cycles(kinds)
        print(f"import cycles, {label}: {len(cycles)}")
        for group in cycles:
            print("  " + " <-> ".join(group))
    cli = args.package / "cli.py"
    cli_lines = (
        len(cli.read_text(encoding="utf-8").splitlines())
        if cli.is_file()
        else sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (args.package / "cli").rglob("*.py"))
    )
    print(f"command line: {cli_lines} lines ({'cli.py' if cli.is_file() else 'cli/'})")


if __name__ == "__main__":
    main()
