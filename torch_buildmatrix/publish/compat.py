"""`compat-table` and `fetch-site` as library calls, for a project: typed options in, the publish's or the fetch's
report out (the command line only parses, calls these and renders)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.builder.records.parse import RecordRules
from torch_buildmatrix.builder.records.store import ResultStore
from torch_buildmatrix.builder.workspace import Workspace
from torch_buildmatrix.errors import UserError
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.registry import Registry, published_pythons
from torch_buildmatrix.publish.docs import DocsLayout, docs_problems, read_docs_table
from torch_buildmatrix.publish.fetch import TOTAL_DEADLINE, FetchReport, fetch_site
from torch_buildmatrix.publish.ledger import reason_problem
from torch_buildmatrix.publish.site import SiteReport, publish
from torch_buildmatrix.publish.staging import Withdrawal
from torch_buildmatrix.util.http import NETWORK_DEADLINE


@dataclass(frozen=True)
class CompatOptions:
    matrix: Path = Path("matrix.yaml")
    offline: bool = False  # the cached registry answers only
    network_deadline: float = NETWORK_DEADLINE  # seconds for all its registry reads
    site_url: str | None = None  # where the site is served (None: the committed table's, else <site>)
    check: bool = False  # write nothing: the committed docs against matrix.yaml
    yank: tuple[str, ...] = ()  # wheels withdrawn as PEP 592 yanked (still served, marked)
    remove: tuple[str, ...] = ()  # wheels withdrawn from the index
    reason: str = ""  # why they are withdrawn (required with them)
    new_ledger: bool = False
    first_publish: bool = False


@dataclass(frozen=True)
class CompatOutcome:
    matrix: Matrix
    problems: list[str]  # why the docs are stale (check) or the site was not published; empty: all is well
    report: SiteReport | None = None  # the publish's (None with check)


def compat_table(options: CompatOptions) -> CompatOutcome:
    """With check, the committed docs against matrix.yaml. Else, under the publish lock: the live site's ledger and
    table, this run's records over them and the committed table; the site is built and checked beside the live one,
    and nothing (site or docs) changes unless every check passes."""
    matrix = load_matrix(options.matrix.resolve())
    workspace = Workspace.for_root(matrix.root)
    withdrawals = [Withdrawal(w, options.reason) for w in options.yank]
    withdrawals += [Withdrawal(w, options.reason, remove=True) for w in options.remove]
    if withdrawals and (problem := reason_problem(options.reason)):
        raise UserError(f"--reason {problem} (nothing was written)")
    if options.check:
        if withdrawals or options.new_ledger or options.first_publish:
            raise UserError("--check writes nothing: it takes no --yank, --remove, --new-ledger or --first-publish")
        return CompatOutcome(matrix, docs_problems(read_docs_table(matrix.root, DocsLayout.of(matrix)), matrix))
    registry = Registry(workspace.cache_dir / "registry", offline=options.offline, total=options.network_deadline)
    available = published_pythons(matrix, registry)
    results = ResultStore(workspace.results_dir, RecordRules.of(matrix)).all()
    _table, report = publish(
        matrix,
        expand(matrix, available),
        results,
        available,
        wheels_dir=workspace.wheels_dir,
        site=workspace.wheels_dir / "site",
        site_url=options.site_url,
        docs_root=matrix.root,
        withdrawals=withdrawals,
        new_ledger=options.new_ledger,
        layout=DocsLayout.of(matrix),
        first_publish=options.first_publish,
    )
    return CompatOutcome(matrix, report.problems, report)


@dataclass(frozen=True)
class FetchOptions:
    site_url: str
    matrix: Path = Path("matrix.yaml")
    new_ledger: bool = False
    first_publish: bool = False
    network_deadline: float = TOTAL_DEADLINE  # seconds for the whole fetch


def fetch(options: FetchOptions) -> tuple[FetchReport, Path]:
    """fetch_site into the project's wheels/site, with the committed table as what the site must at least show (when
    it is this project's: a template's or a copy's docs say nothing about this site); returns the report and where
    the site now is."""
    matrix = load_matrix(options.matrix.resolve())
    site = Workspace.for_root(matrix.root).wheels_dir / "site"
    layout = DocsLayout.of(matrix)
    committed = read_docs_table(matrix.root, layout) if (matrix.root / layout.table).is_file() else None
    if committed is not None and committed.plugin != matrix.plugin.distribution:
        committed = None
    report = fetch_site(
        options.site_url,
        site,
        committed=committed,
        new_ledger=options.new_ledger,
        first_publish=options.first_publish,
        total=options.network_deadline,
    )
    return report, site
