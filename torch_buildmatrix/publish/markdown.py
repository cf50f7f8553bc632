"""Pure Markdown views of a CompatTable: docs/compatibility.md and README's table between its markers."""

from __future__ import annotations

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torch_buildmatrix.model.contract import README_END, README_START, TorchPin, readme_block
from torch_buildmatrix.publish.advice import (
    any_torch_command,
    deep_summary,
    free_threaded_note,
    install_commands,
    partial_words,
    release_index_command,
    smoke_mark,
)
from torch_buildmatrix.publish.table import CompatCell, CompatTable
from torch_buildmatrix.util.when import day
from torch_buildmatrix.vocab import FeatureState, Status

NOT_IN_MATRIX = "—"
NOT_AVAILABLE_MARK = "\N{EN DASH}"  # a feature the release lacks (an en dash, spelled out: it looks like a hyphen)
FEATURE_MARKS = {
    FeatureState.AVAILABLE: "✓",
    FeatureState.PARTIAL: "◐",
    FeatureState.NOT_AVAILABLE: NOT_AVAILABLE_MARK,
    FeatureState.FAILED: "✗",
}


def _label_start(version_text: str) -> str:
    """`+torch…` for 0.2.0+torch.2.13.drv.2, `+tk` for 2.2.0+tk: how a pin's local label begins."""
    try:
        local = Version(version_text).local or ""
    except InvalidVersion:
        return ""
    head, dot, _ = local.partition(".")
    return f"`+{head}…`" if dot else f"`+{head}`" if head else ""


# Said instead of the command for whatever torch is installed when the wheels carry no torch pin (check.torch-pin:
# none).
NO_ANY_TORCH = (
    "Its wheels do not name the torch release they were built for, so no one command serves whatever torch is "
    "installed (an installer would take the newest release's wheel): use your torch release's index."
)


def look_alike_note(table: CompatTable, pinned_where: str = "below") -> str:
    """Said wherever an unpinned command is shown (docs, README, page): pip merges every index it is given, so the
    project's names (its wheel, and its SDK's wheel when it publishes one) can be taken on the public index.
    `pinned_where` says where the pinned commands are, as seen from where the note is."""
    sdk = table.sdk.distribution if table.sdk is not None and table.sdk.publishes_wheels else ""
    own = {canonicalize_name(n) for n in table.own_names}
    names = [n for n in (table.plugin, *([sdk] if sdk else [])) if canonicalize_name(n) not in own]
    if not names:  # every name the commands install is the project's own on the public index: nothing to warn of
        return ""
    labels = []
    cells = [c for c in table.cells if c.installable]
    if cells:
        labels.append(_label_start(cells[0].requirement.partition("==")[2]))
        wheels = [c.sdk_wheel.filename for c in cells if c.sdk_wheel is not None]
        if sdk and wheels:
            labels.append(_label_start(wheels[0].split("-")[1]))
    shown = f" ({', '.join(label for label in labels if label)})" if any(labels) else ""
    both = len(names) > 1
    unpinned = "your torch release's index" + (
        ", and the one for whatever torch is installed" if table.torch_pin == TorchPin.RELEASE_LINE else ""
    )
    return (
        f"Look-alike packages: {' and '.join(f'`{n}`' for n in names)} {'are' if both else 'is'} not ours on the "
        f"public index, so anyone can publish {'them' if both else 'it'} there. pip merges every index it is given "
        f"and takes the highest version, so with pip the unpinned commands ({unpinned}) can install a look-alike; "
        "`uv pip install` with the same arguments cannot (uv takes a name from the first index that has it, and "
        f"`--extra-index-url` comes first). With pip, use the pinned commands ({pinned_where}): "
        + (f"both pins carry local version labels{shown}" if sdk else f"the pin carries a local version label{shown}")
        + ", which the public index refuses, so they install our wheels with pip and uv alike."
    )


_MARKDOWN = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "<": "&lt;",
        ">": "&gt;",
        "\n": " ",
        "\r": " ",
    }
)


def md(text: object) -> str:
    """Any string from a record or a table as plain Markdown text inside a table cell: no markup, no HTML (so never
    README's end marker), no cell separator, one line."""
    return str(text).translate(_MARKDOWN)


def site_or_placeholder(table: CompatTable) -> str:
    return table.site_url.rstrip("/") if table.site_url else "<site>"


def cell_text(table: CompatTable, cell: CompatCell | None, links: bool = True) -> str:
    """✓ with smoke counts, ✗ with the failed step, 'not built', or — for a combination outside the matrix."""
    if cell is None:
        return NOT_IN_MATRIX
    if cell.status == Status.NOT_BUILT:
        return str(Status.NOT_BUILT)
    if cell.status == Status.PASSED:
        text = f"✓ {smoke_mark(cell.smoke)}" if cell.smoke else "✓"
        text += f" {LATEST_FAILED_MARK}" if cell.latest is not None else ""
    else:
        text = f"✗ {md(cell.failed_step)}" + (f" ({md(cell.failure)})" if cell.failure else "")
    if cell.deep is not None:
        text += f", {md(deep_summary(table, cell))}"
    if links and table.site_url and cell.log:
        return f"[{text}]({site_or_placeholder(table)}/{cell.log})"
    return text


def grid(table: CompatTable, links: bool = True) -> str:
    """Rows torch release x SDK version (when there is an SDK), one column per Python."""
    sdk = f" {table.sdk.name} |" if table.sdk else ""
    head = f"| torch |{sdk} " + " | ".join(f"Python {p}" for p in table.pythons) + " |"
    rule = "|---|" + ("---|" if table.sdk else "") + "---|" * len(table.pythons)
    rows = [head, rule]
    for release, column, cells in table.grid_rows():
        marks = [cell_text(table, cell, links) for cell in cells]
        version = f" {md(column.version)} |" if table.sdk else ""
        rows.append(f"| {md(release.label)} |{version} " + " | ".join(marks) + " |")
    return "\n".join(rows) + "\n"


def legend(table: CompatTable) -> str:
    built = [c for c in table.cells if c.status != Status.NOT_BUILT]
    passed = [c for c in built if c.status == Status.PASSED]
    return (
        f"{len(table.cells)} cells: {len(passed)} passed, {len(built) - len(passed)} failed, "
        f"{len(table.cells) - len(built)} not built. "
        "✓ passed (smoke tests passed, and how many the suite skipped), ✗ failed (in the named step), "
        f"{NOT_IN_MATRIX} not in the matrix (torch publishes no wheel for that Python, or matrix.yaml excludes it).\n"
        + (f"{free_threaded_note(table)}\n" if free_threaded_note(table) else "")
        + (DEEP_NOTE if any(c.deep for c in table.cells) else "")
        + (CLASSES_NOTE if any(c.failure for c in table.cells) else "")
        + (LATEST_FAILED_NOTE if any(c.latest for c in table.cells) else "")
    )


def history_section(table: CompatTable) -> str:
    """When the results shown were recorded, and the cells whose latest attempt failed after the pass shown ('' when
    no cell says when it was recorded: tables that predate recorded times render as before)."""
    times = sorted(c.recorded for c in table.cells if c.recorded)
    if not times:
        return ""
    lines = [f"Results recorded from {day(times[0])} to {day(times[-1])} (UTC).\n"]
    stale = [c for c in table.cells if c.latest is not None]
    if stale:
        lines.append("| cell | result shown | latest attempt |\n|---|---|---|")
        for cell in stale:
            assert cell.latest is not None
            how = f" ({md(cell.latest.failure)})" if cell.latest.failure else ""
            lines.append(
                f"| {md(cell.id)} | passed, {day(cell.recorded)} | {md(cell.latest.status)} in "
                f"{md(cell.latest.failed_step or 'an unknown step')}{how}, {day(cell.latest.recorded)} |"
            )
        lines[-1] += "\n"
    return "\n".join(lines)


LATEST_FAILED_MARK = "†"
# Only when some cell shows a pass whose latest attempt failed.
LATEST_FAILED_NOTE = (
    f"{LATEST_FAILED_MARK} the latest attempt failed; the result shown is the last pass, whose wheels stay "
    "published (when each was recorded: docs/compatibility.md).\n"
)
# Only with test tiers (smoke.tiers), so docs of projects without them stay byte-identical.
DEEP_NOTE = (
    "Counts are the quick suite's, run on every cell; deep: the build's deep suite, run once per build on the cell "
    "named (on the cell itself where none is named): ✓ passed (skipped), ✗ failed (which fails every cell of the "
    "build), not run (every test skipped).\n"
)
# Only when some record carries a failure class, so docs of older records stay byte-identical.
CLASSES_NOTE = (
    "A failure marked transient (network, timeout, signal, full disk) or interrupted is rebuilt by the next run; "
    "a deterministic one only when its inputs change.\n"
)


def shows_features(table: CompatTable) -> bool:
    """Whether the pages have a features section: when a release has features, or when no cell has run its smoke
    suite yet (the section says so). A suite that ran and reports no features (most projects' own suites) gets
    none: "no feature is known" would read as if nothing had been tested."""
    return any(r.features for r in table.releases) or not any(c.smoke is not None for c in table.cells)


def features_table(table: CompatTable) -> str:
    """A row per feature, by its title (smoke.features; its key's words without one), a column per release."""
    shown = table.features_shown()
    measured = [r for r in table.releases if r.features]
    if not shown:
        return "No cell has run the smoke suite yet, so no feature is known.\n"
    rows = ["| feature | " + " | ".join(md(r.label) for r in measured) + " |", "|---|" + "---|" * len(measured)]
    reasons: dict[str, int] = {}  # why a release lacks a feature -> its footnote number, in order of first use
    for name, title in shown:
        marks = []
        for release in measured:
            support = release.features.get(name)
            if support is None:
                marks.append("?")
            elif support.state == FeatureState.NOT_AVAILABLE:
                marks.append(not_available_mark(support.note, reasons))
            else:
                marks.append(f"{FEATURE_MARKS[support.state]} {md(support.note)}".strip())
        rows.append(f"| {md(title)} | " + " | ".join(marks) + " |")
    unmeasured = [md(r.label) for r in table.releases if not r.features]
    tail = f"\nNot measured yet (no cell ran): {', '.join(unmeasured)}.\n" if unmeasured else ""
    key = f"\n✓ available, ◐ {partial_words(table)}, {NOT_AVAILABLE_MARK} not available in this release, ✗ failed.\n"
    return "\n".join(rows) + "\n" + key + reasons_list(reasons) + tail


def not_available_mark(reason: str, reasons: dict[str, int]) -> str:
    """The mark of a feature a release lacks, with the number of its reason's footnote: a reason is often long and
    shared by several releases (a package that needs a newer torch), so the table cell holds the mark and "[2]",
    and the reason is written once under the table. No reason recorded: the mark alone."""
    if not reason:
        return NOT_AVAILABLE_MARK
    number = reasons.setdefault(reason, len(reasons) + 1)
    return f"{NOT_AVAILABLE_MARK} \\[{number}\\]"


def reasons_list(reasons: dict[str, int]) -> str:
    """The footnotes of not_available_mark: why each release lacks what it lacks."""
    if not reasons:
        return ""
    lines = [f"- \\[{number}\\] {md(reason)}" for reason, number in reasons.items()]
    return "\nNot available because:\n\n" + "\n".join(lines) + "\n"


def newest_sdk(table: CompatTable) -> str:
    return f" and the newest {table.sdk.name} it was tested with" if table.sdk else ""


def install_section(table: CompatTable) -> str:
    site = site_or_placeholder(table)
    lines = [
        f"`{site}` is where the wheel site is served (`torch-buildmatrix compat-table` writes it to `wheels/site/`). "
        "Every command installs wheels only, never a source distribution, and leaves the installed torch alone; "
        "`uv pip install` takes the same arguments.\n",
    ]
    installable = [c for c in table.cells if c.installable]
    if not installable:
        return (
            lines[0]
            + "\nNo wheel is published yet: build cells with `torch-buildmatrix build`, "
            + "then run `torch-buildmatrix compat-table`.\n"
        )
    lines.append(
        "With torch installed, install from the index of your torch release: it holds only the wheels built for "
        f"that release, so pip and uv pick the one for your Python{newest_sdk(table)}. "
    )
    any_torch = any_torch_command(table, site)
    if any_torch is None:
        lines[-1] += NO_ANY_TORCH + "\n"
    else:
        lines[-1] += (
            "For whatever torch is installed, from the index of every release (restating your torch as a requirement "
            "makes the installer pick the wheel built for it instead of upgrading torch):\n"
        )
        lines.append(f"```sh\n{any_torch}\n```\n")
    if note := look_alike_note(table):
        lines.append(note + "\n")
    current = f"{table.plugin}=={table.plugin_version}+"
    older = sorted({c.requirement for c in installable if c.requirement != current + c.key.local_version_label})
    if older:
        lines.append(
            f"The recorded plugin wheels were built under an earlier local-label scheme (e.g. `{older[0]}`); their "
            f"pins below stay valid for the wheels the site serves. The next full-matrix run builds "
            f"`{current}{installable[0].key.local_version_label}`-style labels, which sort numerically.\n"
        )
    unlabelled = sorted({c.sdk_wheel.filename for c in installable if c.sdk_wheel and "+" not in c.sdk_wheel.filename})
    if unlabelled and table.sdk is not None:
        lines.append(
            f"The recorded {table.sdk.name} wheels ({', '.join(unlabelled)}) were built before their version carried "
            f"a local label, so until their cells are rebuilt a {table.sdk.name} pin without it is only as safe as "
            "pip's index order.\n"
        )
    by_minor: dict[str, list[CompatCell]] = {}
    pythons_of: dict[str, list[str]] = {}
    for cell in installable:
        by_minor.setdefault(table.release(cell.release).minor, []).append(cell)
        pythons_of.setdefault(cell.requirement, []).append(cell.python)
    for minor, cells in by_minor.items():
        labels = ", ".join(md(r.label) for r in table.releases if r.minor == minor)
        lines.append(f"### torch {minor} ({labels})\n")
        lines.append(f"```sh\n{release_index_command(table, minor, site)}\n```\n")
        seen: set[str] = set()
        for cell in cells:
            if cell.requirement in seen:
                continue
            seen.add(cell.requirement)
            pythons = ", ".join(pythons_of[cell.requirement])
            commands = install_commands(table, cell, site)
            with_sdk = f", {table.sdk.name} {table.sdk_short(cell.sdk)}" if table.sdk else ""
            lines.append(
                f"Pinned{with_sdk} (Python {pythons}):\n\n```sh\n{commands.pinned}\n# or\n{commands.find_links}\n```\n"
            )
    return "\n".join(lines)


def compatibility_markdown(table: CompatTable) -> str:
    """The whole of docs/compatibility.md."""
    return "\n".join(
        [
            f"# {table.plugin} {table.plugin_version} compatibility\n",
            "Generated by `torch-buildmatrix compat-table` from `matrix.yaml` and the cell results; do not edit by "
            "hand.\n",
            "## Cells\n",
            grid(table),
            legend(table),
            *([history] if (history := history_section(table)) else []),
            *(["## Features per torch release\n", features_table(table)] if shows_features(table) else []),
            "## Install\n",
            install_section(table),
        ]
    )


def readme_section(table: CompatTable) -> str:
    return "\n".join(
        [
            README_START,
            grid(table, links=False),
            legend(table)
            + ("Features per torch release and install commands" if shows_features(table) else "Install commands")
            + ": [docs/compatibility.md](docs/compatibility.md).\n",
            "Install with torch already installed (it is kept): `"
            + release_index_command(table, "X.Y", site_or_placeholder(table))
            + "` with your torch's X.Y"
            + (
                f", or for whatever torch you have: `{any_torch}`.\n"
                if (any_torch := any_torch_command(table, site_or_placeholder(table))) is not None
                else ". " + NO_ANY_TORCH + "\n"
            ),
            *([note] if (note := look_alike_note(table, "in [docs/compatibility.md](docs/compatibility.md)")) else []),
            README_END,
        ]
    )


def replace_readme_section(readme: str, section: str) -> str:
    """README with the text between the markers replaced; the markers must be there exactly once."""
    block = readme_block(readme)
    if block.bounds is None or block.problem:
        raise ValueError(block.problem)
    start, end = block.bounds
    return readme[:start] + section + readme[end:]
