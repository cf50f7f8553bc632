"""The `outdated` report as Markdown: what matrix.yaml lacks, what was applied, the drift probe's verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from torch_buildmatrix.builder.probe import ProbeReport
from torch_buildmatrix.model.matrix import TorchRelease
from torch_buildmatrix.model.outdated import Comparison
from torch_buildmatrix.vocab import FindingKind, Status

SECTIONS = (
    (FindingKind.NEW_MINOR, "New torch minors"),
    (FindingKind.NEW_PATCH, "New patch releases of listed minors"),
    (FindingKind.NEW_PYTHON, "New Pythons published by listed releases"),
    (FindingKind.YANKED, "Yanked releases"),
)


def outdated_markdown(
    comparison: Comparison,
    applied: bool,
    probes: Mapping[TorchRelease, ProbeReport | str] | None = None,
    root: Path | None = None,
) -> str:
    """probes: per new or moved release, its probe report, or why it was not probed. A probe's log is named relative
    to the project `root` (what the workflow's outdated-report artifact holds), never by the machine's absolute path:
    the report becomes a pull request's body."""
    count = len(comparison.findings)
    lines = ["# matrix.yaml against the torch registry", ""]
    lines.append(f"{count} finding(s)." if count else "matrix.yaml is up to date with its torch sources.")
    lines.append("")
    for kind, title in SECTIONS:
        found = comparison.of_kind(kind)
        if not found:
            continue
        lines += [f"## {title}", ""]
        for finding in found:
            state = "" if finding.edit is None else (" (applied)" if applied else " (`--apply` does this)")
            lines.append(f"- **{finding.subject}**: needs {finding.need}{state}")
        lines.append("")
    if comparison.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in comparison.notes] + [""]
    if probes:
        lines += ["## Drift probe", ""]
        for release, report in probes.items():
            name = f"torch {release.version} ({release.variant})"
            if isinstance(report, str):
                lines.append(f"- {name}: {report}")
                continue
            lines.append(f"- {name}, cell `{report.cell_id}`: **{report.verdict()}**")
            for interface, errors in report.by_interface().items():
                lines.append(f"  - {interface}")
                lines += [f"    - `{e.file}:{e.line}` ({e.kind}): {e.message}" for e in errors]
            if report.failed_tests:
                lines.append("  - smoke tests that failed")
                lines += [f"    - {test}" for test in report.failed_tests]
            if report.log is not None and report.status != Status.PASSED:
                lines.append(f"  - full log: `{_project_path(report.log, root)}`")
        lines.append("")
    return "\n".join(lines)


def _project_path(path: Path, root: Path | None) -> str:
    """`path` relative to the project root when it is inside it (build/probe/torch2.14.1/out/logs/<cell>.log)."""
    if root is not None and path.is_relative_to(root):
        return path.relative_to(root).as_posix()
    return str(path)
