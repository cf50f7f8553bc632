"""Writes what is rendered from a CompatTable: the docs (committed), the static site and wheel index."""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import shutil
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from buildmatrix.errors import DocsError, UserError
from buildmatrix.model.matrix import Matrix
from buildmatrix.publish.index import (
    IndexedWheel,
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
from buildmatrix.publish.verify import (
    RELEASED,
    immutability_problem,
    metadata_problems,
    read_released,
    released_json,
    site_problems,
)
from buildmatrix.util.atomic import write_bytes_atomic, write_text_atomic
from buildmatrix.util.paths import read_regular, relative_path_problem

log = logging.getLogger(__name__)

DOCS_MARKDOWN = Path("docs/compatibility.md")
DOCS_TABLE = Path("docs/compatibility.json")  # the committed input the docs are rendered from
README = Path("README.md")


@dataclass(frozen=True)
class DocsLayout:
    """Where the committed docs live, relative to the project root (matrix.yaml's publish.readme, publish.docs)."""

    readme: Path = README
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


@dataclass(frozen=True)
class SiteReport:
    site: Path
    wheels: int
    pages: list[str]
    problems: list[str]  # why the staged site was not published; empty when it went live
    published: bool = True
    docs: tuple[Path, ...] = ()  # the docs rewritten with it (README, docs/compatibility.*), under the same lock


def rendered_docs(
    table: CompatTable, readme: str, readme_path: Path = README, layout: DocsLayout = DocsLayout()
) -> dict[Path, str]:
    """The committed files, by path relative to the project root (pure); raises DocsError naming readme_path when
    the README has not exactly one pair of compat-table markers."""
    try:
        readme_text = replace_readme_section(readme, readme_section(table))
    except ValueError as exc:
        raise DocsError(f"{readme_path}: {exc}") from None
    return {layout.table: table.to_json(), layout.markdown: compatibility_markdown(table), layout.readme: readme_text}


def read_docs_table(root: Path, layout: DocsLayout = DocsLayout()) -> CompatTable:
    """The committed docs/compatibility.json; raises DocsError naming it when it cannot be read or parsed."""
    path = root / layout.table
    try:
        return CompatTable.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DocsError(
            f"{path}: unreadable ({type(exc).__name__}: {exc}); regenerate it with `buildmatrix compat-table`"
        ) from None


def read_readme(root: Path, layout: DocsLayout = DocsLayout()) -> str:
    try:
        return (root / layout.readme).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DocsError(f"{root / layout.readme}: unreadable ({exc})") from None


def docs_problems(table: CompatTable, matrix: Matrix) -> list[str]:
    """Ways the committed docs are stale: the recorded table no longer matches matrix.yaml, or a file differs from its
    rendering."""
    layout = DocsLayout.of(matrix)
    problems = [f"{layout.table}: {p}; run `buildmatrix compat-table`" for p in stale_problems(table, matrix)]
    readme = read_readme(matrix.root, layout)
    for rel, text in rendered_docs(table, readme, matrix.root / layout.readme, layout).items():
        path = matrix.root / rel
        if not path.is_file() or path.read_text() != text:
            problems.append(f"{rel} is not what {layout.table} renders to; run `buildmatrix compat-table`")
    return problems


def write_docs(table: CompatTable, root: Path, layout: DocsLayout = DocsLayout()) -> list[Path]:
    """Write the docs whose content changed; returns them."""
    changed = []
    for rel, text in rendered_docs(table, read_readme(root, layout), root / layout.readme, layout).items():
        path = root / rel
        if not path.is_file() or path.read_text() != text:
            write_text_atomic(path, text)
            changed.append(path)
    return changed


def _stage(
    table: CompatTable, wheels_dir: Path, staging: Path, released: dict[str, str]
) -> tuple[list[IndexedWheel], set[str], list[str]]:
    """Copy the indexed wheels (checked against their records and the released bytes), their metadata and the logs."""
    indexed, problems = [], []
    for wheel in wheels_to_index(table):
        if not (wheels_dir / wheel.path).exists() and not (wheels_dir / wheel.path).is_symlink():
            problems.append(f"{wheel.path} is recorded by a passed cell but missing from {wheels_dir}")
            continue
        try:
            data = read_regular(wheels_dir, wheel.path)  # read once: the bytes checked are the bytes published
        except ValueError as exc:
            problems.append(f"{wheel.path}: a recorded wheel: {exc}")
            continue
        digest = sha256_hex(data)
        if digest != wheel.sha256:
            problems.append(f"{wheel.path}: sha256 {digest} differs from its cell's record ({wheel.sha256})")
            continue
        if problem := immutability_problem(wheel.path, digest, released):
            problems.append(problem)
            continue
        write_bytes_atomic(staging / wheel.path, data)
        try:
            metadata = read_metadata(staging / wheel.path)
        except (ValueError, zipfile.BadZipFile) as exc:
            problems.append(f"{wheel.path}: {exc}")
            continue
        write_bytes_atomic(staging / (wheel.path + ".metadata"), metadata)
        problems += metadata_problems(wheel.path, staging / wheel.path, staging / (wheel.path + ".metadata"))
        released[wheel.path] = digest
        indexed.append(
            IndexedWheel(
                project_of(wheel.filename),
                wheel.filename,
                wheel.path,
                digest,
                sha256_hex(metadata),
                requires_python(metadata),
            )
        )
    logs = set()
    for cell in table.cells:
        if not cell.log:
            continue
        if problem := relative_path_problem(cell.log):
            problems.append(f"{cell.id}: its log path {cell.log!r} {problem}")
            continue
        if not (wheels_dir / cell.log).exists() and not (wheels_dir / cell.log).is_symlink():
            continue  # a record merged without its log: the page shows no link
        try:
            write_bytes_atomic(staging / cell.log, read_regular(wheels_dir, cell.log))
        except ValueError as exc:
            problems.append(f"{cell.id}: its log {exc}")
            continue
        logs.add(cell.log)
    return indexed, logs, problems


def _publishable(root: Path) -> None:
    """0755 directories and 0644 files, whatever the umask: a web server running as another user reads them."""
    root.chmod(0o755)
    for path in root.rglob("*"):
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def _versions(site: Path) -> list[Path]:
    """The site's hidden siblings: built versions (.site.<ns>), the link being placed, a pre-symlink site."""
    return sorted(site.parent.glob(f".{site.name}.*"))


def recover_site(site: Path) -> None:
    """After a run killed at any point: the last live site is live again and leftovers are removed.

    `site` is a symlink to a sibling directory `.site.<ns>`, replaced in one rename(2). A site directory from
    before that layout is renamed aside to `.site.legacy` (or `.site.old`) just before the first link is placed;
    if the run died in between, that directory is linked again here.
    """
    if not site.exists() and not site.is_symlink():
        for previous in (site.with_name(f".{site.name}.legacy"), site.with_name(f".{site.name}.old")):
            if previous.is_dir():
                _link(site, previous)
                break
    live = site.resolve() if site.is_symlink() else None
    for sibling in _versions(site):
        if live is not None and sibling.resolve() == live:
            continue
        if sibling.is_dir() and not sibling.is_symlink():
            shutil.rmtree(sibling)
        else:
            sibling.unlink()


def _link(site: Path, target: Path) -> None:
    """Point `site` at `target` (a sibling) in one rename: readers see the old or the new site, never neither."""
    placing = site.with_name(f".{site.name}.link")
    placing.unlink(missing_ok=True)
    placing.symlink_to(target.name)
    placing.replace(site)
    fd = os.open(site.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap(site: Path, staged: Path) -> None:
    previous = site.resolve() if site.is_symlink() else None
    if site.is_dir() and not site.is_symlink():  # the first run with the symlink layout
        previous = site.with_name(f".{site.name}.legacy")
        site.rename(previous)  # a kill here: recover_site links it again
    _link(site, staged)
    # Only a version this code made is removed: a link the user pointed elsewhere leaves its target alone.
    ours = (
        previous is not None and previous.parent == site.parent.resolve() and previous.name.startswith(f".{site.name}.")
    )
    if ours and previous is not None and previous.is_dir() and previous != staged.resolve():
        shutil.rmtree(previous)


def write_site(
    table: CompatTable,
    wheels_dir: Path,
    site: Path,
    matrix: Matrix | None = None,
    docs_root: Path | None = None,
    *,
    layout: DocsLayout = DocsLayout(),
) -> SiteReport:
    """Build the whole site beside the live one, check it, and only then make it live in one atomic swap; then, with
    `docs_root`, rewrite the docs there from the same table, still under the publish lock (a second publisher cannot
    leave docs that describe another site than the live one).

    With problems, the staged copy is removed and the live site and the docs are left as they were. With `matrix`,
    the table is also checked against matrix.yaml.
    """
    site.parent.mkdir(parents=True, exist_ok=True)
    with _publish_lock(site):
        report = _write_site(table, wheels_dir, site, matrix)
        if report.published and docs_root is not None:
            report = dataclasses.replace(report, docs=tuple(write_docs(table, docs_root, layout)))
        return report


@contextmanager
def _publish_lock(site: Path) -> Iterator[None]:
    """One publisher at a time: a second would remove the first's staged version as a leftover."""
    with site.with_name(f".{site.name}-publish.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another compat-table is publishing {site}; wait for it to finish") from None
        yield  # the kernel drops the lock when the file closes, or when its holder dies


def _write_site(table: CompatTable, wheels_dir: Path, site: Path, matrix: Matrix | None) -> SiteReport:
    recover_site(site)
    released, problems = read_released(site)
    staging = site.with_name(f".{site.name}.{time.time_ns()}")
    staging.mkdir(parents=True)
    try:
        indexed, logs, stage_problems = _stage(table, wheels_dir, staging, released)
        problems += stage_problems
        pages = index_pages(table, indexed)
        for page in pages:
            write_text_atomic(staging / page.path, page.html)
        write_text_atomic(staging / "compatibility.json", table.to_json())
        write_text_atomic(staging / "index.html", site_page(table, logs, [p.path for p in pages]))
        write_text_atomic(staging / RELEASED, released_json(released))
        _publishable(staging)
        if not problems:
            problems = site_problems(table, staging, matrix)
        if problems:
            shutil.rmtree(staging)
            return SiteReport(site, len(indexed), [p.path for p in pages], problems, published=False)
        _swap(site, staging)
    except BaseException:
        if staging.exists() and not (site.is_symlink() and site.resolve() == staging.resolve()):
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return SiteReport(site, len(indexed), [p.path for p in pages], [], published=True)
