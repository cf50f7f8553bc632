"""Pure Markdown views of a CompatTable: docs/compatibility.md and README's table between its markers."""

from __future__ import annotations

from buildmatrix.compat import (
    AVAILABLE,
    FEATURE_FAILED,
    NOT_AVAILABLE,
    NOT_BUILT,
    PARTIAL,
    CompatCell,
    CompatTable,
    install_commands,
)
from buildmatrix.results import PASSED

README_START = "<!-- compat-table:start -->"
README_END = "<!-- compat-table:end -->"
NOT_IN_MATRIX = "—"
FEATURE_MARKS = {AVAILABLE: "✓", PARTIAL: "◐", NOT_AVAILABLE: "–", FEATURE_FAILED: "✗"}


def site_or_placeholder(table: CompatTable) -> str:
    return table.site_url.rstrip("/") if table.site_url else "<site>"


def cell_text(table: CompatTable, cell: CompatCell | None, links: bool = True) -> str:
    """✓ with smoke counts, ✗ with the failed step, 'not built', or — for a combination outside the matrix."""
    if cell is None:
        return NOT_IN_MATRIX
    if cell.status == NOT_BUILT:
        return NOT_BUILT
    if cell.status == PASSED:
        text = f"✓ {cell.smoke.passed}/{cell.smoke.total}" if cell.smoke else "✓"
    else:
        text = f"✗ {cell.failed_step}"
    if links and table.site_url and cell.log:
        return f"[{text}]({site_or_placeholder(table)}/{cell.log})"
    return text


def grid(table: CompatTable, links: bool = True) -> str:
    """Rows torch release x driver, one column per Python."""
    head = "| torch | driver | " + " | ".join(f"Python {p}" for p in table.pythons) + " |"
    rule = "|---|---|" + "---|" * len(table.pythons)
    rows = [head, rule]
    for release in table.releases:
        for driver in table.drivers:
            cells = [table.cell(release.key, python, driver.major) for python in table.pythons]
            if not any(cells):
                continue  # the matrix builds this release with no cell for this driver: no row of dashes
            marks = [cell_text(table, cell, links) for cell in cells]
            rows.append(f"| {release.label} | {driver.api} | " + " | ".join(marks) + " |")
    return "\n".join(rows) + "\n"


def legend(table: CompatTable) -> str:
    built = [c for c in table.cells if c.status != NOT_BUILT]
    passed = [c for c in built if c.status == PASSED]
    return (f"{len(table.cells)} cells: {len(passed)} passed, {len(built) - len(passed)} failed, {len(table.cells) - len(built)} not built. "
            f"✓ passed (smoke tests passed/total), ✗ failed (in the named step), {NOT_IN_MATRIX} not in the matrix "
            "(torch publishes no wheel for that Python, or matrix.yaml excludes it).\n")


def features_table(table: CompatTable) -> str:
    names = sorted({name for release in table.releases for name in release.features})
    measured = [r for r in table.releases if r.features]
    if not names:
        return "No cell has run the smoke suite yet, so no feature is known.\n"
    rows = ["| feature | " + " | ".join(r.label for r in measured) + " |", "|---|" + "---|" * len(measured)]
    for name in names:
        marks = []
        for release in measured:
            support = release.features.get(name)
            if support is None:
                marks.append("?")
                continue
            mark = FEATURE_MARKS[support.state]
            marks.append(f"{mark} {support.note}".strip() if support.state != NOT_AVAILABLE else mark)
        rows.append(f"| `{name}` | " + " | ".join(marks) + " |")
    unmeasured = [r.label for r in table.releases if not r.features]
    tail = f"\nNot measured yet (no cell ran): {', '.join(unmeasured)}.\n" if unmeasured else ""
    key = "\n✓ available, ◐ only with the drivers named, – not available in this release, ✗ failed.\n"
    return "\n".join(rows) + "\n" + key + tail


def install_section(table: CompatTable) -> str:
    site = site_or_placeholder(table)
    lines = [
        f"`{site}` is where the wheel site is served (`nox -s compat-table` writes it to `wheels/site/`). "
        "Each command pins the exact plugin and driver wheels of a tested cell and refuses source distributions; "
        "pip picks the wheel matching your Python. torch itself comes from your usual index.\n",
    ]
    installable = [c for c in table.cells if c.installable]
    if not installable:
        return lines[0] + "\nNo wheel is published yet: build cells with `nox -s build-matrix`, then run `nox -s compat-table`.\n"
    seen: set[str] = set()
    for cell in installable:
        if cell.requirement in seen:
            continue
        seen.add(cell.requirement)
        release = table.release(cell.release)
        pythons = ", ".join(c.python for c in installable if c.requirement == cell.requirement)
        index, links = install_commands(table, cell, site)
        lines.append(f"torch {release.label}, driver {cell.driver} (Python {pythons}):\n\n```sh\n{index}\n# or\n{links}\n```\n")
    return "\n".join(lines)


def compatibility_markdown(table: CompatTable) -> str:
    """The whole of docs/compatibility.md."""
    return "\n".join([
        f"# {table.plugin} {table.plugin_version} compatibility\n",
        "Generated by `nox -s compat-table` from `matrix.yaml` and the cell results; do not edit by hand.\n",
        "## Cells\n",
        grid(table),
        legend(table),
        "## Features per torch release\n",
        features_table(table),
        "## Install\n",
        install_section(table),
    ])


def readme_section(table: CompatTable) -> str:
    return "\n".join([
        README_START,
        grid(table, links=False),
        legend(table) + "Features per torch release and install commands: [docs/compatibility.md](docs/compatibility.md).",
        README_END,
    ])


def replace_readme_section(readme: str, section: str) -> str:
    """README with the text between the markers replaced; the markers must be there exactly once."""
    if readme.count(README_START) != 1 or readme.count(README_END) != 1 or readme.index(README_START) > readme.index(README_END):
        raise ValueError(f"README needs exactly one {README_START} ... {README_END} pair")
    head = readme[: readme.index(README_START)]
    tail = readme[readme.index(README_END) + len(README_END):]
    return head + section + tail
