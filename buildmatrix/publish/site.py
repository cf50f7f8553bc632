"""Writes what is rendered from a CompatTable: the docs (committed) and the static site with its wheel index (wheels/site/)."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from buildmatrix.model.matrix import Matrix
from buildmatrix.publish.index import (
    IndexedWheel,
    check_coverage,
    index_pages,
    project_of,
    read_metadata,
    requires_python,
    sha256_hex,
    wheels_to_index,
)
from buildmatrix.publish.markdown import compatibility_markdown, readme_section, replace_readme_section
from buildmatrix.publish.page import site_page
from buildmatrix.publish.table import CompatTable, stale_problems
from buildmatrix.util.atomic import copy_file_atomic, write_bytes_atomic, write_text_atomic

log = logging.getLogger(__name__)

DOCS_MARKDOWN = Path("docs/compatibility.md")
DOCS_TABLE = Path("docs/compatibility.json")  # the committed input the docs are rendered from
README = Path("README.md")


@dataclass(frozen=True)
class SiteReport:
    site: Path
    wheels: int
    pages: list[str]
    problems: list[str]  # from the coverage check; empty when index and results agree


def rendered_docs(table: CompatTable, readme: str) -> dict[Path, str]:
    """The committed files, by path relative to the project root (pure)."""
    return {
        DOCS_TABLE: table.to_json(),
        DOCS_MARKDOWN: compatibility_markdown(table),
        README: replace_readme_section(readme, readme_section(table)),
    }


def docs_problems(table: CompatTable, matrix: Matrix) -> list[str]:
    """Ways the committed docs are stale: the recorded table no longer matches matrix.yaml, or a file differs from its rendering."""
    problems = [f"{DOCS_TABLE}: {p}; run `nox -s compat-table`" for p in stale_problems(table, matrix)]
    for rel, text in rendered_docs(table, (matrix.root / README).read_text()).items():
        path = matrix.root / rel
        if not path.is_file() or path.read_text() != text:
            problems.append(f"{rel} is not what {DOCS_TABLE} renders to; run `nox -s compat-table`")
    return problems


def write_docs(table: CompatTable, root: Path) -> list[Path]:
    """Write the docs whose content changed; returns them."""
    changed = []
    for rel, text in rendered_docs(table, (root / README).read_text()).items():
        path = root / rel
        if not path.is_file() or path.read_text() != text:
            write_text_atomic(path, text)
            changed.append(path)
    return changed


def _stage(table: CompatTable, wheels_dir: Path, staging: Path) -> tuple[list[IndexedWheel], set[str]]:
    indexed = []
    for wheel in wheels_to_index(table):
        source = wheels_dir / wheel.path
        if not source.is_file():
            log.warning("%s is recorded by a passed cell but missing from %s", wheel.path, wheels_dir)
            continue
        metadata = read_metadata(source)
        copy_file_atomic(source, staging / wheel.path)
        write_bytes_atomic(staging / (wheel.path + ".metadata"), metadata)
        indexed.append(
            IndexedWheel(
                project_of(wheel.filename),
                wheel.filename,
                wheel.path,
                sha256_hex(source.read_bytes()),
                sha256_hex(metadata),
                requires_python(metadata),
            )
        )
    logs = set()
    for cell in table.cells:
        if cell.log and (wheels_dir / cell.log).is_file():
            copy_file_atomic(wheels_dir / cell.log, staging / cell.log)
            logs.add(cell.log)
    return indexed, logs


def write_site(table: CompatTable, wheels_dir: Path, site: Path) -> SiteReport:
    """Build the whole site in a staging directory, swap it in, then check the index against the results."""
    staging = site.with_name(f".{site.name}.staging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    indexed, logs = _stage(table, wheels_dir, staging)
    pages = index_pages(table, indexed)
    for page in pages:
        write_text_atomic(staging / page.path, page.html)
    write_text_atomic(staging / "compatibility.json", table.to_json())
    write_text_atomic(staging / "index.html", site_page(table, logs, [p.path for p in pages]))
    old = site.with_name(f".{site.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if site.exists():
        site.rename(old)
    staging.rename(site)
    if old.exists():
        shutil.rmtree(old)
    return SiteReport(site, len(indexed), [p.path for p in pages], check_coverage(table, site))
