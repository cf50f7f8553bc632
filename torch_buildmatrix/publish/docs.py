"""The committed docs rendered from a CompatTable: docs/compatibility.md and .json and README's table (where
matrix.yaml's publish.readme and publish.docs say), and how they differ from what the table renders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.errors import DocsError
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.publish.markdown import compatibility_markdown, readme_section, replace_readme_section
from torch_buildmatrix.publish.staleness import stale_problems
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.tableparse import parse_table, read_back_problem
from torch_buildmatrix.util.atomic import write_text_atomic

DOCS_MARKDOWN = Path("docs/compatibility.md")


DOCS_TABLE = Path("docs/compatibility.json")  # the committed input the docs are rendered from


README = Path("README.md")


NO_README_HINT = "to publish without a README table, set `publish: {readme: false}` in matrix.yaml"


@dataclass(frozen=True)
class DocsLayout:
    """Where the committed docs live, relative to the project root (matrix.yaml's publish.readme, publish.docs);
    readme None: `publish.readme: false`, no README block is written (nor needed)."""

    readme: Path | None = README
    docs: Path = DOCS_TABLE.parent

    @property
    def table(self) -> Path:  # the committed input the docs are rendered from
        return self.docs / DOCS_TABLE.name

    @property
    def markdown(self) -> Path:
        return self.docs / DOCS_MARKDOWN.name

    @classmethod
    def of(cls, matrix: Matrix) -> DocsLayout:
        return cls(matrix.contract.publish_readme, matrix.contract.publish_docs)


def rendered_docs(
    table: CompatTable, readme: str, readme_path: Path = README, layout: DocsLayout = DocsLayout()
) -> dict[Path, str]:
    """The committed files, by path relative to the project root (pure); raises DocsError naming readme_path when
    the README has not exactly one pair of compat-table markers (no README at all with `publish.readme: false`), or
    when the table as written would not read back through the reader (the next publish would refuse it)."""
    text = table.to_json()
    if problem := read_back_problem(text, table):
        raise DocsError(f"{layout.table}: the table as written {problem}; nothing was written or published")
    docs = {layout.table: text, layout.markdown: compatibility_markdown(table)}
    if layout.readme is None:
        return docs
    try:
        readme_text = replace_readme_section(readme, readme_section(table))
    except ValueError as exc:
        raise DocsError(f"{readme_path}: {exc}; {NO_README_HINT}") from None
    return {**docs, layout.readme: readme_text}


def docs_of(table: CompatTable, root: Path, layout: DocsLayout) -> dict[Path, str]:
    """rendered_docs with the project's README read from `root` (when the layout has one); raises DocsError when a
    file would be written (or the README read) through a symlink that leaves the project."""
    for rel in (layout.table, layout.markdown, *((layout.readme,) if layout.readme is not None else ())):
        confined(root, rel)
    return rendered_docs(table, read_readme(root, layout), root / (layout.readme or README), layout)


def confined(root: Path, rel: Path) -> Path:
    """Where root/rel really is (symlinks followed), when that is inside the project; DocsError otherwise (like
    `patches:`, the docs never lead out of the project, whatever a directory or file on the way links to)."""
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise DocsError(
            f"{root / rel}: leads to {target}, outside the project {root} (a symlink on the way); the docs are "
            "written inside the project only (nothing was written)"
        )
    return target


def read_docs_table(root: Path, layout: DocsLayout = DocsLayout()) -> CompatTable:
    """The committed docs/compatibility.json; raises DocsError naming it when it cannot be read or parsed."""
    path = root / layout.table
    try:
        return parse_table(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DocsError(
            f"{path}: unreadable ({type(exc).__name__}: {exc}); regenerate it with `torch-buildmatrix compat-table`"
        ) from None


def read_readme(root: Path, layout: DocsLayout = DocsLayout()) -> str:
    """The README's text; "" with `publish.readme: false` (none is read or needed)."""
    if layout.readme is None:
        return ""
    try:
        return (root / layout.readme).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DocsError(f"{root / layout.readme}: unreadable ({exc}); {NO_README_HINT}") from None


def docs_problems(table: CompatTable, matrix: Matrix) -> list[str]:
    """Ways the committed docs are stale: the recorded table no longer matches matrix.yaml, or a file differs from its
    rendering."""
    layout = DocsLayout.of(matrix)
    problems = [f"{layout.table}: {p}; run `torch-buildmatrix compat-table`" for p in stale_problems(table, matrix)]
    for rel, text in docs_of(table, matrix.root, layout).items():
        path = matrix.root / rel
        if not path.is_file() or path.read_text() != text:
            problems.append(f"{rel} is not what {layout.table} renders to; run `torch-buildmatrix compat-table`")
    return problems


def write_docs(
    table: CompatTable,
    root: Path,
    layout: DocsLayout = DocsLayout(),
    rendered: dict[Path, str] | None = None,
) -> list[Path]:
    """Write the docs whose content changed (`rendered`: rendered_docs' answer, when the caller has it); returns
    them."""
    changed = []
    if rendered is None:
        rendered = docs_of(table, root, layout)
    targets = {rel: confined(root, rel) for rel in rendered}  # every one checked before any is written
    for rel, text in rendered.items():
        path, target = root / rel, targets[rel]
        if not target.is_file() or target.read_text() != text:
            write_text_atomic(target, text)  # through a link inside the project: its target, the link kept
            changed.append(path)
    return changed
